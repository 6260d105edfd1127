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

    record: bool = True
    """Keep every episode as a run directory under the pool's directory (a sweep ``fte-shell judge``,
    ``report`` and ``view`` read); False keeps only the reward and the trajectory, in memory."""

    judge_concurrency: int = Field(8, ge=1)
    """Grading-model calls in flight (a model preset's rewards)."""
