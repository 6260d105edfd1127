"""``[agent]``: the ReAct loop, its stop rules and the tools' limits."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from .base import StrictModel
from .context import ContextConfig
from .model import ModelConfig
from .standard import StandardOptions


class AgentConfig(StrictModel):
    """The ReAct loop and the profile it drives."""

    profile: str = "shell"
    """``shell``, ``fte``, ``snippet-only``, ``visit-snippet``, ``visit-summary``, ``open-find``, or an ablation
    arm of ``fte``: ``fte-no-grep``, ``fte-no-read``, ``fte-single-grep``; or ``standard`` (BrowseComp-Plus's own
    tools and answer format, ``[agent.standard]``); or a third-party profile as ``module:attr`` (a class taking a
    ``QuestionContext``: :data:`fte_shell.profiles.base.IMPLEMENTATIONS`)."""

    max_turns: int = 300
    """Model calls before the run stops without an answer (the paper's 300)."""

    time_budget_s: float | None = None
    """Wall-clock budget for one question; None = unlimited."""

    max_total_tokens: int | None = Field(default=None, gt=0)
    """Token budget of one run (prompt + completion of all its model calls, a reader model's included):
    no model call starts once it is spent (stop reason ``token_budget``, a result). None = unlimited."""

    max_consecutive_errors: int = 10
    """Stop after this many consecutive turns whose tool calls all failed or were malformed (a tool error;
    a shell command's non-zero exit status is an observation, not a failed call)."""

    max_nudges: int = Field(default=5, ge=1)
    """Stop with ``too_many_nudges`` after this many replies in a row with neither a tool call nor an
    answer (each one is answered with a nudge)."""

    max_repeated_replies: int = Field(default=5, ge=2)
    """Stop with ``repeated_reply`` when this many replies in a row are identical (same text, reasoning and
    tool calls: a degenerate loop)."""

    stuck_repeats: int | None = Field(default=3, ge=2)
    """The stuck detector: when this many tool calls in a row are the same call (tool and arguments) with
    the same observation, the model gets one notice; one more such call stops the run with ``stuck`` (a
    result, scored unanswered). The same rule for every profile (fte_shell/agent/stuck.py). None (``"off"``
    in TOML) = no detector, as before it existed."""

    on_context_overflow: Literal["stop", "final_answer"] = "stop"
    """When the conversation no longer fits the window: ``stop`` (stop reason ``context_overflow``; the
    paper applies no context management) or ``final_answer`` (one last call without tools asking for the
    answer; if that fails too, ``context_overflow``)."""

    context: ContextConfig = Field(default_factory=ContextConfig)
    """The context strategy, what is sent of the conversation as it grows: ``keep_all``, ``keep_recent:K``,
    ``discard_fraction:F``, ``discard_all``, ``summary`` or ``workspace_reset`` (``[agent.context]``;
    docs/run.md "Context strategies")."""

    first_tool_choice: str | None = None
    """Force a tool call on the FIRST turn only: a tool name, ``first`` (the profile's first tool), or
    ``required``. Sent the way the server kind's engine enforces it (llama-cpp-python: by name only; llama.cpp:
    a ``response_format`` JSON schema of the call; docs/run.md). None = the server's default (``auto``)."""

    current_date: str | None = None
    """Date (YYYY-MM-DD) written into the system prompt; None = today."""

    system_prompt_file: Path | None = None
    """Replace the built-in system prompt body with this file's text."""

    tool_descriptions_file: Path | None = None
    """TOML file overriding tool descriptions: ``[tool_name] description = "..."``."""

    grep_context: int = 3
    """Structured ``grep``: default context lines (the paper's prose says ±3; 0 = matching lines only)."""

    summary_model: ModelConfig | None = None
    """Model used by ``visit-summary`` to summarize pages; None = the agent's own endpoint. Its unset
    ``base_url``, ``api_key`` and ``model`` are taken from the agent's ``[model]``."""

    grep_max_matches: int = Field(default=20, ge=1)
    """Structured ``grep`` and open-find ``find``: matching lines shown per call (the paper's 20)."""

    grep_max_context: int = Field(default=10, ge=0)
    """Structured ``grep``: largest ``context`` a call may ask for (larger requests are capped)."""

    grep_timeout_s: float = Field(default=10.0, gt=0)
    """Structured ``grep`` and open-find ``find``: wall-clock limit for matching one pattern against the
    cache (a pattern that backtracks catastrophically becomes an error instead of a hang)."""

    grep_line_chars: int = Field(default=600, ge=80)
    """Structured ``grep``/``find``: a longer line is shown as an excerpt of this many characters around
    its first match (context lines: their beginning), so one huge paragraph cannot flood the output."""

    read_max_lines: int = Field(default=200, ge=1)
    """Structured ``read``: most lines per call (the paper's 200); also its default ``limit``."""

    read_max_bytes: int = Field(default=50_000, ge=1_000)
    """Structured ``read`` and ``grep``: most bytes (UTF-8) of one observation (the paper's ~50 KB)."""

    visit_snippet_chars: int = Field(default=3_000, ge=200)
    """``visit-snippet``: size of the page chunks ranked against the goal; the best one is returned."""

    visit_summary_page_chars: int = Field(default=60_000, ge=1_000)
    """``visit-summary``: the page text given to the summary model is cut to this many characters."""

    open_window_lines: int = Field(default=100, ge=1)
    """``open-find``: lines in the window shown by ``open``/``scroll``."""

    open_window_bytes: int = Field(default=20_000, ge=1_000)
    """``open-find``: most bytes (UTF-8) of one window; a window stops early at this size."""

    standard: StandardOptions = Field(default_factory=StandardOptions)
    """The ``standard`` profile (BrowseComp-Plus's own ``search``/``get_document`` and answer format;
    ``[agent.standard]``): hits per search, snippet length, whether ``get_document`` is offered, the
    benchmark's prompts file."""

    search_max_results: int = Field(default=50, ge=1)
    """Structured ``search`` (every non-shell profile): largest ``n`` a call may ask for (larger requests
    are capped; the shell helper accepts 1-50)."""

    @field_validator("stuck_repeats", mode="before")
    @classmethod
    def _stuck_off(cls, v: object) -> object:
        """``"off"`` (TOML has no null) turns the stuck detector off."""
        return None if isinstance(v, str) and v.strip().lower() == "off" else v
