"""What one run counts into ``result.json`` whoever drives it (:class:`Tally`), what it produced
(:class:`RunResult` = ``result.json``), and the ``start`` and ``end`` events (:func:`write_start`,
:func:`write_end`: the end event and ``result.json`` through the one writer)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..config import RunConfig
from ..digest import config_digest
from ..model import ServerInfo
from ..record.events import EndEvent, StartEvent, WarningEvent
from ..record.rundir import RunWriter
from ..stops import StopReason

USAGE_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")

TOOL_USAGE_META = "summary_usage"
"""Key of a tool result's ``meta`` under which a tool that calls a model of its own (visit-summary's
reader) reports that call's token usage; the episode sums it into :attr:`RunResult.summary_usage`."""


def add_usage(total: dict[str, int], usage: Any) -> None:
    """Add the token counts of ``usage`` (a usage dict, or anything else = nothing) to ``total``."""
    if isinstance(usage, dict):
        for k in USAGE_KEYS:
            v = usage.get(k)
            if isinstance(v, int):
                total[k] += v


class RunResult(BaseModel):
    """What one question's run produced. ``result.json`` is this model without ``run_dir`` (fields in
    this order), plus ``started_at``, ``meta`` and ``config_digest``."""

    model_config = ConfigDict(extra="forbid")

    question: str
    """The question as asked."""

    answer: str | None
    """The final answer (text inside the last ``<answer>`` tags), or None when the run ended without one."""

    answer_unclosed: bool = False
    """True when the answer is the text after an ``<answer>`` the model never closed (in a reply that
    finished normally). In ``result.json`` only when true."""

    answer_unescaped: bool = False
    """True when the answer tags were written HTML-escaped (``&lt;answer&gt;``, on a server that escapes what
    the model sees) and the answer was unescaped. In ``result.json`` only when true."""

    answer_format: dict[str, Any] | None = None
    """A profile that answers in a benchmark's own format (:mod:`fte_shell.profiles.answer_format`): the
    format's record (its name, ``official``, where its templates came from…) and, when the run gave a final
    answer, what the reply said (``response``, ``exact_answer``, ``confidence``…). In ``result.json`` only
    then."""

    profile: str = ""
    """Profile name."""

    context: str = "keep_all"
    """The context strategy's label (``agent.context``: ``keep_recent:5``, ``discard_all`` …). In
    ``result.json`` only when not ``keep_all`` (a run without the key, e.g. one written before it existed,
    kept everything)."""

    model: str | None = None
    """Model name."""

    turns: int
    """Turns of the run: model calls made (successful or not) when the agent's loop drives it. An episode
    driven by hand counts each ``Episode.call`` made without ``turn=`` as a turn of its own; a driver that
    passes ``turn=`` numbers its turns itself (the highest one recorded is the count)."""

    stop_reason: StopReason
    """Why the loop stopped."""

    tool_calls: dict[str, int] = Field(default_factory=dict)
    """Tool calls by tool name (malformed and unknown calls included, under the name the model gave)."""

    usage: dict[str, int] = Field(default_factory=dict)
    """The agent model's summed token usage: ``prompt_tokens``, ``completion_tokens``, ``total_tokens``
    (the sum of the ``model_call`` events)."""

    summary_usage: dict[str, int] = Field(default_factory=dict)
    """Tokens spent by models called besides the agent's turns: visit-summary's reader model (summed from
    the tool calls' ``meta.summary_usage``) and the ``summary`` context strategy's writer (the
    ``context_edit`` events' ``usage``); same keys as :attr:`usage`, NOT included in it (so ``usage``
    stays comparable across profiles and strategies). All zero otherwise."""

    cost_usd: float | None = None
    """What the run's model calls cost in USD (docs/run.md "Cost"): the sum of the ``model_call`` events'
    ``cost_usd``, plus visit-summary's reader-model tokens (:attr:`summary_usage`) at the reader's price
    when it is known; None when the agent model's price is unknown."""

    wall_s: float
    """Wall-clock seconds from the start event to the end (the loop's time; set-up, e.g. the box's start,
    is the ``t`` of the start event)."""

    run_id: str
    """Identifier of this run (also in ``result.json``)."""

    run_dir: Path | None = None
    """The run directory, when there is one (not in ``result.json``)."""

    forked_from: dict[str, Any] | None = None
    """A fork's parent (:mod:`fte_shell.episode.fork`): ``run`` (its run id), ``run_dir``, ``turn`` (the
    turns replayed without a model call), ``equal`` (the replayed state matched the parent's) and
    ``checks`` (what was compared). In ``result.json`` only for a fork."""

    resumed: dict[str, Any] | None = None
    """A run stopped part-way and continued in place (:mod:`fte_shell.episode.resume`): ``count`` (times
    resumed), ``turns`` (the turn each resume went on from), ``cut_turn`` (the last resume redid a cut turn
    from its reply), ``redone`` (times it was redone from scratch after a failed resume; then also
    ``mismatch``, the last reason). In ``result.json`` only for such a run."""


