"""A verdict on one run's short answer, and the model-free judge (HotpotQA style): exact match and token
F1 after the official normalization (lower case, punctuation and the articles a/an/the removed,
whitespace collapsed)."""

from __future__ import annotations

import re
import string
from collections import Counter
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Method = Literal["llm", "match", "rule"]
"""How a verdict was reached: a grading model (``llm``), exact match + F1 (``match``), or a benchmark's own
model-free rule (``rule``, e.g. GAIA's)."""


class JudgeCall(BaseModel):
    """One call of a grading model, kept with the verdict it gave (the reply is :attr:`Verdict.raw`, the
    parsed fields are the verdict's own, the model :attr:`Verdict.judge_model`)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    prompt: str
    """The whole user message sent (the preset's prompt filled in)."""

    params: dict[str, Any] = Field(default_factory=dict)
    """The request parameters actually sent (model, temperature, top_p, ``max_tokens``, ``extra_body``)."""

    usage: dict[str, int] = Field(default_factory=dict)
    """Prompt, completion and total tokens as the endpoint reported them."""

    latency_s: float = 0.0
    """Seconds of the successful attempt."""

    attempts: int = 1
    """HTTP attempts the call took."""

    response: dict[str, Any] = Field(default_factory=dict)
    """The response's ``id``, ``model`` and ``system_fingerprint``."""


class Verdict(BaseModel):
    """One judgement of one run."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    method: Method
    """``llm`` (a grading model), ``match`` (exact match / token F1) or ``rule`` (a benchmark's own rule)."""

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

    preset: str | None = None
    """The grading preset that gave this verdict (a judge prompt family and its parser, or a rule such as
    GAIA's); None for verdicts written before presets existed."""

    grade: str | None = None
    """A graded label finer than ``correct`` when the preset gives one (SimpleQA: ``CORRECT``,
    ``INCORRECT``, ``NOT_ATTEMPTED``)."""

    call: JudgeCall | None = None
    """LLM judge: the grading call (prompt, parameters, usage); None without a call (a run without an
    answer, a model-free judge, or a verdict written before calls were kept)."""


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
        return Verdict(method="match", correct=False, gold=gold, answer=None, em=0.0, f1=0.0, preset="match")
    em = exact_match(answer, gold)
    return Verdict(method="match", correct=em, gold=gold, answer=answer, em=float(em), f1=token_f1(answer, gold),
                   preset="match")
