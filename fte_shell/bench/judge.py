"""Judges: the BrowseComp protocol with an LLM, and a model-free short-answer judge.

LLM judge: the grader reads the question, the agent's final response and the gold answer, and replies with
four fields — ``extracted_final_answer``, ``reasoning``, ``correct: yes|no``, ``confidence: 0-100`` — the
fields of BrowseComp's grader, asked for in this project's own words. The verdict is the CAPTURED value of
``correct: (yes|no)`` (the public reference reads the whole match, ``"correct: yes"``, and so compares it
with ``"yes"`` and marks every answer wrong).

Model-free judge (HotpotQA style): exact match and token F1 after the official normalization (lower case,
punctuation and the articles a/an/the removed, whitespace collapsed).

Verdicts are cached per run in ``RUN_DIR/judgement.json`` as ``{"llm": {...}, "match": {...}}``. A WideSearch
sweep is scored by :mod:`fte_shell.bench.widesearch` instead (its ``widesearch`` entry).
"""

from __future__ import annotations

import json
import re
import string
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..errors import ConfigError, ModelError
from ..metrics import find_runs, read_events, read_json
from ..record.jsonio import write_json_atomic
from ..stops import is_infra_failure
from .widesearch import OpenAITableJudge, is_widesearch_sweep, judge_widesearch

JUDGEMENT = "judgement.json"
Method = Literal["llm", "match"]

JUDGE_PROMPT = """You grade one answer of a research agent against a known reference answer.

Question:
{question}

The agent's final response:
{response}

Reference answer:
{gold}

Decide whether the agent's final answer means the same thing as the reference answer. Ignore differences
of wording, capitalization, formatting and small numeric rounding; anything else that differs, is missing,
is ambiguous or hedges between several candidates makes the answer wrong. Do not solve the question
yourself and do not judge the reasoning — only whether the final answer matches the reference.

Reply with exactly these four lines and nothing else:
extracted_final_answer: <the agent's final answer copied exactly from its response, or None if it gave none>
reasoning: <one or two sentences comparing that answer with the reference answer>
correct: <yes or no>
confidence: <the agent's own stated confidence as an integer 0-100, or 100 if it stated none>
"""

_FIELD_RE = {
    "extracted_final_answer": re.compile(r"^[ \t*_]*extracted_final_answer[ \t*_]*:[ \t]*(.*)$", re.IGNORECASE | re.MULTILINE),
    "reasoning": re.compile(r"^[ \t*_]*reasoning[ \t*_]*:[ \t]*(.*)$", re.IGNORECASE | re.MULTILINE),
    "correct": re.compile(r"^[ \t*_]*correct[ \t*_]*:[ \t*_]*(yes|no)\b", re.IGNORECASE | re.MULTILINE),
    "confidence": re.compile(r"^[ \t*_]*confidence[ \t*_]*:[ \t*_]*(\d{1,3})", re.IGNORECASE | re.MULTILINE),
}


class Verdict(BaseModel):
    """One judgement of one run."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    method: Method
    """``llm`` (BrowseComp protocol) or ``match`` (exact match / token F1)."""

    correct: bool
    """The verdict."""

    gold: str
    """The reference answer judged against."""

    answer: str | None
    """The agent's final answer (None = the run ended without one)."""

    extracted_final_answer: str | None = None
    """LLM judge: the final answer as the grader extracted it."""

    reasoning: str | None = None
    """LLM judge: the grader's reasoning."""

    confidence: int | None = None
    """LLM judge: the agent's confidence as the grader read it (0-100)."""

    judge_model: str | None = None
    """LLM judge: the grading model."""

    raw: str | None = None
    """LLM judge: the grader's whole reply."""

    em: float | None = None
    """Match judge: normalized exact match (0 or 1)."""

    f1: float | None = None
    """Match judge: token F1."""


def parse_grader_reply(text: str) -> dict[str, Any]:
    """The four fields of a grader reply. ``correct`` is the captured ``yes``/``no`` (last occurrence at the
    start of a line), or None when the reply has none."""
    out: dict[str, Any] = {}
    for name, rx in _FIELD_RE.items():
        found = rx.findall(text or "")
        value = found[-1].strip() if found else None
        if name == "correct":
            out[name] = None if value is None else value.lower()
        elif name == "confidence":
            out[name] = None if value is None else max(0, min(100, int(value)))
        else:
            out[name] = value
    return out


