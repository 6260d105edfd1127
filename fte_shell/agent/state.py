"""What the loop counts to decide when to nudge or stop (:class:`LoopState`); what goes into
``result.json`` (turns, tool calls, usage, cost) is counted in the episode's
:class:`~fte_shell.episode.Tally`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .stuck import CallStreak


@dataclass
class LoopState:
    """The loop's counters for one run (besides the conversation itself and the episode's tally)."""

    failed_turns: int = 0
    """Turns in a row whose tool calls all failed (``agent.max_consecutive_errors``)."""
    nudges: int = 0
    """Replies in a row with neither a tool call nor an answer (``agent.max_nudges``)."""
    cuts: int = 0
    """Replies in a row cut at ``max_tokens`` (two stop the run)."""
    repeats: int = 0
    """Identical replies in a row, this one included (``agent.max_repeated_replies``)."""
    last_signature: str | None = None
    streak: CallStreak = field(default_factory=CallStreak)
    """Identical tool calls with identical observations in a row (``agent.stuck_repeats``)."""
    reasoning_fields: list[str] = field(default_factory=list)
    """The reasoning fields the server used last (sent back per ``model.reasoning_passback``)."""
    last_prompt: int | None = None
    """``usage.prompt_tokens`` of the last successful request (None: not reported)."""
    last_sent: list[dict[str, Any]] = field(default_factory=list)
    """The messages of that request (the token estimate calibrates on it when the next request starts
    with exactly these messages)."""

    def reply(self, signature: str, cut: bool) -> None:
        """Count one reply: identical to the last one? cut at ``max_tokens``?"""
        self.repeats = self.repeats + 1 if signature == self.last_signature else 1
        self.last_signature = signature
        self.cuts = self.cuts + 1 if cut else 0
