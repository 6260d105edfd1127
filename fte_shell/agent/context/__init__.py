"""What the loop sends of the kept conversation: the :class:`ContextPolicy` seam (:mod:`.base`), the
strategies of ``[agent.context]`` (:mod:`.clearing`: ``keep_recent``, ``discard_fraction``,
``discard_all``; :mod:`.reset`: ``summary``, ``workspace_reset``; what they share: :mod:`.edits`) and
:func:`make_policy`, the one place a strategy is built from the config (docs/run.md "Context
strategies")."""

from __future__ import annotations

from ...config import RunConfig
from .base import (
    ContextEdit,
    ContextPolicy,
    ContextView,
    KeepAll,
    Sent,
    composed,
    estimate_request,
    policy_state,
    restore_policy,
)
from .clearing import DiscardAll, DiscardFraction, KeepRecent
from .edits import Editing
from .reset import Summary, WorkspaceReset

STRATEGY_CLASSES: dict[str, type[Editing]] = {
    "keep_recent": KeepRecent, "discard_fraction": DiscardFraction, "discard_all": DiscardAll,
    "summary": Summary, "workspace_reset": WorkspaceReset,
}
"""``agent.context.strategy`` → its policy (``keep_all``: :class:`KeepAll`)."""


def make_policy(config: RunConfig) -> ContextPolicy:
    """A new policy object (one per run: it keeps state) for ``config.agent.context``."""
    cfg = config.agent.context
    if cfg.strategy == "keep_all":
        return KeepAll()
    return STRATEGY_CLASSES[cfg.strategy](cfg, config.model)


__all__ = [
    "STRATEGY_CLASSES", "ContextEdit", "ContextPolicy", "ContextView", "DiscardAll", "DiscardFraction", "Editing",
    "KeepAll", "KeepRecent", "Sent", "Summary", "WorkspaceReset", "composed", "estimate_request", "make_policy",
    "policy_state", "restore_policy",
]