# --- model-free ---------------------------------------------------------------------------------------
def normalize_answer(s: str) -> str:
    """HotpotQA's normalization: lower case, drop punctuation, drop articles, collapse whitespace."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def exact_match(prediction: str, gold: str) -> bool:
    """Normalized exact match."""
    return normalize_answer(prediction) == normalize_answer(gold)


def token_f1(prediction: str, gold: str) -> float:
    """Token F1 of the normalized strings (HotpotQA: a yes/no/noanswer mismatch scores 0)."""
    p, g = normalize_answer(prediction), normalize_answer(gold)
    special = ("yes", "no", "noanswer")
    if (p in special or g in special) and p != g:
        return 0.0
    pt, gt = p.split(), g.split()
    common = Counter(pt) & Counter(gt)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pt), same / len(gt)
    return 2 * precision * recall / (precision + recall)


def match_verdict(answer: str | None, gold: str) -> Verdict:
    """Model-free verdict: correct = normalized exact match."""
    if answer is None:
        return Verdict(method="match", correct=False, gold=gold, answer=None, em=0.0, f1=0.0)
    em = exact_match(answer, gold)
    return Verdict(method="match", correct=em, gold=gold, answer=answer, em=float(em), f1=token_f1(answer, gold))


# --- LLM ----------------------------------------------------------------------------------------------
class JudgeConfig(BaseModel):
    """The grading model (an OpenAI-compatible endpoint)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    model: str
    """Grader model name."""

    base_url: str | None = None
    """Endpoint base URL; defaults to ``OPENAI_BASE_URL``."""

    api_key: str | None = Field(default=None, repr=False)
    """API key; defaults to ``OPENAI_API_KEY`` (a placeholder is sent when unset)."""

    temperature: float = 0.0
    """Sampling temperature of the grader."""

    max_tokens: int = 1024
    """Completion cap of one grading call."""

    timeout_s: float = 120.0
    """Timeout of one grading call."""

    max_retries: int = 4
    """Retries of the openai client on 429/5xx/connection errors."""


class LLMJudge:
    """BrowseComp-protocol grader over the ``openai`` client."""

    def __init__(self, cfg: JudgeConfig):
        import os

        from openai import OpenAI

        self.cfg = cfg
        self._client = OpenAI(
            base_url=cfg.base_url or os.environ.get("OPENAI_BASE_URL") or None,
            api_key=cfg.api_key or os.environ.get("OPENAI_API_KEY") or "none",
            timeout=cfg.timeout_s,
            max_retries=cfg.max_retries,
        )

    def verdict(self, question: str, response: str | None, answer: str | None, gold: str) -> Verdict:
        """Grade one response (no call when the run gave no final answer: that is wrong, whatever its last
        message said)."""
        if answer is None:
            return Verdict(method="llm", correct=False, gold=gold, answer=None, extracted_final_answer=None,
                           reasoning="the run ended without a final answer", judge_model=self.cfg.model)
        prompt = JUDGE_PROMPT.format(question=question, response=response or answer, gold=gold)
        try:
            r = self._client.chat.completions.create(
                model=self.cfg.model,
                messages=[{"role": "user", "content": prompt}],
                temperature=self.cfg.temperature,
                max_tokens=self.cfg.max_tokens,
            )
        except Exception as e:
            raise ModelError(f"judge model call failed: {e.__class__.__name__}: {e}") from e
        text = (r.choices[0].message.content or "") if r.choices else ""
        fields = parse_grader_reply(text)
        if fields["correct"] is None:
            raise ModelError(f"judge reply has no 'correct: yes|no' line: {text[:200]!r}")
        return Verdict(
            method="llm",
            correct=fields["correct"] == "yes",
            gold=gold,
            answer=answer,
            extracted_final_answer=fields["extracted_final_answer"],
            reasoning=fields["reasoning"],
            confidence=fields["confidence"],
            judge_model=self.cfg.model,
            raw=text,
        )


