"""One run as an Inspect AI ``EvalSample`` (docs/export.md, "Inspect AI"), built with inspect-ai's own
models (imported here, lazily: the ``inspect`` extra).

Every id and time comes from the record (message ids and event uuids derived from the run id, times from
``started_at`` plus the event's ``t``), so the same run always gives the same sample. What has no field in
Inspect is kept in the sample's, the message's or the event's ``metadata`` (``fte_shell`` key)."""

from __future__ import annotations

from typing import Any

from ..record.events import (
    ErrorEvent,
    FinalAnswerRequestEvent,
    ModelCallEvent,
    NudgeEvent,
    StartEvent,
    ToolCallEvent,
)
from .common import Conversation, Run, at, clock, conversation, plain, stable_id, tool_calls_of
from .scores import scores_of

FINISH = {"stop": "stop", "length": "max_tokens", "tool_calls": "tool_calls", "content_filter": "content_filter"}
"""OpenAI finish reasons → Inspect's ``StopReason`` (anything else: ``unknown``)."""
LIMITS = {"max_turns": "turn", "time_budget": "time", "context_overflow": "context"}
"""fte-shell stop reasons that are a limit → Inspect's ``EvalSampleLimit.type``."""
NOTE = ("fte-shell export: fields with no place in Inspect's models are kept under metadata['fte_shell'] "
        "(docs/export.md)")


def usage_of(u: dict[str, Any] | None, details: dict[str, Any] | None = None, cost: float | None = None) -> Any:
    """An OpenAI-style usage dict as an Inspect ``ModelUsage`` (cached and reasoning tokens from the
    server's details when it reported them; ``total_cost`` = the recorded cost in USD, when known)."""
    from inspect_ai.model import ModelUsage

    u, d = u or {}, details or {}
    cached = (d.get("prompt_tokens_details") or {}).get("cached_tokens")
    reasoning = (d.get("completion_tokens_details") or {}).get("reasoning_tokens")
    return ModelUsage(input_tokens=int(u.get("prompt_tokens") or 0), output_tokens=int(u.get("completion_tokens") or 0),
                      total_tokens=int(u.get("total_tokens") or 0),
                      input_tokens_cache_read=cached if isinstance(cached, int) else None,
                      reasoning_tokens=reasoning if isinstance(reasoning, int) else None,
                      total_cost=float(cost) if isinstance(cost, int | float) else None)


def _tool_infos(run: Run) -> list[Any]:
    from inspect_ai.tool import ToolInfo, ToolParams

    out = []
    for t in (run.start.tools if run.start else []):
        f = t.get("function") or {}
        out.append(ToolInfo(name=str(f.get("name") or ""), description=str(f.get("description") or ""),
                            parameters=ToolParams.model_validate(f.get("parameters") or {})))
    return out


def messages(run: Run, conv: Conversation) -> list[Any]:
    """The conversation as Inspect chat messages (ids ``<run id>:<index>``)."""
    from inspect_ai.model import (
        ChatMessageAssistant,
        ChatMessageSystem,
        ChatMessageTool,
        ChatMessageUser,
        ContentReasoning,
        ContentText,
    )
    from inspect_ai.tool import ToolCall, ToolCallError

    calls = {t.message: t for t in conv.turns}
    out: list[Any] = []
    for i, m in enumerate(conv.messages):
        mid = f"{run.run_id}:{i}"
        ev = m.event
        if m.role == "system":
            out.append(ChatMessageSystem(id=mid, content=m.content, source="input"))
        elif m.role == "user":
            kind = ev.type if ev is not None and not isinstance(ev, StartEvent) else None
            out.append(ChatMessageUser(id=mid, content=m.content, source="input" if kind is None else None,
                                       metadata={"fte_shell": {"event": kind}} if kind else None))
        elif m.role == "assistant" and isinstance(ev, ModelCallEvent):
            turn = calls[i]
            content: Any = m.content
            if ev.reasoning:
                content = [ContentReasoning(reasoning=ev.reasoning), ContentText(text=m.content)]
            tcs = [ToolCall(id=c["id"], function=c["name"], arguments=c["arguments"], parse_error=c["parse_error"],
                            type="function") for c in tool_calls_of(turn)]
            meta = {k: v for k, v in {"reasoning_fields": ev.reasoning_fields, "kept_changes": ev.kept_changes,
                                      "turn": ev.turn}.items() if v is not None}
            out.append(ChatMessageAssistant(id=mid, content=content, tool_calls=tcs or None, source="generate",
                                            model=str((ev.response or {}).get("model") or run.model),
                                            metadata={"fte_shell": meta}))
        elif m.role == "tool" and isinstance(ev, ToolCallEvent):
            err = ToolCallError(type="unknown", message=ev.observation) if ev.error else None
            if ev.meta.timed_out:
                err = ToolCallError(type="timeout", message=ev.observation)
            out.append(ChatMessageTool(id=mid, content=m.content, tool_call_id=ev.id, function=ev.name, error=err))
    return out


