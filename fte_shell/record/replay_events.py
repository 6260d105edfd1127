"""The events of a run that replays recorded turns without the model: a fork (``fork``) and a resumed run
(``resume``); part of :mod:`.events` (its union and :data:`~.events.EVENT_TYPES` hold them)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from .event_base import EventBase as _Event


class ForkEvent(_Event):
    """A fork replayed its parent's first turns and checked its state against the parent's
    (``fte_shell.episode.fork``): written after the replayed turns, before the first live model call."""

    type: Literal["fork"] = "fork"
    turn: int = 0
    """The last replayed turn (the fork's turn K)."""
    parent: str = ""
    """The parent's run directory."""
    parent_run: str | None = None
    """The parent's run id."""
    equal: bool = True
    """Every check held: the run goes on live; False stops it with ``fork_mismatch``."""
    checks: dict[str, Any] = Field(default_factory=dict)
    """What was compared and how it came out: ``replies``, ``observations``, ``workspace`` (files, sha256),
    ``shell`` (cwd, the exported environment's sha256) — see docs/run.md "Fork a run"."""
    mismatches: list[str] = Field(default_factory=list)
    """One line per difference (empty when ``equal``)."""


class ResumeEvent(_Event):
    """A run stopped part-way was resumed in place (``fte_shell.episode.resume``): its recorded turns were
    replayed without the model and checked against what it recorded. Written after the replayed turns,
    before the first live model call; or, when the check failed (or the run could not be resumed), as the
    first event after ``start`` of the run redone from scratch (``redone``)."""

    type: Literal["resume"] = "resume"
    turn: int = 0
    """The last replayed turn (0 for a run redone from scratch)."""
    count: int = 0
    """How many times the run has been resumed, this time included (0 for a redo)."""
    equal: bool = True
    """The replayed state equals the recorded one: the run goes on live."""
    cut_turn: bool = False
    """The last replayed turn was cut by the stop (its reply on disk, not every tool result): its tool
    calls were run again from the recorded reply."""
    checks: dict[str, Any] = Field(default_factory=dict)
    """What was compared: ``replies``, ``observations``, ``context_edits``, ``workspace`` (files, sha256),
    ``shell`` (cwd)."""
    mismatches: list[str] = Field(default_factory=list)
    """One line per difference, or the one-line reason the run could not be resumed."""
    redone: int = 0
    """How many times the run was redone from scratch after a failed resume (this one included)."""
