"""The ReAct loop. It does not know which profile it drives: a profile is tool schemas plus an executor.

Each turn: model call -> if the assistant called tools, execute them IN ORDER through
``profile.execute`` and append one ``tool`` message per call (malformed JSON arguments or an unknown tool
become an error observation the model can correct; the message kept in the conversation carries ``{}``
instead of arguments that are not a JSON object) -> else, if the reply finished normally and holds an
``<answer>`` (closed, or opened and never closed), stop; a reply cut at ``max_tokens`` gets a "your reply
was cut" notice; otherwise a short nudge.

Every stop is a :class:`Stop` raised where it is decided and caught in :meth:`Agent.run`, the one place
that ends a run (stop reasons: :mod:`fte_shell.stops`). An exception is recorded with the stop reason it
names (:func:`~fte_shell.stops.stop_of_exception`), else ``crashed`` (KeyboardInterrupt or SIGTERM:
``interrupted``), and re-raised after ``result.json`` is written. Token usage: the agent model's in
``usage``; tokens of models that tools call themselves (``meta.summary_usage``) in ``summary_usage``.
"""

from __future__ import annotations

import datetime as _dt
import json
import time
import uuid
from typing import Any

from ..config import RunConfig
from ..errors import ModelError, ToolError
from ..model import Completion, Model, ServerInfo
from ..model.errors import ContextOverflow
from ..model.prices import price_for, usage_cost
from ..model.window import kind_named
from ..profiles import Profile, ToolResult, parse_arguments
from ..prompts import system_prompt
from ..record.rundir import RunWriter
from ..stops import StopReason, stop_of_exception
from .replies import (
    CUT_NOTICE,
    FINAL_ANSWER_REQUEST,
    NUDGE,
    estimate_tokens,
    find_answer,
    fit_max_tokens,
    kept_message,
    model_call_fields,
    reply_answer,
    reply_signature,
    salvaged_calls,
    text_tool_calls,
    tool_choice,
)
from .result import TOOL_USAGE_META, LoopState, RunResult, add_usage, write_end, write_start


class Stop(Exception):
    """The loop stops: ``reason``, the ``answer`` (if any), and the ``error`` event's message (if any)."""

    def __init__(self, reason: StopReason, answer: str | None = None, error: str | None = None):
        super().__init__(reason)
        self.reason, self.answer, self.error = reason, answer, error


