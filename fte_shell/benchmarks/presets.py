"""Grading presets: how a benchmark's runs are graded — a judge prompt family with its reply parser (sent
at temperature 0), or a model-free rule — each under one name (docs/bench.md "Judges").

A :class:`Preset` turns one run (question, final response, final answer, gold answer) into a
:class:`~.answers.Verdict` with ``preset`` set. The prompts are this project's own words, written to
implement each benchmark's published grading rule:

- ``llm-equivalence`` (formerly ``browsecomp``): whether the final answer means the same as the
  reference, in the BrowseComp grader's four fields (``extracted_final_answer``, ``reasoning``,
  ``correct: yes|no``, ``confidence``); the verdict is the CAPTURED ``yes``/``no`` (the public reference
  compares the whole match ``"correct: yes"`` with ``"yes"`` and so marks every answer wrong);
- ``llm-equivalence-zh`` (formerly ``browsecomp-zh``): the same four fields asked in Chinese
  (BrowseComp-ZH's grader is Chinese);
- ``llm-three-way`` (formerly ``simpleqa``): SimpleQA's three-way grade, ``CORRECT`` / ``INCORRECT`` /
  ``NOT_ATTEMPTED`` (``grade``);
- ``llm-equivalence-confidence`` (formerly ``hle``): HLE's judge — the four fields, with the agent's
  confidence (0–100) required for calibration;
- ``match``: no model — normalized exact match (and token F1) of :mod:`.answers`.

A preset is named for what it grades, not for the benchmark that first used it; its former names
(:attr:`Preset.formerly`) are still accepted, with a note, and its verdicts kept under them are reused.

This module holds the presets that need no benchmark of their own (:data:`BUILTIN`). A benchmark with a
rule of its own (GAIA's) gives it as a :class:`Preset` with ``rule`` in its plugin's ``presets``;
:func:`fte_shell.benchmarks.registry.preset` looks up both, so nothing here imports a plugin.

A reply that does not follow the preset's format raises :class:`~fte_shell.errors.ModelError` naming the
preset and quoting the reply: that run is listed as an error and not scored.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import ModelError
from .answers import JudgeCall, Verdict, match_verdict
from .llmjudge import LLMJudge

GRADES = ("CORRECT", "INCORRECT", "NOT_ATTEMPTED")
"""SimpleQA's three grades (``Verdict.grade``)."""


@dataclass(frozen=True)
class Parsed:
    """What a preset's parser read from one grader reply."""

    correct: bool
    grade: str | None = None
    extracted_final_answer: str | None = None
    reasoning: str | None = None
    confidence: int | None = None


Parser = Callable[[str], Parsed]
Rule = Callable[[str | None, str], Verdict]


@dataclass(frozen=True)
class Preset:
    """One way of grading: a prompt with its parser (a model preset) or a rule (model-free)."""

    name: str
    """The name ``--judge-preset`` and ``Benchmark.judge_preset`` use; recorded in each verdict."""

    summary: str
    """One line: what it grades how (docs, ``--help``)."""

    prompt: str | None = None
    """Model presets: the user message, with ``{question}``, ``{response}`` and ``{gold}``."""

    parse: Parser | None = None
    """Model presets: reads a reply; raises :class:`ModelError` on one that does not follow the format."""

    rule: Rule | None = None
    """Model-free presets: ``(answer, gold) -> Verdict``. A preset with neither ``prompt`` nor ``rule``
    names a benchmark's own grading (WideSearch's table scoring, done by its ``Benchmark.judge``)."""

    temperature: float = 0.0
    """The grading model's temperature (sent with every request)."""

    no_answer_grade: str | None = None
    """The ``grade`` of a run that ended without an answer (SimpleQA: ``NOT_ATTEMPTED``); such a run is
    wrong without a call."""

    legacy: str | None = None
    """The pre-preset ``judgement.json`` entry this preset's verdicts continue (``llm``: the grader whose
    prompt became ``llm-equivalence``): a verdict there of the same model is reused and moved to this key."""

    formerly: tuple[str, ...] = ()
    """Names this preset had before: still accepted (``--judge-preset``, ``[judge] preset``) with a note
    naming this one, until :data:`FORMER_NAMES_UNTIL`; its verdicts under them are reused and moved."""

    @property
    def needs_model(self) -> bool:
        """Whether grading calls a model (``--judge-model``)."""
        return self.prompt is not None

    def grade(self, question: str, response: str | None, answer: str | None, gold: str,
              judge: LLMJudge | None = None) -> Verdict:
        """The verdict of one run. Model presets need ``judge`` (ModelError from a failed call or a
        malformed reply)."""
        if self.rule is not None:
            return self.rule(answer, gold).model_copy(update={"preset": self.name})
        if self.prompt is None or self.parse is None:
            raise ModelError(f"the {self.name} preset grades only its own benchmark's sweeps")
        if judge is None:
            raise ModelError(f"the {self.name} preset needs a grading model (--judge-model)")
        if answer is None:
            return Verdict(method="llm", correct=False, gold=gold, answer=None, grade=self.no_answer_grade,
                           reasoning="the run ended without a final answer", judge_model=judge.model,
                           preset=self.name)
        prompt = self.prompt.format(question=question, response=response or answer, gold=gold)
        done = judge.call(prompt, temperature=self.temperature)
        p = self.parse(done.text)
        return Verdict(method="llm", correct=p.correct, gold=gold, answer=answer, grade=p.grade,
                       extracted_final_answer=p.extracted_final_answer, reasoning=p.reasoning,
                       confidence=p.confidence, judge_model=judge.model, raw=done.text, preset=self.name,
                       call=JudgeCall(prompt=prompt, params=done.params, usage=done.usage, latency_s=done.latency_s,
                                      attempts=done.attempts, response=done.response))