def _tool_choice(choice: Any) -> Any:
    """The request's OpenAI ``tool_choice`` as Inspect's (``required`` → ``any``, a named function →
    ``ToolFunction``; none sent → ``auto``, the server's default)."""
    from inspect_ai.tool import ToolFunction

    if choice in ("auto", "none"):
        return choice
    if choice == "required":
        return "any"
    name = ((choice or {}).get("function") or {}).get("name") if isinstance(choice, dict) else None
    return ToolFunction(name=str(name)) if name else "auto"


def _tool_event(run: Run, ev: ToolCallEvent, n: int) -> Any:
    from inspect_ai.event import ToolEvent
    from inspect_ai.tool import ToolCallError

    meta = ev.meta.model_dump(mode="json", exclude_none=True)
    err = None
    if ev.meta.timed_out:
        err = ToolCallError(type="timeout", message=ev.observation)
    elif ev.error:
        err = ToolCallError(type="unknown", message=ev.observation)
    args = ev.arguments if ev.arguments is not None else {}
    extra = {"raw_arguments": ev.raw_arguments, "error": ev.error, "duration_s": ev.duration_s, "turn": ev.turn,
             "salvaged": ev.salvaged, "meta": meta, **(ev.model_extra or {})}
    started = at(run, ev.t - (ev.duration_s or 0.0))
    return ToolEvent(uuid=stable_id(run.run_id, "tool", n), span_id=None, timestamp=started,
                     working_start=max(0.0, ev.t - (ev.duration_s or 0.0) - clock(run)[1]),
                     id=ev.id or "", function=ev.name, arguments=args, result=ev.observation, error=err,
                     completed=at(run, ev.t), working_time=ev.duration_s, failed=bool(ev.error) or None,
                     metadata={"fte_shell": {k: v for k, v in extra.items() if v is not None}})


def events(run: Run, conv: Conversation, msgs: list[Any]) -> list[Any]:
    """One ``ModelEvent`` per model call, one ``ToolEvent`` per tool call, an ``InfoEvent`` for every other
    recorded event (retries, nudges, warnings, errors, the context edits, the end), in the record's order:
    its ``source`` is ``fte-shell:<event type>`` (``fte-shell:context_edit``), its ``data`` the event. A model event's input
    is the conversation before the call, given as Inspect's pooled form (``input_refs`` into the sample's
    ``events_data`` messages, which are the conversation itself): the log grows with the conversation, not
    with its square."""
    from inspect_ai.event import InfoEvent, ModelEvent
    from inspect_ai.model import ChatCompletionChoice, GenerateConfig, ModelCall, ModelOutput

    tools = _tool_infos(run)
    t0 = clock(run)[1]
    shown: list[str] | None = None  # the tool names whose definitions an earlier model event holds
    out: list[tuple[float, int, Any]] = []
    for n, turn in enumerate(conv.turns):
        ev = turn.call
        req, resp = dict(ev.request or {}), dict(ev.response or {})
        lat = ev.latency_s or 0.0
        stop = FINISH.get(ev.finish_reason or "", "unknown")
        output = ModelOutput(model=str(resp.get("model") or run.model),
                             choices=[ChatCompletionChoice(message=msgs[turn.message], stop_reason=stop)],
                             usage=usage_of(ev.usage, ev.usage_details, ev.cost_usd), time=ev.latency_s,
                             response_id=resp.get("id"))
        cfg = GenerateConfig(temperature=req.get("temperature"), top_p=req.get("top_p"),
                             max_tokens=req.get("max_tokens"), presence_penalty=req.get("presence_penalty"))
        choice = req.get("tool_choice")
        offered = req.get("tools") if isinstance(req.get("tools"), list) else [t.name for t in tools]
        infos = [t for t in tools if t.name in offered]
        where = None
        if infos and shown == offered:  # the same definitions once a sample: Inspect's walk over them
            infos, where = [], "as in the sample's first model event"  # would be half the export's time
        elif infos:
            shown = offered
        call = ModelCall(request={**req, "messages": f"conversation[:{turn.context}]"},
                         response={**resp, "usage": ev.usage_details or ev.usage, "finish_reason": ev.finish_reason},
                         time=ev.latency_s)
        extra = {"turn": ev.turn, "attempts": ev.attempts, "finish_reason": ev.finish_reason,
                 "tools": {"offered": offered, "definitions": where} if where else None,
                 "text_tool_calls": [plain(x) for x in turn.text_calls] or None, **(ev.model_extra or {})}
        out.append((ev.t - lat, 0, ModelEvent(
            uuid=stable_id(run.run_id, "model", n), span_id=None, timestamp=at(run, ev.t - lat),
            working_start=max(0.0, ev.t - lat - t0), model=run.model, input=[], input_refs=[(0, turn.context)],
            tools=infos,
            tool_choice=_tool_choice(choice), config=cfg, output=output,
            retries=(ev.attempts - 1) if ev.attempts else None, call=call, completed=at(run, ev.t),
            working_time=ev.latency_s, metadata={"fte_shell": {k: v for k, v in extra.items() if v is not None}})))
        out += [(te.t - (te.duration_s or 0.0), 1, _tool_event(run, te, 1000 * n + k))
                for k, te in enumerate(turn.tools)]
    rest = [*conv.others, *(r for t in conv.turns for r in t.retries),  # retries: before their model event
            *(m.event for m in conv.messages if isinstance(m.event, NudgeEvent | FinalAnswerRequestEvent))]
    for k, ev in enumerate(sorted(rest, key=lambda e: e.t)):
        out.append((ev.t, 2, InfoEvent(uuid=stable_id(run.run_id, "info", k), span_id=None, timestamp=at(run, ev.t),
                                       working_start=max(0.0, ev.t - t0), source=f"fte-shell:{ev.type}",
                                       data=plain(ev))))
    return [e for _t, _k, e in sorted(out, key=lambda x: (x[0], x[1]))]


