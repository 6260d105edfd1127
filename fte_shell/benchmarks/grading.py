"""Grading a sweep's runs: what a judge pass is asked (:class:`JudgeRequest`), what it did
(:class:`JudgeSummary`), and the default grading of a question/answer benchmark
(:func:`judge_answers`: the model-free exact match + F1, or the LLM judge).

Verdicts are cached per run in ``RUN_DIR/judgement.json`` under their method (``{"llm": {...}, "match":
{...}}``); a benchmark with a grading of its own keeps it under its own entry (WideSearch: ``widesearch``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..errors import ModelError
from ..record.rundir import (
    find_runs,
    read_judgement,
    read_result,
    read_trajectory,
    remove_judgement,
    write_judgement,
)
from ..record.sweepdir import SweepDir
from ..stops import is_infra_failure
from .answers import Method, match_verdict
from .llmjudge import LLMJudge


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


@dataclass
class JudgeRequest:
    """One judge pass over one root (a sweep or a single run directory), as a benchmark gets it."""

    root: Path
    """The sweep or run directory to grade."""

    sweep: Path | None
    """The sweep directory holding ``root`` (its ``questions.jsonl`` has the gold answers), or None."""

    method: Method
    """``match`` (model-free) or ``llm``."""

    llm: LLMJudge | None = None
    """The grading model (needed by ``llm``; a benchmark may use it for its own grading steps too)."""

    golds: dict[str, str] = field(default_factory=dict)
    """Extra gold answers by qid or ``"question:" + text`` (they win over the sweep's)."""

    force: bool = False
    """Grade again even when a cached verdict is current."""

    concurrency: int = 8
    """Grading calls in flight."""

    on_done: Callable[[], None] | None = None
    """Called after each run graded now."""


def load_golds(root: Path) -> dict[str, str]:
    """``{qid: gold}`` and ``{question text: gold}`` from a sweep's ``questions.jsonl``."""
    out: dict[str, str] = {}
    for q in SweepDir(root).questions().values():
        if q.get("answer") is not None:
            out[str(q["id"])] = str(q["answer"])
            out["question:" + str(q.get("question"))] = str(q["answer"])
    return out


def final_response(events: list[dict[str, Any]]) -> str | None:
    """Content of the last assistant message of a run."""
    for ev in reversed(events):
        if ev.get("type") == "model_call":
            content = (ev.get("message") or {}).get("content")
            if content:
                return str(content)
    return None


def judge_answers(req: JudgeRequest, summary: JudgeSummary) -> None:
    """Judge every finished run under ``req.root`` against its gold answer with ``req.method`` and cache
    the verdicts; runs that ended for an infrastructure reason are never graded (old verdicts removed)."""
    method, judge = req.method, req.llm
    known = dict(load_golds(req.sweep) if req.sweep else {})
    known.update(req.golds)
    lock = threading.Lock()
    tasks: list[tuple[Path, str, str, str | None, str | None]] = []
    for d, _profile, qid, _rep in find_runs(req.root):
        result = read_result(d)
        if result is None:
            summary.skipped += 1
            continue
        if is_infra_failure(result.get("stop_reason")):  # not a result: never graded
            summary.infra_failed += 1
            remove_judgement(d)
            continue
        question = str(result.get("question") or "")
        gold = known.get(qid or "") if qid else None
        gold = gold or known.get("question:" + question)
        if gold is None:
            summary.skipped += 1
            continue
        prev = (read_judgement(d) or {}).get(method)
        if not req.force and isinstance(prev, dict) and prev.get("gold") == gold and (
            method == "match" or prev.get("judge_model") == (judge.model if judge else None)
        ):
            summary.cached += 1
            summary.correct += bool(prev.get("correct"))
            continue
        answer = result.get("answer")
        tasks.append((d, question, gold, answer, final_response(read_trajectory(d)) if method == "llm" else None))

    def one(task: tuple[Path, str, str, str | None, str | None]) -> None:
        d, question, gold, answer, response = task
        try:
            v = match_verdict(answer, gold) if method == "match" else judge.verdict(question, response, answer, gold)  # type: ignore[union-attr]
        except ModelError as e:
            with lock:
                summary.errors.append(f"{d}: {e}")
            return
        with lock:
            data = read_judgement(d) or {}
            data[method] = v.model_dump()
            write_judgement(d, data)
            summary.judged += 1
            summary.correct += v.correct
        if req.on_done:
            req.on_done()

    with ThreadPoolExecutor(max_workers=max(1, req.concurrency)) as pool:
        list(pool.map(one, tasks))
