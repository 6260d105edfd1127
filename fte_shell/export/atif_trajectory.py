"""Runs as ATIF trajectories (Agent Trajectory Interchange Format v1.8; docs/export.md, "ATIF"), built
with and validated by the ``atif`` package's pydantic models (imported lazily: the ``atif`` extra).

One trajectory per run: a system step (the system prompt), a user step (the question), then one agent
step per model call (message, reasoning, the tool calls and their observations keyed by call id, the
call's token metrics) and a user step for every turn the loop added (a nudge, the final-answer request);
a ``warning``, ``error`` or ``context_edit`` event becomes a system step at its place (an edit's says what
the context strategy sent instead of the whole conversation). What ATIF has no field for is kept
in the ``extra`` of the step, the tool call, the result or the trajectory."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from ..record.events import (
    ContextEditEvent,
    ErrorEvent,
    FinalAnswerRequestEvent,
    ModelCallEvent,
    NudgeEvent,
    StartEvent,
    WarningEvent,
)
from ..version import __version__
from .base import Exported, NoOptions, Reads, missing_extra
from .common import (
    Conversation,
    Run,
    Turn,
    at,
    conversation,
    plain,
    read_runs,
    records_frozen,
    safe_name,
    tool_calls_of,
)

SCHEMA = "ATIF-v1.8"
_PLACED = {"config", "server", "reasoning_passback", "schema_version", "system_prompt", "question", "tools", "run_id",
           "profile", "model"}
"""Start-event fields placed elsewhere in the trajectory (the rest go to ``agent.extra.start``)."""
AGENT = "fte-shell"
NOTE = ("Exported by fte-shell from its run record: fields ATIF has no place for are in the `extra` of the "
        "step, tool call, observation result or trajectory (docs/export.md).")


def require_atif() -> None:
    """Raise :class:`~.base.ExportError` naming the extra when atif is not installed."""
    try:
        import atif  # noqa: F401
    except ImportError:
        raise missing_extra("atif", "atif") from None


def _iso(run: Run, t: float) -> str:
    return at(run, t).isoformat().replace("+00:00", "Z")


def _metrics(ev: ModelCallEvent) -> Any:
    from atif import Metrics

    u, d = ev.usage or {}, ev.usage_details or {}
    cached = (d.get("prompt_tokens_details") or {}).get("cached_tokens")
    extra = {k: v for k, v in {"total_tokens": u.get("total_tokens"), "usage_details": ev.usage_details,
                               "latency_s": ev.latency_s}.items() if v is not None}
    return Metrics(prompt_tokens=u.get("prompt_tokens"), completion_tokens=u.get("completion_tokens"),
                   cached_tokens=cached if isinstance(cached, int) else None, cost_usd=ev.cost_usd,
                   extra=extra or None)


def _present(d: dict[str, Any]) -> dict[str, Any]:
    """``d`` without its None values."""
    return {k: v for k, v in d.items() if v is not None}


def trajectory(run: Run) -> Any:
    """The run as one ``atif.Trajectory`` (validated by its models on construction)."""
    from atif import Step, Trajectory

    conv = conversation(run)
    res = run.result or {}
    steps = [Step(step_id=i, **kw) for i, kw in enumerate(_placed_steps(run, conv), 1)]
    kept = [plain(ev) for ev in conv.others if not isinstance(ev, WarningEvent | ErrorEvent | ContextEditEvent)]
    extra = _present({
        "run_dir": str(run.run_dir), "dataset": run.dataset or None, "task": run.task, "qid": run.qid, "rep": run.rep,
        "question": run.question, "target": run.target, "answer": res.get("answer"), "stop_reason": run.stop_reason,
        "infrastructure_failure": run.infra_failure, "result": res or None, "judgement": run.judgement,
        "hand_check": run.audit.model_dump() if run.audit else None,
        "question_row": run.question_row or None, "events": kept or None})
    return Trajectory(schema_version=SCHEMA, session_id=run.run_id, agent=_agent(run), steps=steps, notes=NOTE,
                      final_metrics=_final_metrics(res, steps), extra=extra)


def _placed_steps(run: Run, conv: Conversation) -> list[dict[str, Any]]:
    """The fields of every step in time order: the conversation's messages (system, user, one agent step
    per model call, the turns the loop added), then at their times the warnings, errors and context edits."""
    by_msg = {t.message: t for t in conv.turns}
    placed: list[tuple[float, int, dict[str, Any]]] = []  # (t, order, step fields)
    for i, m in enumerate(conv.messages):
        ev = m.event
        t = ev.t if ev is not None else 0.0
        if i in by_msg:
            placed.append((t, 0, _agent_step(run, by_msg[i], m.content, t)))
        elif m.role in ("system", "user") and (ev is None or isinstance(ev, StartEvent)):
            placed.append((t, 0, {"source": m.role, "message": m.content, "timestamp": _iso(run, t)}))
        elif isinstance(ev, NudgeEvent | FinalAnswerRequestEvent):
            placed.append((t, 0, {"source": "user", "message": m.content, "timestamp": _iso(run, t),
                                  "extra": {"event": ev.type, "turn": ev.turn, "t": ev.t,
                                            **({"kind": ev.kind} if isinstance(ev, NudgeEvent) else {})}}))
    for ev in conv.others:
        if isinstance(ev, WarningEvent | ErrorEvent | ContextEditEvent):
            text = edit_note(ev) if isinstance(ev, ContextEditEvent) else ev.message
            placed.append((ev.t, 1, {"source": "system", "message": text, "timestamp": _iso(run, ev.t),
                                     "extra": {"event": plain(ev)}}))
    return [kw for _t, _o, kw in sorted(placed, key=lambda x: (x[0], x[1]))]


def _agent_step(run: Run, turn: Turn, message: str, t: float) -> dict[str, Any]:
    """The fields of one model call's agent step: its tool calls, their observations, its metrics."""
    from atif import Observation, ObservationResult, ToolCall

    call = turn.call
    tcs = [ToolCall(tool_call_id=c["id"], function_name=c["name"], arguments=c["arguments"],
                    extra=_present({"raw_arguments": c["raw"], "parse_error": c["parse_error"]}) or None)
           for c in tool_calls_of(turn)]
    results = [ObservationResult(
        source_call_id=te.id or "", content=te.observation,
        extra=_present({"name": te.name, "error": te.error, "duration_s": te.duration_s, "salvaged": te.salvaged,
                        "meta": te.meta.model_dump(mode="json", exclude_none=True), **(te.model_extra or {})}))
        for te in turn.tools]
    extra = _present({
        "turn": call.turn, "t": call.t, "finish_reason": call.finish_reason, "attempts": call.attempts,
        "request": call.request, "response": call.response, "message": call.message,
        "reasoning_fields": call.reasoning_fields, "kept_changes": call.kept_changes,
        "retries": [plain(r) for r in turn.retries] or None,
        "text_tool_calls": [plain(x) for x in turn.text_calls] or None,
        "tool_events_t": [te.t for te in turn.tools] or None, **(call.model_extra or {})})
    return {"source": "agent", "message": message, "timestamp": _iso(run, t),
            "model_name": str((call.response or {}).get("model") or run.model), "reasoning_content": call.reasoning,
            "tool_calls": tcs or None, "observation": Observation(results=results) if results else None,
            "metrics": _metrics(call), "llm_call_count": 1, "extra": extra}


