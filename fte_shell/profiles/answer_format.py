"""The answer-format seam: a profile whose final answer is written in a benchmark's own format rather than
inside ``<answer>`` tags (the ``standard`` profile: BrowseComp-Plus's ``Explanation:``/``Exact Answer:``/
``Confidence:``).

Such a profile has an ``answer_format`` (:class:`FormattedProfile`). The loop then asks the question as
the format poses it (the benchmark's query template), sends the format's system prompt, nudges and final
request, ends the run on the first reply without a tool call that the format parses, and writes the
format's record and the parsed reply into ``result.json`` (``answer_format``). A reply it cannot parse is
not an answer: the run is nudged, and ends unanswered when it never gives one.

The formats are plugins (:data:`FORMATS`: a built-in name or ``module:attr``), each a factory taking the
profile's :class:`~fte_shell.config.standard.StandardOptions`; the built-in one lives with its benchmark
(``fte_shell.benchmarks.browsecomp_plus.templates``), which reads the templates from the benchmark's files.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..config.standard import StandardOptions
from ..plugins import Registry


@dataclass(frozen=True)
class FinalAnswer:
    """A final reply the format parsed."""

    answer: str
    """The run's answer (``result.json`` ``answer``): the format's exact answer."""

    detail: dict[str, Any] = field(default_factory=dict)
    """What else the reply says (the whole response, the confidence…), merged into ``answer_format``."""


@runtime_checkable
class AnswerFormat(Protocol):
    """How a run's final answer is asked for and read."""

    system_prompt: str
    """The system message ("" = empty: the benchmark's clients send none unless told)."""

    nudge: str
    """Sent after a reply with neither a tool call nor a final answer in this format."""

    final_request: str
    """Sent when the window is full (``agent.on_context_overflow = final_answer``)."""

    def pose(self, question: str) -> str:
        """The user message that asks ``question``."""
        ...

    def parse(self, text: str) -> FinalAnswer | None:
        """The final answer of a reply's text, or None when the reply is not one."""
        ...

    def record(self) -> dict[str, Any]:
        """What ``result.json``'s ``answer_format`` says of the format itself (its name, where its templates
        came from, whether it is the benchmark's own)."""
        ...


@runtime_checkable
class FormattedProfile(Protocol):
    """A profile that answers in an :class:`AnswerFormat` (else: ``<answer>`` tags)."""

    answer_format: AnswerFormat


FormatFactory = Callable[[StandardOptions], AnswerFormat]

FORMATS: Registry[FormatFactory] = Registry(
    "answer format", {"bcplus": "fte_shell.benchmarks.browsecomp_plus.templates:answer_format"})
"""Answer formats by name (``agent.standard.answer_format``)."""


def answer_format_of(profile: object) -> AnswerFormat | None:
    """The profile's answer format, or None for a profile that answers in ``<answer>`` tags."""
    return profile.answer_format if isinstance(profile, FormattedProfile) else None