# --- the four-field reply (BrowseComp, BrowseComp-ZH, HLE) ----------------------------------------------
def _line(name: str, value: str) -> re.Pattern[str]:
    return re.compile(rf"^[ \t*_]*{name}[ \t*_]*[:：][ \t*_]*{value}", re.IGNORECASE | re.MULTILINE)


_FIELD_RE = {
    "extracted_final_answer": _line("extracted_final_answer", r"(.*)$"),
    "reasoning": _line("reasoning", r"(.*)$"),
    "correct": _line("correct", r"(yes|no|是|否)(?![A-Za-z])"),
    "confidence": _line("confidence", r"(\d{1,3})"),
}
_YES = {"yes": "yes", "no": "no", "是": "yes", "否": "no"}


def parse_grader_reply(text: str) -> dict[str, str | int | None]:
    """The four fields of a grader reply (last occurrence of each, at the start of a line; ``:`` or
    ``：``). ``correct`` is the captured ``yes``/``no`` (``是``/``否`` read as yes/no), None when the reply
    has none; ``confidence`` is clamped to 0-100."""
    out: dict[str, str | int | None] = {}
    for name, rx in _FIELD_RE.items():
        found = rx.findall(text or "")
        value = found[-1].strip() if found else None
        if name == "correct":
            out[name] = None if value is None else _YES[value.lower()]
        elif name == "confidence":
            out[name] = None if value is None else max(0, min(100, int(value)))
        else:
            out[name] = value
    return out


def _malformed(preset: str, what: str, text: str) -> ModelError:
    return ModelError(f"judge reply does not follow the {preset} preset ({what}): {text[:200]!r}")


def _four_fields(preset: str, *, need_confidence: bool) -> Parser:
    def parse(text: str) -> Parsed:
        f = parse_grader_reply(text)
        if f["correct"] is None:
            raise _malformed(preset, "no 'correct: yes|no' line", text)
        if need_confidence and f["confidence"] is None:
            raise _malformed(preset, "no 'confidence: 0-100' line", text)
        conf = f["confidence"]
        return Parsed(correct=f["correct"] == "yes", extracted_final_answer=_str(f["extracted_final_answer"]),
                      reasoning=_str(f["reasoning"]), confidence=conf if isinstance(conf, int) else None)
    return parse


def _str(v: object) -> str | None:
    return None if v is None else str(v)


# --- SimpleQA's grade -----------------------------------------------------------------------------------
_GRADE_RE = re.compile(r"^[ \t*_]*grade[ \t*_]*:[ \t*_]*(CORRECT|INCORRECT|NOT[ _]ATTEMPTED|A|B|C)(?![A-Za-z_])",
                       re.IGNORECASE | re.MULTILINE)
_LETTER = {"A": "CORRECT", "B": "INCORRECT", "C": "NOT_ATTEMPTED"}


def parse_simpleqa(text: str) -> Parsed:
    """The last line-initial ``grade:`` field: ``CORRECT``, ``INCORRECT``, ``NOT_ATTEMPTED`` (or the
    letters A/B/C of SimpleQA's grader); ModelError without one."""
    found = _GRADE_RE.findall(text or "")
    if not found:
        raise _malformed("llm-three-way", "no 'grade: CORRECT|INCORRECT|NOT_ATTEMPTED' line", text)
    raw = found[-1].upper().replace(" ", "_")
    grade = _LETTER.get(raw, raw)
    reasons = _FIELD_RE["reasoning"].findall(text or "")
    return Parsed(correct=grade == "CORRECT", grade=grade, reasoning=reasons[-1].strip() if reasons else None)


