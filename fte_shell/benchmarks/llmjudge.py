"""The LLM judge: the BrowseComp protocol, through :class:`fte_shell.model.ModelClient` (its retries,
error classes and recorded request parameters).

The grader reads the question, the agent's final response and the gold answer, and replies with four
fields — ``extracted_final_answer``, ``reasoning``, ``correct: yes|no``, ``confidence: 0-100`` — the fields
of BrowseComp's grader, asked for in this project's own words. The verdict is the CAPTURED value of
``correct: (yes|no)`` (the public reference reads the whole match, ``"correct: yes"``, and so compares it
with ``"yes"`` and marks every answer wrong).

The judge is configured with a :class:`fte_shell.config.ModelConfig`; :func:`judge_model_config` makes
one with the judge's settings (temperature 0, sent with every request).
"""

from __future__ import annotations

import re
from typing import Any

from ..config import ModelConfig, env_overrides
from ..errors import ModelError
from ..model import ModelClient
from .answers import Verdict

JUDGE_DEFAULTS: dict[str, Any] = {"temperature": 0.0, "top_p": 1.0, "max_tokens": 1024, "timeout_s": 120.0,
                                  "max_retries": 4}
"""The grading model's settings unless given: greedy (temperature 0), a short completion, a short timeout."""

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


def judge_model_config(model: str, *, base_url: str | None = None, api_key: str | None = None,
                       **settings: Any) -> ModelConfig:
    """The grading model's :class:`ModelConfig`: :data:`JUDGE_DEFAULTS` < ``settings``; the endpoint and
    key default to ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` (a placeholder key is sent when unset)."""
    env = env_overrides().get("model", {})
    return ModelConfig.model_validate({
        **JUDGE_DEFAULTS, **settings, "model": model,
        "base_url": base_url or env.get("base_url"), "api_key": api_key or env.get("api_key"),
    })


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


def ask(client: ModelClient, prompt: str, max_tokens: int | None = None) -> str:
    """One user prompt → the reply text (no tools), through ``client``; a failed call raises
    :class:`ModelError` saying it was the judge's."""
    try:
        return client.ask(prompt, max_tokens=max_tokens).text
    except ModelError as e:
        raise ModelError(f"judge model call failed: {e.__class__.__name__}: {e}") from e


class LLMJudge:
    """BrowseComp-protocol grader over :class:`ModelClient`."""

    def __init__(self, cfg: ModelConfig):
        self.cfg = cfg
        self.client = ModelClient(cfg)
        self.model: str = self.client.model
        """The grading model's name (recorded with each verdict; a cached verdict of another is redone)."""

    def verdict(self, question: str, response: str | None, answer: str | None, gold: str) -> Verdict:
        """Grade one response (no call when the run gave no final answer: that is wrong, whatever its last
        message said)."""
        if answer is None:
            return Verdict(method="llm", correct=False, gold=gold, answer=None, extracted_final_answer=None,
                           reasoning="the run ended without a final answer", judge_model=self.model)
        text = ask(self.client, JUDGE_PROMPT.format(question=question, response=response or answer, gold=gold))
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
            judge_model=self.model,
            raw=text,
        )