class Agent:
    """Drives one question: ``Agent(config, model, profile, recorder).run(question) -> RunResult``."""

    def __init__(self, config: RunConfig, model: Model, profile: Profile, recorder: RunWriter, *,
                 run_id: str | None = None, meta: dict[str, Any] | None = None):
        self.config, self.model, self.profile, self.recorder = config, model, profile, recorder
        self.run_id = run_id or uuid.uuid4().hex[:12]
        self.meta = dict(meta or {})
        self.messages: list[dict[str, Any]] = []
        self.state = LoopState()
        self.info: ServerInfo | None = None
        self.deadline: float | None = None
        self.price = price_for(config.model)
        """USD per million tokens of the agent's model (None: unknown, the run records tokens only)."""
        self.state.cost_usd = 0.0 if self.price is not None else None
        reader = config.agent.summary_model
        self.reader_price = self.price if reader is None else price_for(
            reader if reader.model else reader.model_copy(update={"model": config.model.model}))
        """visit-summary's reader model's price (its tokens are in the run's cost when known)."""

    def system_prompt(self) -> str:
        """Fixed body (or ``agent.system_prompt_file``) + the profile's addendum + ``Current date: …``."""
        agent = self.config.agent
        return system_prompt(self.profile.system_addendum(), agent.current_date, agent.system_prompt_file)

    def run(self, question: str) -> RunResult:
        """Run the loop to a stop reason, record everything, write ``result.json`` and return the result.
        An exception (KeyboardInterrupt included) is recorded and re-raised after ``result.json`` is written."""
        started_at = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
        self.info = self.model.server_info()  # probed once per client, outside the time budget
        t0 = time.monotonic()
        budget = self.config.agent.time_budget_s
        self.deadline = t0 + budget if budget is not None else None
        rec, s, tools, system = self.recorder, self.state, self.profile.tools(), self.system_prompt()
        self.messages = [{"role": "system", "content": system}, {"role": "user", "content": question}]
        write_start(rec, question, self.profile.name, self.config, system, tools, self.run_id, self.info)
        pending: BaseException | None = None
        try:
            while True:
                self.turn(tools)
        except Stop as e:
            stop = e
            if e.error is not None:
                rec.event("error", turn=s.turns, message=e.error)
        except KeyboardInterrupt as e:
            stop, pending = Stop("interrupted", error="interrupted (KeyboardInterrupt or SIGTERM)"), e
            rec.event("error", turn=s.turns, message=stop.error)
        except Exception as e:  # noqa: BLE001 - recorded, then re-raised below
            stop, pending = Stop(stop_of_exception(e, default="crashed")), e  # type: ignore[arg-type]
            rec.event("error", turn=s.turns, message=f"{e.__class__.__name__}: {e}")
        result = s.result(question, stop.reason, stop.answer, profile=self.profile.name, model=self.config.model.model,
                          wall_s=round(time.monotonic() - t0, 3), run_id=self.run_id, run_dir=rec.run_dir)
        write_end(rec, result, started_at=started_at, meta=self.meta, config=self.config)
        if pending is not None:
            raise pending
        return result

    def over_budget(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    def turn(self, tools: list[dict[str, Any]]) -> None:
        """One model call and what follows from its reply; raises :class:`Stop` when the run is over."""
        s, cfg, rec = self.state, self.config.agent, self.recorder
        if s.turns >= cfg.max_turns:
            raise Stop("max_turns")
        if self.over_budget():
            raise Stop("time_budget")
        if cfg.max_total_tokens is not None and s.tokens_spent() >= cfg.max_total_tokens:
            raise Stop("token_budget", error=f"{s.tokens_spent():,} tokens spent of agent.max_total_tokens "
                                             f"{cfg.max_total_tokens:,}")
        s.turns += 1
        turn, names = s.turns, {n for t in tools if (n := t.get("function", {}).get("name"))}
        try:
            c = self.call(tools)
        except ContextOverflow as e:
            self.model_failed(e)
            if cfg.on_context_overflow == "final_answer":
                self.final_answer()
            raise Stop("context_overflow") from None
        except ModelError as e:
            reason = self.model_failed(e)
            raise Stop("time_budget" if self.over_budget() else reason) from None  # type: ignore[arg-type]
        msg, changes = self.keep(c)
        escapes = kind_named(self.info.server if self.info is not None else None).escapes
        found = text_tool_calls(c, names, escapes)
        if found:
            run = self.config.model.parse_text_tool_calls
            rec.event("text_tool_call", turn=turn, source=found[0], calls=found[1], executed=run)
            if run:
                msg["tool_calls"] = salvaged_calls(turn, found[1])
        self.record_reply(c, msg, changes)
        s.reply(reply_signature(c), c.finish_reason == "length")
        if s.repeats >= cfg.max_repeated_replies:
            raise Stop("repeated_reply", error=f"{s.repeats} identical replies in a row")
        calls = msg.get("tool_calls") or []
        if s.cuts >= 2 and not calls:
            raise Stop("reply_cut", error="two replies in a row were cut at max_tokens")
        if s.cuts and not calls:
            return self.nudge("reply_cut", CUT_NOTICE)
        if not calls:
            answer, s.answer_unclosed, s.answer_unescaped = reply_answer(c, escapes)
            if answer is not None:
                raise Stop("answer", answer)
            s.nudges += 1
            if s.nudges > cfg.max_nudges:
                raise Stop("too_many_nudges", error=f"{s.nudges} replies in a row with no tool call and no answer")
            return self.nudge("no_tool_call", NUDGE)
        s.nudges = 0
        raw = {tc.get("id"): tc for tc in c.message.get("tool_calls") or []}
        all_failed = True
        for call in calls:  # the raw arguments, not the kept "{}"
            all_failed &= self.execute(raw.get(call.get("id"), call), names, salvaged=str(call.get("id") or "").startswith("text_"))
        if s.cuts >= 2:
            raise Stop("reply_cut", error="two replies in a row were cut at max_tokens")
        s.failed_turns = s.failed_turns + 1 if all_failed else 0
        if s.failed_turns >= cfg.max_consecutive_errors:
            raise Stop("errors", error=f"{s.failed_turns} consecutive turns whose tool calls all failed")

    def final_answer(self) -> None:
        """``agent.on_context_overflow = final_answer``: one last call without tools asking for the answer;
        raises ``Stop("answer")`` when it gives one (else the caller stops with ``context_overflow``)."""
        s = self.state
        if s.turns >= self.config.agent.max_turns:
            return
        s.turns += 1
        self.messages.append({"role": "user", "content": FINAL_ANSWER_REQUEST})
        self.recorder.event("final_answer_request", turn=s.turns, message=FINAL_ANSWER_REQUEST)
        try:
            c = self.call([], final=True)
        except ModelError as e:
            self.model_failed(e)
            return
        msg, changes = self.keep(c)
        self.record_reply(c, msg, changes)
        answer, unclosed = find_answer(c.text) if c.finish_reason != "length" else (None, False)
        if answer is not None:
            s.answer_unclosed = unclosed
            raise Stop("answer", answer)

    def call(self, tools: list[dict[str, Any]], *, final: bool = False) -> Completion:
        """One model call with ``max_tokens`` fitted to what is left of the context window."""
        s, turn, rec = self.state, self.state.turns, self.recorder
        est = (estimate_tokens(self.messages, tools or None) if s.last_prompt is None
               else s.last_prompt + estimate_tokens(self.messages[s.last_len:]))
        max_tokens = fit_max_tokens(self.info, self.config.model, est, final=final)
        choice = tool_choice(self.config.agent.first_tool_choice, turn, tools, self.profile.name)
        c = self.model.complete(self.messages, tools or None, deadline=self.deadline, tool_choice=choice,
                                max_tokens=max_tokens, on_retry=lambda r: rec.event("retry", turn=turn, **r))
        s.last_prompt, s.last_len = (c.usage.get("prompt_tokens") or None), len(self.messages)
        return c

    def keep(self, c: Completion) -> tuple[dict[str, Any], list[str]]:
        """The message kept in the conversation, and how it differs from the server's."""
        kept = kept_message(c, self.config.model.reasoning_passback, self.state.reasoning_fields)
        self.state.reasoning_fields = c.reasoning_fields or self.state.reasoning_fields
        return kept

    def record_reply(self, c: Completion, msg: dict[str, Any], changes: list[str]) -> None:
        s = self.state
        add_usage(s.usage, c.usage)
        fields = model_call_fields(s.turns, c, changes)
        if self.price is not None and s.cost_usd is not None:
            cost = usage_cost(c.usage_details or c.usage, self.price)
            s.cost_usd += cost
            fields["cost_usd"] = cost
        self.recorder.event("model_call", **fields)
        self.messages.append(msg)

    def nudge(self, kind: str, text: str) -> None:
        self.messages.append({"role": "user", "content": text})
        self.recorder.event("nudge", turn=self.state.turns, kind=kind, message=text)

    def model_failed(self, e: ModelError) -> str:
        """Record a failed model call; returns its stop reason."""
        fields: dict[str, Any] = {"turn": self.state.turns, "message": str(e), "error_class": e.__class__.__name__}
        for k in ("status", "body"):
            if v := getattr(e, k, None):
                fields[k] = v
        self.recorder.event("error", **fields)
        return str(getattr(e, "stop_reason", "model_error"))

    def execute(self, call: dict[str, Any], names: set[str], *, salvaged: bool) -> bool:
        """Run one tool call; True when it failed."""
        s = self.state
        name = str((call.get("function") or {}).get("name") or "")
        s.tool_counts[name] = s.tool_counts.get(name, 0) + 1
        call_id, res = execute_call(self.profile, names, call, s.turns, self.recorder, salvaged=salvaged)
        if (spent := res.meta.get(TOOL_USAGE_META)) is not None:
            add_usage(s.summary_usage, spent)
            if self.reader_price is not None and s.cost_usd is not None and isinstance(spent, dict):
                s.cost_usd += usage_cost(spent, self.reader_price)
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": res.output})
        return bool(res.error)


def execute_call(
    profile: Profile, names: set[str], call: dict[str, Any], turn: int, rec: RunWriter, *, salvaged: bool = False
) -> tuple[str, ToolResult]:
    """Run one tool call (``{id, function: {name, arguments}}``, arguments raw) and record it; returns
    ``(call id, result)``. Unknown tools and bad arguments are error results the model can correct."""
    fn = call.get("function") or {}
    name = str(fn.get("name") or "")
    raw = fn.get("arguments")
    raw_s = raw if isinstance(raw, str) else json.dumps(raw)
    call_id = call.get("id") or f"call_{turn}"
    args: dict[str, Any] | None = None
    t = time.monotonic()

    def record(res: ToolResult) -> None:
        rec.event("tool_call", turn=turn, id=call_id, name=name, arguments=args, raw_arguments=raw_s,
                  observation=res.output, error=bool(res.error), duration_s=round(time.monotonic() - t, 4),
                  meta=res.meta, **({"salvaged": True} if salvaged else {}))

    if name not in names:
        avail = ", ".join(sorted(names)) or "none"
        res = ToolResult(output=f"Error: unknown tool '{name}'. Available tools: {avail}.", error=True)
    else:
        args, problem = parse_arguments(raw)
        if args is None:
            shown = raw_s if len(raw_s) <= 200 else raw_s[:200] + "…"
            res = ToolResult(output=f"Error: the arguments of '{name}' {problem}; they were: {shown}\n"
                             "Call it again with a JSON object as its arguments.", error=True)
        else:
            try:
                res = _run_tool(profile, name, args)
            except BaseException as e:
                what = ("call was interrupted" if isinstance(e, KeyboardInterrupt)
                        else f"crashed: {e.__class__.__name__}: {e}")
                record(ToolResult(output=f"(the tool {what})", error=True))
                raise
    record(res)
    return call_id, res


def _run_tool(profile: Profile, name: str, args: dict[str, Any]) -> ToolResult:
    try:
        return profile.execute(name, args)
    except ToolError as e:
        return ToolResult(output=f"Error: {e}", error=True)
    except (TypeError, KeyError, ValueError) as e:  # the model's arguments did not fit the tool
        return ToolResult(output=f"Error: bad arguments for '{name}': {e.__class__.__name__}: {e}", error=True)
