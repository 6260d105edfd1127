"""``EpisodeHost``: what every host of a question's :class:`~fte_shell.episode.Episode` shares, in one
place — ``fte-shell run`` and a sweep's attempts (:mod:`fte_shell.runner`), an MCP server's workspaces
(:mod:`fte_shell.mcp.workspaces`), an RL trainer's episode pool (:mod:`fte_shell.rl.pool`) and a
verifiers rollout's tool server (:mod:`fte_shell.rl.verifiers.toolset`).

A host holds a configuration, a world (shared by its episodes; None: each episode makes and closes its
own) and, for the shell profile, warm boxes (a :class:`~fte_shell.sandbox.SandboxPool`); it opens an
episode on them (the world bound to the run, the run directory written, a warm box lent when there is
one) and its :meth:`close` removes the warm boxes. An episode ends with :meth:`Episode.end
<fte_shell.episode.Episode.end>`. What differs stays with the callers: run ids, ``meta`` and where run
directories go; the model client and resume (the runner); handles and idle reaping (MCP); episode
numbering, paced starts and rewards (RL). The host never closes the world: its maker does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..config import RunConfig
from ..sandbox import SandboxPool
from ..world import World
from .core import Episode


class EpisodeHost:
    """Opens ``config``'s episodes on ``world`` with ``warm`` boxes started ahead (the shell profile only)."""

    def __init__(self, config: RunConfig, world: World | None = None, *, warm: int = 0, reuse_boxes: bool = True):
        """``warm`` > 0: that many boxes kept started (the shell profile; other profiles have no box);
        ``reuse_boxes``: an episode's box goes back to the pool, reset, when the episode closes (else it is
        removed)."""
        self.config, self.world, self.reuse_boxes = config, world, reuse_boxes
        self.boxes: SandboxPool | None = None
        """The warm boxes (None: every episode starts its own box), closed by :meth:`close`."""
        if warm and config.agent.profile == "shell":
            self.boxes = SandboxPool(config.sandbox.model_copy(update={"workspace_dir": None}), size=warm)

    def _kw(self, kw: dict[str, Any]) -> dict[str, Any]:
        boxes = self.boxes
        return {"world": self.world, "sandbox_source": boxes.acquire if boxes else None,
                "sandbox_release": boxes.release if boxes and self.reuse_boxes else None, **kw}

    def open(self, question: str, run_dir: Path, **kw: Any) -> Episode:
        """Open ``question``'s episode, its run directory ``run_dir``, with a warm box when there is one.
        Other keywords (``run_id``, ``meta``, ``log``, ``server``, ``model``) as :meth:`Episode.open`."""
        return Episode.open(self.config, question, Path(run_dir), **self._kw(kw))

    async def aopen(self, question: str, run_dir: Path, **kw: Any) -> Episode:
        """:meth:`open` in an episode worker thread (:meth:`Episode.aopen`)."""
        return await Episode.aopen(self.config, question, Path(run_dir), **self._kw(kw))

    def close(self) -> None:
        """Remove the warm boxes (and those given back); the episodes still open then have theirs removed,
        not reset, when they close. Idempotent."""
        if self.boxes is not None:
            self.boxes.close()
