"""The ReAct loop. It does not know which profile it drives: a profile is tool schemas plus an executor.

Each turn: model call -> if the assistant called tools, execute them IN ORDER through
``profile.execute`` and append one ``tool`` message per call (malformed JSON arguments or an unknown tool
become an error observation the model can correct; the message kept in the conversation carries ``{}``
instead of arguments that are not a JSON object) -> else, if the reply finished normally and holds an
``<answer>`` (closed, or opened and never closed), stop; a reply cut at ``max_tokens`` gets a "your reply
was cut" notice; otherwise a short nudge. Stop reasons (:mod:`fte_shell.stops`): ``answer``, ``max_turns``,
``time_budget``, ``errors`` (``agent.max_consecutive_errors`` turns in a row whose tool calls all failed),
``too_many_nudges``, ``repeated_reply``, ``reply_cut`` (two cut replies in a row), ``context_overflow``, and
the model endpoint's failures ``endpoint_unavailable``, ``auth``, ``bad_request`` (``model_error`` for an
untyped one), ``interrupted`` (KeyboardInterrupt, or SIGTERM turned into one by the runner), and
``crashed`` (an unexpected exception from a profile: recorded, then re-raised; one that names a stop reason,
e.g. a snapshot miss with ``on_miss = fail-run``, ends the run with that name instead). Token usage: the agent
model's in ``usage``; tokens of models that tools call themselves (``meta.summary_usage``) in
``summary_usage``, apart.
"""

from __future__ import annotations

import datetime as _dt
import json
import time
import uuid
from typing import TYPE_CHECKING, Any

from .agent_replies import (
    CUT_NOTICE,
    FINAL_ANSWER_REQUEST,
    NUDGE,
    estimate_tokens,
    extract_answer,
    find_answer,
    kept_message,
    parse_arguments,
    reply_signature,
)
from .agent_result import TOOL_USAGE_META, USAGE_KEYS, RunResult, StopReason, _add_usage
from .config import RunConfig
from .digest import config_digest
from .errors import ModelError, ToolError
from .model.errors import BadRequest, ContextOverflow
from .model.textcalls import find_text_tool_calls
from .profiles import Profile, ToolResult
from .prompts import system_prompt
from .stops import stop_of_exception

if TYPE_CHECKING:  # pragma: no cover
    from .model import Completion, Model, ServerInfo
    from .record.rundir import RunWriter

__all__ = ["NUDGE", "TOOL_USAGE_META", "Agent", "RunResult", "StopReason", "extract_answer", "find_answer"]


