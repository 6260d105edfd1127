"""What the loop sends of the kept conversation: the :class:`ContextPolicy` seam (:mod:`.base`), the
strategies of ``[agent.context]`` (:mod:`.clearing`: ``keep_recent``, ``discard_fraction``,
``discard_all``; :mod:`.reset`: ``summary``, ``workspace_reset``; what they share: :mod:`.edits`) and
:func:`make_policy`, the one place a strategy is built from the config (docs/run.md "Context
strategies")."""

from __future__ import annotations

from collections.abc import Callable

from ...config import ContextConfig, ModelConfig, RunConfig
from ...plugins import Registry
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

STRATEGY_CLASSES: Registry[Callable[[ContextConfig, ModelConfig], ContextPolicy]] = Registry("context strategy", {
    "keep_recent": f"{__package__}.clearing:KeepRecent",
    "discard_fraction": f"{__package__}.clearing:DiscardFraction",
    "discard_all": f"{__package__}.clearing:DiscardAll",
    "summary": f"{__package__}.reset:Summary",
    "workspace_reset": f"{__package__}.reset:WorkspaceReset",
})
"""``agent.context.strategy`` → its policy's class (``keep_all``: :class:`KeepAll`); a third-party strategy
is ``module:attr``, called with ``[agent.context]`` and the agent's ``[model]``."""


def make_policy(config: RunConfig) -> ContextPolicy:
    """A new policy object (one per run: it keeps state) for ``config.agent.context``."""
    cfg = config.agent.context
    if cfg.strategy == "keep_all":
        return KeepAll()
    return STRATEGY_CLASSES.get(cfg.strategy)(cfg, config.model)


__all__ = [
    "STRATEGY_CLASSES", "ContextEdit", "ContextPolicy", "ContextView", "DiscardAll", "DiscardFraction", "Editing",
    "KeepAll", "KeepRecent", "Sent", "Summary", "WorkspaceReset", "composed", "estimate_request", "make_policy",
    "policy_state", "restore_policy",
]