def _final_metrics(res: dict[str, Any], steps: list[Any]) -> Any:
    """The run's totals: its usage and cost from the result, cached tokens summed over the steps."""
    from atif import FinalMetrics

    usage = res.get("usage") or {}
    cached = sum(s.metrics.cached_tokens or 0 for s in steps if s.metrics is not None)
    has_cached = any(s.metrics is not None and s.metrics.cached_tokens is not None for s in steps)
    return FinalMetrics(total_prompt_tokens=usage.get("prompt_tokens"),
                        total_completion_tokens=usage.get("completion_tokens"),
                        total_cached_tokens=cached if has_cached else None, total_steps=len(steps),
                        total_cost_usd=res.get("cost_usd") if isinstance(res.get("cost_usd"), int | float) else None,
                        extra=_present({"total_tokens": usage.get("total_tokens"), "turns": res.get("turns"),
                                        "summary_usage": res.get("summary_usage"),
                                        "wall_s": res.get("wall_s")}) or None)


def _agent(run: Run) -> Any:
    """The agent: fte-shell, the model, the tools, and the start event's settings."""
    from atif import Agent

    st = run.start
    start = plain(st) if st is not None else {}
    return Agent(name=AGENT, version=__version__, model_name=run.model,
                 tool_definitions=(st.tools if st is not None else None) or None,
                 extra=_present({"profile": run.profile, "context": run.context, "retriever": run.retriever,
                                 "config": start.get("config"), "server": start.get("server"),
                                 "reasoning_passback": start.get("reasoning_passback"),
                                 "schema_version": start.get("schema_version"),
                                 "start": {k: v for k, v in start.items() if k not in _PLACED} or None}))