class Agent:
    """Drives one question: ``Agent(config, model, profile, recorder).run(question) -> RunResult``."""

    def __init__(
        self,
        config: RunConfig,
        model: Model,
        profile: Profile,
        recorder: RunWriter,
        *,
        run_id: str | None = None,
        meta: dict[str, Any] | None = None,
    ):
        self.config = config
        self.model = model
        self.profile = profile
        self.recorder = recorder
        self.run_id = run_id or uuid.uuid4().hex[:12]
        self.meta = dict(meta or {})
        self.messages: list[dict[str, Any]] = []
        self.turns = 0
        self.tool_counts: dict[str, int] = {}
        self.usage = dict.fromkeys(USAGE_KEYS, 0)
        self.summary_usage = dict.fromkeys(USAGE_KEYS, 0)
        self.answer_unclosed = False
        self._info: ServerInfo | None = None
        self._seen_fields: list[str] = []
        self._last_prompt: int | None = None
        """``usage.prompt_tokens`` of the last successful request, and how many messages it had."""
        self._last_len = 0

    # --- the loop ---------------------------------------------------------------------------------------
    def system_prompt(self) -> str:
        """Fixed body (or ``agent.system_prompt_file``) + the profile's addendum + ``Current date: …``."""
        agent = self.config.agent
        return system_prompt(self.profile.system_addendum(), agent.current_date, agent.system_prompt_file)

    def run(self, question: str) -> RunResult:
        """Run the loop to a stop reason, record everything, write ``result.json`` and return the result.

        KeyboardInterrupt is recorded (``interrupted``) and re-raised after ``result.json`` is written."""
        started_at = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
        self._info = self.model.server_info()  # probed once per client, outside the time budget
        t0 = time.monotonic()
        rec = self.recorder
        tools = self.profile.tools()
        system = self.system_prompt()
        self.messages = [{"role": "system", "content": system}, {"role": "user", "content": question}]
        rec.event(
            "start",
            question=question,
            profile=self.profile.name,
            model=self.config.model.model,
            config=self.config.model_dump(mode="json"),
            system_prompt=system,
            tools=tools,
            run_id=self.run_id,
            reasoning_passback=self.config.model.reasoning_passback,
            server=self._info.model_dump(mode="json") if self._info is not None else None,
        )
        for w in self._info.warnings if self._info is not None else []:
            rec.event("warning", turn=0, message=w)
        answer: str | None = None
        stop: StopReason
        pending: BaseException | None = None
        try:
            stop, answer = self._loop(tools, t0)
        except KeyboardInterrupt as e:
            stop, pending = "interrupted", e
            rec.event("error", turn=self.turns, message="interrupted (KeyboardInterrupt or SIGTERM)")
        except Exception as e:  # noqa: BLE001 - recorded, then re-raised below
            stop, pending = stop_of_exception(e, default="crashed"), e  # type: ignore[assignment]
            rec.event("error", turn=self.turns, message=f"{e.__class__.__name__}: {e}")
        result = RunResult(
            question=question,
            answer=answer,
            answer_unclosed=self.answer_unclosed and answer is not None,
            profile=self.profile.name,
            model=self.config.model.model,
            turns=self.turns,
            stop_reason=stop,
            tool_calls=dict(self.tool_counts),
            usage=dict(self.usage),
            summary_usage=dict(self.summary_usage),
            wall_s=round(time.monotonic() - t0, 3),
            run_id=self.run_id,
            run_dir=rec.run_dir,
        )
        end: dict[str, Any] = {"stop_reason": stop, "answer": answer, "turns": self.turns, "wall_s": result.wall_s}
        if result.answer_unclosed:
            end["answer_unclosed"] = True
        rec.event("end", **end)
        hidden = {"run_dir"} if result.answer_unclosed else {"run_dir", "answer_unclosed"}  # a key only when true
        rec.write_result(
            {**result.model_dump(mode="json", exclude=hidden), "started_at": started_at, "meta": self.meta,
             "config_digest": config_digest(self.config)}  # fte_shell/digest.py: which config this run used
        )
        if pending is not None:
            raise pending
        return result

    def _tool_choice(self, turn: int, tools: list[dict[str, Any]]) -> str | dict[str, Any] | None:
        """``agent.first_tool_choice`` on turn 1 (a named choice, or ``required``), else None (auto)."""
        want = self.config.agent.first_tool_choice
        if turn != 1 or not want or not tools:
            return None
        if want in ("required", "auto", "none"):
            return want
        names = [t.get("function", {}).get("name") for t in tools]
        name = names[0] if want == "first" else want
        if name not in names:
            raise BadRequest(  # the request cannot work: stop at once, saying why
                f"agent.first_tool_choice names the tool '{name}', which the profile '{self.profile.name}' "
                f"does not have (its tools: {', '.join(str(n) for n in names)}); use 'first' or 'required'"
            )
        return {"type": "function", "function": {"name": name}}

    def _fit_max_tokens(self, tools: list[dict[str, Any]] | None, *, final: bool = False) -> int | None:
        """``min(model.max_tokens, window − prompt estimate − margin)``; None when the window is unknown.
        Raises :class:`ContextOverflow` when less than ``model.min_reply_tokens`` is left."""
        info, mc = self._info, self.config.model
        if info is None or info.context_window is None:
            return None
        if self._last_prompt is None:
            est = estimate_tokens(self.messages, tools)
        else:
            est = self._last_prompt + estimate_tokens(self.messages[self._last_len:])
        room = info.context_window - est - mc.context_margin
        if room < mc.min_reply_tokens and not final:
            raise ContextOverflow(
                f"the conversation (about {est:,} tokens) leaves {room:,} tokens of the {info.context_window:,}-token "
                f"context window ({info.source}) for the reply, below model.min_reply_tokens = {mc.min_reply_tokens}"
            )
        return max(1, min(mc.max_tokens, room))

    def _call(
        self, turn: int, tools: list[dict[str, Any]], deadline: float | None, *, final: bool = False
    ) -> Completion:
        rec = self.recorder
        max_tokens = self._fit_max_tokens(tools or None, final=final)
        c = self.model.complete(
            self.messages, tools or None, deadline=deadline, tool_choice=self._tool_choice(turn, tools),
            max_tokens=max_tokens, on_retry=lambda r: rec.event("retry", turn=turn, **r),
        )
        self._last_prompt, self._last_len = (c.usage.get("prompt_tokens") or None), len(self.messages)
        return c

    def _model_failed(self, turn: int, e: ModelError) -> str:
        fields: dict[str, Any] = {"turn": turn, "message": str(e), "error_class": e.__class__.__name__}
        for k in ("status", "body"):
            v = getattr(e, k, None)
            if v:
                fields[k] = v
        self.recorder.event("error", **fields)
        return str(getattr(e, "stop_reason", "model_error"))

    def _loop(self, tools: list[dict[str, Any]], t0: float) -> tuple[StopReason, str | None]:
        cfg = self.config.agent
        names = {t.get("function", {}).get("name") for t in tools}
        failed_turns = nudges = cuts = repeats = 0
        last_sig: str | None = None
        deadline = t0 + cfg.time_budget_s if cfg.time_budget_s is not None else None
        rec = self.recorder

        def over_budget() -> bool:
            return deadline is not None and time.monotonic() >= deadline

        while True:
            if self.turns >= cfg.max_turns:
                return "max_turns", None
            if over_budget():
                return "time_budget", None
            self.turns += 1
            turn = self.turns
            try:
                c = self._call(turn, tools, deadline)
            except ContextOverflow as e:
                self._model_failed(turn, e)
                if cfg.on_context_overflow == "final_answer":
                    return self._final_answer(deadline)
                return "context_overflow", None
            except ModelError as e:
                reason = self._model_failed(turn, e)
                return ("time_budget" if over_budget() else reason), None  # type: ignore[return-value]
            msg, changes = kept_message(c, self.config.model.reasoning_passback, self._seen_fields)
            self._seen_fields = c.reasoning_fields or self._seen_fields
            text_calls = self._text_calls(turn, c, names)
            if text_calls:
                msg["tool_calls"] = [
                    {"id": f"text_{turn}_{i}", "type": "function",
                     "function": {"name": tc["name"], "arguments": json.dumps(tc["arguments"], ensure_ascii=False)}}
                    for i, tc in enumerate(text_calls)
                ]
            self._record_completion(turn, c, changes)
            self.messages.append(msg)
            sig = reply_signature(c)
            repeats = repeats + 1 if sig == last_sig else 1
            last_sig = sig
            if repeats >= cfg.max_repeated_replies:
                rec.event("error", turn=turn, message=f"{repeats} identical replies in a row")
                return "repeated_reply", None
            cut = c.finish_reason == "length"
            cuts = cuts + 1 if cut else 0
            calls = msg.get("tool_calls") or []
            if not calls:
                if cut:
                    if cuts >= 2:
                        rec.event("error", turn=turn, message="two replies in a row were cut at max_tokens")
                        return "reply_cut", None
                    self.messages.append({"role": "user", "content": CUT_NOTICE})
                    rec.event("nudge", turn=turn, kind="reply_cut", message=CUT_NOTICE)
                    continue
                answer, unclosed = find_answer(msg.get("content"))
                if answer is not None:
                    self.answer_unclosed = unclosed
                    return "answer", answer
                nudges += 1
                if nudges > cfg.max_nudges:
                    rec.event("error", turn=turn, message=f"{nudges} replies in a row with no tool call and no answer")
                    return "too_many_nudges", None
                self.messages.append({"role": "user", "content": NUDGE})
                rec.event("nudge", turn=turn, kind="no_tool_call", message=NUDGE)
                continue
            nudges = 0
            raw = {tc.get("id"): tc for tc in c.message.get("tool_calls") or []}
            all_failed = True
            for call in calls:
                source = raw.get(call.get("id"), call)  # the raw arguments, not the kept "{}"
                if not self._execute(turn, source, names, salvaged=call.get("id", "").startswith("text_")).error:
                    all_failed = False
            if cut and cuts >= 2:
                rec.event("error", turn=turn, message="two replies in a row were cut at max_tokens")
                return "reply_cut", None
            failed_turns = failed_turns + 1 if all_failed else 0
            if failed_turns >= cfg.max_consecutive_errors:
                rec.event("error", turn=turn, message=f"{failed_turns} consecutive turns whose tool calls all failed")
                return "errors", None

    def _final_answer(self, deadline: float | None) -> tuple[StopReason, str | None]:
        """``agent.on_context_overflow = final_answer``: one last call without tools asking for the answer."""
        if self.turns >= self.config.agent.max_turns:
            return "context_overflow", None
        self.turns += 1
        turn = self.turns
        self.messages.append({"role": "user", "content": FINAL_ANSWER_REQUEST})
        self.recorder.event("final_answer_request", turn=turn, message=FINAL_ANSWER_REQUEST)
        try:
            c = self._call(turn, [], deadline, final=True)
        except ModelError as e:
            self._model_failed(turn, e)
            return "context_overflow", None
        msg, changes = kept_message(c, self.config.model.reasoning_passback, self._seen_fields)
        self._record_completion(turn, c, changes)
        self.messages.append(msg)
        answer, unclosed = find_answer(msg.get("content")) if c.finish_reason != "length" else (None, False)
        if answer is None:
            return "context_overflow", None
        self.answer_unclosed = unclosed
        return "answer", answer

    def _text_calls(self, turn: int, c: Completion, names: set[str | None]) -> list[dict[str, Any]]:
        """Tool calls left as text (only looked for when there is no native one): recorded as a
        ``text_tool_call`` event; returned for execution when ``model.parse_text_tool_calls`` is on."""
        if c.message.get("tool_calls"):
            return []
        known = {n for n in names if n}
        for source, text in (("content", c.message.get("content")), ("reasoning", c.reasoning)):
            found = find_text_tool_calls(text if isinstance(text, str) else None, known)
            if found:
                run = self.config.model.parse_text_tool_calls
                self.recorder.event("text_tool_call", turn=turn, source=source, calls=found, executed=run)
                return found if run else []
        return []

    def _record_completion(self, turn: int, c: Completion, changes: list[str]) -> None:
        _add_usage(self.usage, c.usage)
        fields: dict[str, Any] = {
            "turn": turn,
            "latency_s": round(c.latency_s, 4),
            "usage": c.usage,
            "usage_details": c.usage_details,
            "message": c.message,
            "finish_reason": c.finish_reason,
            "attempts": c.attempts,
            "request": c.params,
            "response": c.response,
        }
        if c.reasoning is not None:
            fields["reasoning"] = c.reasoning
            fields["reasoning_fields"] = c.reasoning_fields
        if changes:
            fields["kept_changes"] = changes
        self.recorder.event("model_call", **fields)

    def _execute(self, turn: int, call: dict[str, Any], names: set[str | None], *, salvaged: bool = False) -> ToolResult:
        """Run one tool call and record it. A call the profile crashed on (or an interrupt during it) is
        recorded too, as an error, before the exception goes on: the trajectory and the tool-call counts
        of ``result.json`` always agree."""
        fn = call.get("function") or {}
        name = str(fn.get("name") or "")
        raw = fn.get("arguments")
        raw_s = raw if isinstance(raw, str) else json.dumps(raw)
        call_id = call.get("id") or f"call_{turn}"
        self.tool_counts[name] = self.tool_counts.get(name, 0) + 1
        args: dict[str, Any] | None = None
        t = time.monotonic()
        if name not in names:
            avail = ", ".join(sorted(n for n in names if n)) or "none"
            res = ToolResult(output=f"Error: unknown tool '{name}'. Available tools: {avail}.", error=True)
        else:
            args, problem = parse_arguments(raw)
            if args is None:
                shown = raw_s if len(raw_s) <= 200 else raw_s[:200] + "…"
                res = ToolResult(
                    output=f"Error: the arguments of '{name}' {problem}; they were: {shown}\n"
                    "Call it again with a JSON object as its arguments.",
                    error=True,
                )
            else:
                try:
                    res = self._call_profile(name, args)
                except BaseException as e:
                    what = "call was interrupted" if isinstance(e, KeyboardInterrupt) else f"crashed: {e.__class__.__name__}: {e}"
                    self._record_call(turn, call_id, name, args, raw_s, t, ToolResult(output=f"(the tool {what})", error=True), salvaged)
                    raise
        _add_usage(self.summary_usage, res.meta.get(TOOL_USAGE_META))
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": res.output})
        self._record_call(turn, call_id, name, args, raw_s, t, res, salvaged)
        return res

    def _record_call(
        self, turn: int, call_id: str, name: str, args: dict[str, Any] | None, raw_s: str, t: float,
        res: ToolResult, salvaged: bool = False,
    ) -> None:
        extra = {"salvaged": True} if salvaged else {}
        self.recorder.event(
            "tool_call",
            turn=turn,
            id=call_id,
            name=name,
            arguments=args,
            raw_arguments=raw_s,
            observation=res.output,
            error=bool(res.error),
            duration_s=round(time.monotonic() - t, 4),
            meta=res.meta,
            **extra,
        )

    def _call_profile(self, name: str, args: dict[str, Any]) -> ToolResult:
        try:
            return self.profile.execute(name, args)
        except ToolError as e:
            return ToolResult(output=f"Error: {e}", error=True)
        except (TypeError, KeyError, ValueError) as e:  # the model's arguments did not fit the tool
            return ToolResult(output=f"Error: bad arguments for '{name}': {e.__class__.__name__}: {e}", error=True)
