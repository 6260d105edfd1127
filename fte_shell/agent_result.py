"""What one run produced (``RunResult`` = ``result.json``) and the names of its stop reasons."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .stops import StopReason


USAGE_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")

TOOL_USAGE_META = "summary_usage"
"""Key of a tool result's ``meta`` under which a tool that calls a model of its own (visit-summary's
reader) reports that call's token usage; the loop sums it into :attr:`RunResult.summary_usage`."""


def _add_usage(total: dict[str, int], usage: Any) -> None:
    """Add the token counts of ``usage`` (a usage dict, or anything else = nothing) to ``total``."""
    if isinstance(usage, dict):
        for k in USAGE_KEYS:
            v = usage.get(k)
            if isinstance(v, int):
                total[k] += v


class RunResult(BaseModel):
    """What one question's run produced. ``result.json`` is this model without ``run_dir`` (fields in
    this order), plus ``started_at`` and ``meta``."""

    model_config = ConfigDict(extra="forbid")

    question: str
    """The question as asked."""

    answer: str | None
    """The final answer (text inside the last ``<answer>`` tags), or None when the run ended without one."""

    answer_unclosed: bool = False
    """True when the answer is the text after an ``<answer>`` the model never closed (in a reply that
    finished normally). In ``result.json`` only when true."""

    profile: str = ""
    """Profile name."""

    model: str | None = None
    """Model name."""

    turns: int
    """Model calls made (successful or not)."""

    stop_reason: StopReason
    """Why the loop stopped."""

    tool_calls: dict[str, int] = Field(default_factory=dict)
    """Tool calls by tool name (malformed and unknown calls included, under the name the model gave)."""

    usage: dict[str, int] = Field(default_factory=dict)
    """The agent model's summed token usage: ``prompt_tokens``, ``completion_tokens``, ``total_tokens``
    (the sum of the ``model_call`` events)."""

    summary_usage: dict[str, int] = Field(default_factory=dict)
    """Tokens spent by models that tools call on their own (visit-summary's reader model), summed from the
    tool calls' ``meta.summary_usage``; same keys as :attr:`usage`, NOT included in it (so ``usage``
    stays comparable across profiles). All zero for the other profiles."""

    wall_s: float
    """Wall-clock seconds of the loop."""

    run_id: str
    """Identifier of this run (also in ``result.json``)."""

    run_dir: Path | None = None
    """The run directory, when there is one (not in ``result.json``)."""