# --- over run directories -----------------------------------------------------------------------------
class JudgeSummary(BaseModel):
    """What one ``judge`` pass did."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    judged: int = 0
    """Runs judged now."""

    cached: int = 0
    """Runs whose verdict was already in ``judgement.json``."""

    skipped: int = 0
    """Runs not judged: unfinished, or no gold answer known."""

    infra_failed: int = 0
    """Runs not judged because they ended for an infrastructure reason (``stops.is_infra_failure``): not
    results, never graded (their old verdicts are removed). Not counted in ``skipped``."""

    errors: list[str] = Field(default_factory=list)
    """One line per run whose judging failed (the others go on)."""

    correct: int = 0
    """Correct verdicts among judged + cached."""


def sweep_root(run_dir: Path) -> Path | None:
    """The sweep directory (holding ``sweep.json``) above ``run_dir``, if any."""
    for p in [run_dir, *run_dir.parents]:
        if (p / "sweep.json").exists():
            return p
    return None


def load_golds(root: Path) -> dict[str, str]:
    """``{qid: gold}`` and ``{question text: gold}`` from a sweep's ``questions.jsonl``."""
    out: dict[str, str] = {}
    path = root / "questions.jsonl"
    if not path.exists():
        return out
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            q = json.loads(line)
            if q.get("answer") is not None:
                out[str(q["id"])] = str(q["answer"])
                out["question:" + q["question"]] = str(q["answer"])
    return out


def final_response(events: list[dict[str, Any]]) -> str | None:
    """Content of the last assistant message of a run."""
    for ev in reversed(events):
        if ev.get("type") == "model_call":
            content = (ev.get("message") or {}).get("content")
            if content:
                return str(content)
    return None


def judge_runs(
    roots: Iterable[Path],
    method: Method,
    *,
    judge: LLMJudge | None = None,
    golds: dict[str, str] | None = None,
    force: bool = False,
    concurrency: int = 8,
    on_done: Callable[[], None] | None = None,
) -> JudgeSummary:
    """Judge every finished run under ``roots`` (sweeps or single run directories) with ``method`` and
    cache the verdicts. Gold answers come from ``golds`` (by qid or ``"question:" + text``) and from each
    sweep's ``questions.jsonl``."""
    if method == "llm" and judge is None:
        raise ConfigError("the LLM judge needs a grading model: pass --judge-model")
    summary = JudgeSummary()
    lock = threading.Lock()
    tasks: list[tuple[Path, str, str, str | None, str | None]] = []
    for root in roots:
        root = Path(root)
        if not root.exists():
            raise ConfigError(f"run directory not found: {root}")
        sroot = sweep_root(root)
        if sroot is not None and is_widesearch_sweep(sroot):  # table answers: the WideSearch scorer
            judge_widesearch(root, sroot, summary, judge=OpenAITableJudge(judge.cfg) if judge else None,
                             force=force, concurrency=concurrency, on_done=on_done)
            continue
        known = dict(load_golds(sroot) if sroot else {})
        known.update(golds or {})
        for d, _profile, qid, _rep in find_runs(root):
            result = read_json(d / "result.json")
            if result is None:
                summary.skipped += 1
                continue
            if is_infra_failure(result.get("stop_reason")):  # not a result: never graded
                summary.infra_failed += 1
                (d / JUDGEMENT).unlink(missing_ok=True)
                continue
            question = str(result.get("question") or "")
            gold = known.get(qid or "") if qid else None
            gold = gold or known.get("question:" + question)
            if gold is None:
                summary.skipped += 1
                continue
            cached = read_json(d / JUDGEMENT) or {}
            prev = cached.get(method)
            if not force and isinstance(prev, dict) and prev.get("gold") == gold and (
                method == "match" or prev.get("judge_model") == (judge.cfg.model if judge else None)
            ):
                summary.cached += 1
                summary.correct += bool(prev.get("correct"))
                continue
            answer = result.get("answer")
            tasks.append((d, question, gold, answer, final_response(read_events(d)) if method == "llm" else None))

    def one(task: tuple[Path, str, str, str | None, str | None]) -> None:
        d, question, gold, answer, response = task
        try:
            v = match_verdict(answer, gold) if method == "match" else judge.verdict(question, response, answer, gold)  # type: ignore[union-attr]
        except ModelError as e:
            with lock:
                summary.errors.append(f"{d}: {e}")
            return
        with lock:
            data = read_json(d / JUDGEMENT) or {}
            data[method] = v.model_dump()
            write_json_atomic(d / JUDGEMENT, data)
            summary.judged += 1
            summary.correct += v.correct
        if on_done:
            on_done()

    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        list(pool.map(one, tasks))
    return summary