def _zero_usage() -> dict[str, int]:
    return dict.fromkeys(USAGE_KEYS, 0)


@dataclass
class Tally:
    """What a run counts into ``result.json``, whoever drives its episode: the episode counts the turns
    and the tool calls (and a tool's own model tokens), a loop adds its model's usage, cost and the
    answer's flags."""

    turns: int = 0
    """The highest turn so far (see :attr:`RunResult.turns`)."""
    tool_counts: dict[str, int] = field(default_factory=dict)
    usage: dict[str, int] = field(default_factory=_zero_usage)
    summary_usage: dict[str, int] = field(default_factory=_zero_usage)
    cost_usd: float | None = None
    """USD spent so far (None: the agent model's price is unknown)."""
    answer_unclosed: bool = False
    answer_unescaped: bool = False
    answer_format: dict[str, Any] | None = None
    """The profile's answer format record and the parsed final reply (see :attr:`RunResult.answer_format`)."""

    def tokens_spent(self) -> int:
        """Tokens of the run so far: the agent model's and a reader model's (``agent.max_total_tokens``)."""
        return self.usage["total_tokens"] + self.summary_usage["total_tokens"]

    def result(self, question: str, stop_reason: StopReason, answer: str | None, **run: Any) -> RunResult:
        """The :class:`RunResult` of the run that stopped so (``run``: profile, model, wall_s, run_id, run_dir)."""
        return RunResult(question=question, answer=answer, answer_unclosed=self.answer_unclosed and answer is not None,
                         answer_unescaped=self.answer_unescaped and answer is not None,
                         answer_format=self.answer_format,
                         turns=self.turns, stop_reason=stop_reason, tool_calls=dict(self.tool_counts),
                         usage=dict(self.usage), summary_usage=dict(self.summary_usage),
                         cost_usd=None if self.cost_usd is None else round(self.cost_usd, 8), **run)


def write_start(rec: RunWriter, question: str, profile: str, config: RunConfig, system: str,
                tools: list[dict[str, Any]], run_id: str, info: ServerInfo | None) -> None:
    """Record the ``start`` event (what the run was given) and a ``warning`` per server warning."""
    rec.write(StartEvent(question=question, profile=profile, model=config.model.model,
                         config=config.model_dump(mode="json"), system_prompt=system, tools=tools, run_id=run_id,
                         reasoning_passback=config.model.reasoning_passback,
                         server=info.model_dump(mode="json") if info is not None else None))
    for w in info.warnings if info is not None else []:
        rec.write(WarningEvent(turn=0, message=w))


def write_end(rec: RunWriter, result: RunResult, *, started_at: str, meta: dict[str, Any], config: RunConfig) -> None:
    """Record the ``end`` event and write ``result.json`` (``answer_unclosed``, ``answer_unescaped`` only when
    true; ``forked_from`` only for a fork; ``context`` only when not ``keep_all``)."""
    flags = [f for f in ("answer_unclosed", "answer_unescaped") if getattr(result, f)]
    if result.context != "keep_all":
        flags.append("context")
    unset = {name for name in ("forked_from", "resumed", "answer_format") if getattr(result, name) is None}
    rec.write(EndEvent(stop_reason=result.stop_reason, answer=result.answer, turns=result.turns, wall_s=result.wall_s,
                       **dict.fromkeys((f for f in flags if f != "context"), True),
                       **({"cost_usd": result.cost_usd} if result.cost_usd is not None else {})))
    hidden = ({"run_dir", "answer_unclosed", "answer_unescaped", "context"} - set(flags)) | unset
    rec.write_result({**result.model_dump(mode="json", exclude=hidden), "started_at": started_at, "meta": meta,
                      "config_digest": config_digest(config)})  # fte_shell/digest.py: which config this run used