def sample(run: Run) -> Any:
    """The run as one ``EvalSample``: id = question id, epoch = repetition + 1."""
    from inspect_ai.log import EvalError, EvalSample, EvalSampleLimit
    from inspect_ai.model import ModelOutput

    conv = conversation(run)
    msgs = messages(run, conv)
    res = run.result or {}
    end, st = run.end, run.start
    last = next((msgs[t.message] for t in reversed(conv.turns)), None)
    output = ModelOutput(model=run.model, choices=[], completion=str(res.get("answer") or ""))
    if last is not None:
        from inspect_ai.model import ChatCompletionChoice

        fin = FINISH.get(conv.turns[-1].call.finish_reason or "", "unknown")
        output = ModelOutput(model=run.model, choices=[ChatCompletionChoice(message=last, stop_reason=fin)],
                             completion=str(res.get("answer") or ""), usage=usage_of(res.get("usage")))
    error, scores = None, None
    if run.infra_failure:
        why = [e.message for e in run.events if isinstance(e, ErrorEvent)] or [str(res.get("error") or "")]
        msg = f"{run.stop_reason or 'no result'}: {why[-1]}".rstrip(": ")
        error = EvalError(message=msg, traceback=msg, traceback_ansi=msg)
    else:
        scores = scores_of(run) or None
    calls = [t.call.cost_usd for t in conv.turns]
    agent_cost = sum(c for c in calls if c is not None) if calls and all(c is not None for c in calls) else None
    usage = {run.model: usage_of(res.get("usage"), cost=agent_cost)}
    roles = {"agent": usage_of(res.get("usage"), cost=agent_cost)}
    summary = res.get("summary_usage") or {}
    if any(summary.values()):
        cfg = (st.config if st else {}).get("agent") or {}
        name = str(cfg.get("summary_model") or run.model)
        roles["visit-summary"] = usage_of(summary)
        usage[name] = usage[name] + usage_of(summary) if name in usage else usage_of(summary)
    limit = None
    if run.stop_reason in LIMITS:
        agent = (st.config if st else {}).get("agent") or {}
        value = agent.get("max_turns") if run.stop_reason == "max_turns" else agent.get("time_budget_s")
        limit = EvalSampleLimit(type=LIMITS[run.stop_reason], limit=float(value or 0), reason=run.stop_reason)
    start_t = clock(run)
    wall = res.get("wall_s")
    started = start_t[0].isoformat()
    completed = at(run, end.t).isoformat() if end is not None else started
    kept = {"run_id": run.run_id, "run_dir": str(run.run_dir), "profile": run.profile, "context": run.context,
            "retriever": run.retriever, "rep": run.rep,
            "stop_reason": run.stop_reason, "answer": res.get("answer"), "turns": res.get("turns"),
            "tool_calls": res.get("tool_calls"), "usage": res.get("usage"), "summary_usage": res.get("summary_usage"),
            "result": {k: v for k, v in res.items() if k not in ("question", "answer")},
            "judgement": run.judgement, "hand_check": run.audit.model_dump() if run.audit else None,
            "question_meta": run.question_row.get("meta"),
            "evaluation": run.question_row.get("evaluation"),
            "start": plain(st) if st else None, "note": NOTE}
    return EvalSample(
        id=run.qid, epoch=run.rep + 1, input=run.question, target=run.target, messages=msgs, output=output,
        scores=scores, metadata={"fte_shell": kept}, events=events(run, conv, msgs), model_usage=usage,
        role_usage=roles, started_at=started, completed_at=completed,
        total_time=round(end.t, 4) if end is not None else None,
        working_time=float(wall) if isinstance(wall, int | float) else None,
        uuid=stable_id(run.run_id, run.run_dir.relative_to(run.source) if run.run_dir != run.source else ""), error=error, limit=limit, turn_count=res.get("turns"), events_data={"messages": msgs, "calls": []})
