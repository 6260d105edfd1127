"""``PoolConfig``: how an :class:`~fte_shell.rl.pool.EpisodePool` sizes its warm boxes, paces its box
starts and keeps its episodes."""

from __future__ import annotations

from pydantic import Field

from ..config.base import StrictModel


class PoolConfig(StrictModel):
    """The episode pool's knobs (the episodes themselves follow the ``RunConfig`` given with it: the
    profile, the sandbox, the world; ``agent.time_budget_s`` bounds each episode's life)."""

    size: int = Field(8, ge=1)
    """Warm boxes kept started ahead of need (the shell profile; other profiles have no box)."""

    max_starting: int = Field(8, ge=1)
    """Box starts in flight at once beyond the warm boxes' own filler: a burst of resets finding no warm
    box waits its turn instead of starting every box at once."""

    start_interval_s: float = Field(0.01, ge=0)
    """At least this long between two box starts a burst of resets launches (the ramp)."""

    reuse_boxes: bool = True
    """Give an ended episode's box back to the pool, reset (``SandboxPool.release``: every process of the
    agent killed, /tmp and the box's other writable places, the workspace and the gateway directory
    emptied, a new shell), to be the next episode's box, instead of removing it and starting another.
    On by default because a trainer's episodes are many, short and alike, and a box start is most of a
    short episode's cost (Docker: the daemon's create, start and remove were 73 % of an episode's time,
    docs/rl.md "Figures"); the run directory still gets the episode's workspace (copied out before the
    reset). A box whose reset fails, or which cannot be reset (``sandbox.protect_warden`` off, a writable
    root, gVisor), is removed as before. False: a fresh box per episode, as sweeps and ``fte-shell run``
    always do (e.g. when an episode may leave something a reset does not cover: docs/rl.md)."""

    record: bool = True
    """Keep every episode as a run directory under the pool's directory (a sweep ``fte-shell judge``,
    ``report`` and ``view`` read); False keeps only the reward and the trajectory, in memory."""

    judge_concurrency: int = Field(8, ge=1)
    """Grading-model calls in flight (a model preset's rewards)."""
