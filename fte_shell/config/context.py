"""``[agent.context]``: what the loop sends of the kept conversation when it grows (context management;
the strategies: :mod:`fte_shell.agent.context`, docs/run.md "Context strategies").

The spelling on the command line (``--context``) is :meth:`ContextConfig.parse`'s: ``keep_all``,
``keep_recent:5``, ``discard_fraction:0.75``, ``discard_all``, ``summary``, ``workspace_reset``, or a
third-party strategy as ``module:attr`` (:data:`fte_shell.agent.context.STRATEGY_CLASSES`);
:attr:`ContextConfig.label` writes it back (the arm's name in a sweep).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from ..plugins import is_reference
from .base import StrictModel
from .model import ModelConfig

Strategy = Literal["keep_all", "keep_recent", "discard_fraction", "discard_all", "summary", "workspace_reset"]
STRATEGIES: tuple[str, ...] = Strategy.__args__  # type: ignore[attr-defined]
"""The built-in strategies (a third-party one is ``module:attr``)."""


class ContextConfig(StrictModel):
    """One context strategy and its parameters."""

    strategy: str = "keep_all"
    """``keep_all`` (everything, every turn: the paper's setting), ``keep_recent`` (the ``keep`` most recent
    tool observations verbatim, each older one a short placeholder), ``discard_fraction`` (the oldest
    ``fraction`` of tool-call/result pairs dropped when triggered), ``discard_all`` (every earlier tool call
    and result dropped when triggered, with a note that the workspace still holds what was fetched),
    ``summary`` (the history replaced by a summary the model writes when triggered) or ``workspace_reset``
    (start again from the question plus a listing of what the workspace holds, when triggered), or a
    third-party strategy as ``module:attr`` (a class taking this table and the agent's ``[model]``, as
    :class:`fte_shell.agent.context.Editing` does; docs/run.md "Context strategies")."""

    keep: int = Field(default=5, ge=0)
    """``keep_recent``: tool observations kept verbatim (MiroThinker's ``keep_tool_result = 5``)."""

    fraction: float = Field(default=0.75, gt=0, le=1)
    """``discard_fraction``: the share of tool-call/result pairs dropped, oldest first (DeepSeek-V3.2's 0.75)."""

    trigger: float = Field(default=0.8, gt=0, le=1)
    """Edit when the estimated prompt passes this fraction of the context window (DeepSeek-V3.2's 0.8).
    Every strategy but ``keep_all`` also edits, and if need be drops the oldest steps, whenever the prompt
    would not fit the window: it never sends one over it."""

    trigger_tokens: int | None = Field(default=None, gt=0)
    """Edit when the estimated prompt passes this many tokens instead (overrides ``trigger``; also the
    trigger when the window is unknown)."""

    keep_recent_every_turn: bool = True
    """``keep_recent``: clear older observations every turn (MiroThinker and Anthropic's context editing);
    False = only once the prompt passes the trigger."""

    summary_model: ModelConfig | None = None
    """``summary``: the model that writes the summary; None = the agent's own. Its unset ``base_url``,
    ``api_key`` and ``model`` are taken from the agent's ``[model]``."""

    @field_validator("strategy")
    @classmethod
    def _known_strategy(cls, name: str) -> str:
        if name in STRATEGIES or is_reference(name):
            return name
        raise ValueError(f"a context strategy ({', '.join(STRATEGIES)}) or a third-party one as module:attr")

    @model_validator(mode="after")
    def _summary_model_only_for_summary(self) -> ContextConfig:
        if self.summary_model is not None and self.strategy != "summary":
            raise ValueError(f"agent.context.summary_model is set but the strategy is {self.strategy!r}, not 'summary'")
        return self

    @property
    def label(self) -> str:
        """The command-line spelling: ``keep_recent:5``, ``discard_fraction:0.75``, ``discard_all`` …"""
        if self.strategy == "keep_recent":
            return f"keep_recent:{self.keep}"
        if self.strategy == "discard_fraction":
            return f"discard_fraction:{self.fraction:g}"
        return self.strategy

    @classmethod
    def parse(cls, spec: str) -> ContextConfig:
        """A strategy from its command-line spelling (``keep_recent:5``); a ValueError names what is wrong."""
        name, _, arg = spec.strip().partition(":")
        if name not in STRATEGIES and is_reference(spec.strip()):
            return cls(strategy=spec.strip())
        if name not in STRATEGIES:
            raise ValueError(f"unknown context strategy {name!r} in {spec!r}; one of: {', '.join(STRATEGIES)}")
        if name == "keep_recent":
            if not arg.isdigit():
                raise ValueError(f"{spec!r}: keep_recent takes a count of observations, e.g. keep_recent:5")
            return cls(strategy="keep_recent", keep=int(arg))
        if name == "discard_fraction":
            try:
                return cls(strategy="discard_fraction", fraction=float(arg))
            except ValueError:
                raise ValueError(f"{spec!r}: discard_fraction takes a share in (0, 1], e.g. discard_fraction:0.75") from None
        if arg:
            raise ValueError(f"{spec!r}: {name} takes no argument")
        return cls(strategy=name)  # type: ignore[arg-type]