# --- the prompts ----------------------------------------------------------------------------------------
BROWSECOMP_PROMPT = """You grade one answer of a research agent against a known reference answer.

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

BROWSECOMP_ZH_PROMPT = """你要根据已知的标准答案，评判一个研究智能体给出的答案。

问题：
{question}

智能体的最终回复：
{response}

标准答案：
{gold}

请判断智能体的最终答案与标准答案的含义是否一致。措辞、大小写、格式、简繁体和细微的数值舍入差异可以忽略；
除此之外的任何不同、缺失、含糊，或在多个候选答案之间摇摆，都算错误。不要自己解答这个问题，也不要评判推理过程，
只判断最终答案是否与标准答案一致。

只回复以下四行，不要有其他内容（字段名保持英文）：
extracted_final_answer: <从回复中原样摘出的最终答案；若没有给出，写 None>
reasoning: <用一两句话比较该答案与标准答案>
correct: <yes 或 no>
confidence: <智能体自己给出的置信度，0-100 的整数；若未给出，写 100>
"""

SIMPLEQA_PROMPT = """You grade one answer to a short factual question against its reference answer, with one
of three grades.

Question:
{question}

Reference answer:
{gold}

The answer to grade:
{response}

CORRECT: the answer contains the reference answer's essential information and nothing in it contradicts
the reference. Hedging or guessing is fine as long as the reference answer is fully there and nothing
stated is false. A number must match the reference to its last significant figure; a name may be spelled
slightly differently; information the question itself makes obvious may be left out.
INCORRECT: something the answer states as its answer contradicts the reference answer, even with a hedge
("I think it is …, but not sure"), or it names several candidates of which one is wrong.
NOT_ATTEMPTED: the reference answer's essential information is not in the answer, and nothing in it
contradicts the reference (a refusal, "I don't know", a description of what would need to be checked).

Grade only the final answer against the reference; do not research the question yourself.

Reply with exactly these two lines and nothing else:
reasoning: <one sentence comparing the answer with the reference answer>
grade: <CORRECT, INCORRECT or NOT_ATTEMPTED>
"""

HLE_PROMPT = """You judge whether a response to a question is correct, against the question's precise and
unambiguous reference answer.

Question:
{question}

Response:
{response}

Reference answer:
{gold}

First take the final exact answer out of the response. Then decide whether it is correct: it is when it
matches the reference answer, or is within a small margin of error for a numerical problem; any
inconsistency, ambiguity, non-equivalence, or a wrong choice in a multiple-choice question makes it
incorrect. Judge only the final answer against the reference answer; do not solve the question yourself
and do not argue for any answer other than the reference.

Reply with exactly these four lines and nothing else:
extracted_final_answer: <the final exact answer taken from the response, or None if there is none>
reasoning: <why the extracted answer is or is not correct, compared only with the reference answer>
correct: <yes or no>
confidence: <the confidence score 0-100 stated in the response, as an integer; 100 if it states none>
"""

FORMER_NAMES_UNTIL = "0.3.0"
"""The first release that no longer accepts a preset's former names (:attr:`Preset.formerly`)."""

BUILTIN: dict[str, Preset] = {p.name: p for p in (
    Preset("llm-equivalence", "a model says whether the final answer means the same as the reference (yes/no), "
           "in BrowseComp's grader fields: extracted answer, reasoning, correct, confidence",
           prompt=BROWSECOMP_PROMPT, parse=_four_fields("llm-equivalence", need_confidence=False), legacy="llm",
           formerly=("browsecomp",)),
    Preset("llm-equivalence-zh", "llm-equivalence asked in Chinese (BrowseComp-ZH's grader)",
           prompt=BROWSECOMP_ZH_PROMPT, parse=_four_fields("llm-equivalence-zh", need_confidence=False),
           formerly=("browsecomp-zh",)),
    Preset("llm-three-way", "a model grades the answer CORRECT / INCORRECT / NOT_ATTEMPTED (SimpleQA's grade)",
           prompt=SIMPLEQA_PROMPT, parse=parse_simpleqa, no_answer_grade="NOT_ATTEMPTED", formerly=("simpleqa",)),
    Preset("llm-equivalence-confidence", "llm-equivalence with the response's confidence 0-100 required, for "
           "calibration (HLE's judge)",
           prompt=HLE_PROMPT, parse=_four_fields("llm-equivalence-confidence", need_confidence=True),
           formerly=("hle",)),
    Preset("match", "no model: normalized exact match (HotpotQA's normalization), token F1 beside it",
           rule=match_verdict),
)}
"""The presets that belong to no one benchmark (a plugin adds its own rules through ``Benchmark.presets``)."""