def edit_note(ev: ContextEditEvent) -> str:
    """A context edit in one line: the strategy, messages and estimated tokens before → after, the calls cleared."""
    cleared = f"; cleared {len(ev.cleared)} tool call(s): {', '.join(ev.cleared)}" if ev.cleared else ""
    return (f"context edit ({ev.strategy}) before turn {ev.turn}: {ev.messages_before} → {ev.messages_after} "
            f"messages, ~{ev.tokens_before:,} → ~{ev.tokens_after:,} tokens{cleared}"
            + (f". {ev.note}" if ev.note else ""))


def dumps(traj: Any) -> str:
    """A trajectory as its JSON file's text (atif's own serialisation, unset fields left out)."""
    return str(traj.model_dump_json(exclude_none=True, indent=2)) + "\n"


def loads(text: str) -> Any:
    """An ATIF file's text as an ``atif.Trajectory`` (validated)."""
    from atif import Trajectory

    return Trajectory.model_validate_json(text)


def file_name(run: Run, several: bool) -> Path:
    """``<arm>/<qid>/r<k>.json`` (the arm: the profile, or ``profile-strategy`` for a context strategy
    other than keep_all; under the source's name when several sources are exported)."""
    rel = Path(safe_name(run.arm)) / safe_name(run.qid) / f"r{run.rep}.json"
    return Path(safe_name(run.source.name)) / rel if several else rel


def export_atif(paths: Iterable[Path], out: Path, *, on_run: Callable[[Run], None] | None = None) -> list[Path]:
    """One ATIF trajectory file per run under ``paths``, into the directory ``out``; ``on_run`` is called
    once per run exported. Returns the files written."""
    require_atif()
    runs = read_runs(paths)
    several = len({r.source for r in runs}) > 1
    written = []
    with records_frozen():
        for run in runs:
            path = Path(out) / file_name(run, several)
            path.parent.mkdir(parents=True, exist_ok=True)
            text = dumps(trajectory(run))
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(path)
            written.append(path)
            if on_run is not None:
                on_run(run)
    return written


class AtifExporter:
    """``fte-shell export atif``: :func:`export_atif` as an :class:`~.base.Exporter`."""

    name = "atif"
    summary = ("ATIF (v1.8) trajectories, one per run, built and validated with the atif package's models: a step "
               "per model turn with its message, reasoning, tool calls and observations, per-step and final token "
               "metrics.")
    reads: Reads = "runs"
    writes = "Directory for the trajectories (<arm>/<qid>/r<k>.json; under <sweep name>/ for several sources)."
    options_model = NoOptions

    def require(self) -> None:
        require_atif()

    def export(self, paths: Sequence[Path], out: Path, options: NoOptions, on_run: Callable[[Any], None]) -> Exported:
        return Exported("ATIF trajectory file", export_atif(paths, out, on_run=on_run))


EXPORTER = AtifExporter()
