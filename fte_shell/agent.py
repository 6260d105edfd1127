"""The ReAct loop. It does not know which profile it drives: a profile is tool schemas plus an executor.

Each turn: model call -> if the assistant called tools, execute them IN ORDER through
``profile.execute`` and append one ``tool`` message per call (malformed JSON arguments or an unknown tool
become an error observation the model can correct) -> else, if the text holds ``<answer>…</answer>``,
stop; otherwise append a short nudge. Stop reasons: ``answer``, ``max_turns``, ``time_budget``, ``errors``
(``agent.max_consecutive_errors`` turns in a row whose tool calls all failed), ``model_error`` (after the
client's retries), ``interrupted`` (KeyboardInterrupt, or SIGTERM turned into one by the runner), and
``crashed`` (an unexpected exception from a profile: recorded, then re-raised). Token usage: the agent
model's in ``usage``; tokens of models that tools call themselves (``meta.summary_usage``) in
``summary_usage``, apart.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .config import RunConfig
from .digest import config_digest
from .errors import ModelError, ToolError
from .profiles import Profile, ToolResult
from .prompts import system_prompt

if TYPE_CHECKING:  # pragma: no cover
    from .model import Completion, ModelClient
    from .recorder import Recorder

StopReason = Literal["answer", "max_turns", "time_budget", "errors", "model_error", "interrupted", "crashed"]

ANSWER_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)

NUDGE = (
    "Your reply had no tool call and no final answer. Either call one of your tools to keep researching, "
    "or give your final answer inside <answer></answer>."
)

USAGE_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")

TOOL_USAGE_META = "summary_usage"
"""Key of a tool result's ``meta`` under which a tool that calls a model of its own (visit-summary's
reader) reports that call's token usage; the loop sums it into :attr:`RunResult.summary_usage`."""


def _add_usage(total: dict[str, int], usage: Any) -> None:
    """Add the token counts of ``usage`` (a usage dict, or anything else = nothing) to ``total``."""
    if isinstance(usage, dict):
        for k in USAGE_KEYS:
            v = usage.get(k)
            if isinstance(v, int):
                total[k] += v


def extract_answer(text: str | None) -> str | None:
    """The text of the last ``<answer>…</answer>`` in ``text`` (stripped), or None."""
    if not text:
        return None
    found = ANSWER_RE.findall(text)
    return found[-1].strip() if found else None


class RunResult(BaseModel):
    """What one question's run produced. ``result.json`` is this model without ``run_dir`` (fields in
    this order), plus ``started_at`` and ``meta``."""

    model_config = ConfigDict(extra="forbid")

    question: str
    """The question as asked."""

    answer: str | None
    """The final answer (text inside the last ``<answer>`` tags), or None when the run ended without one."""

    profile: str = ""
    """Profile name."""

    model: str | None = None
    """Model name."""

    turns: int
    """Model calls made (successful or not)."""

    stop_reason: StopReason
    """Why the loop stopped."""

    tool_calls: dict[str, int] = Field(default_factory=dict)
    """Tool calls by tool name (malformed and unknown calls included, under the name the model gave)."""

    usage: dict[str, int] = Field(default_factory=dict)
    """The agent model's summed token usage: ``prompt_tokens``, ``completion_tokens``, ``total_tokens``
    (the sum of the ``model_call`` events)."""

    summary_usage: dict[str, int] = Field(default_factory=dict)
    """Tokens spent by models that tools call on their own (visit-summary's reader model), summed from the
    tool calls' ``meta.summary_usage``; same keys as :attr:`usage`, NOT included in it (so ``usage``
    stays comparable across profiles). All zero for the other profiles."""

    wall_s: float
    """Wall-clock seconds of the loop."""

    run_id: str
    """Identifier of this run (also in ``result.json``)."""

    run_dir: Path | None = None
    """The run directory, when there is one (not in ``result.json``)."""


class Agent:
    """Drives one question: ``Agent(config, model, profile, recorder).run(question) -> RunResult``."""

    def __init__(
        self,
        config: RunConfig,
        model: ModelClient,
        profile: Profile,
        recorder: Recorder,
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

    # --- the loop ---------------------------------------------------------------------------------------
    def system_prompt(self) -> str:
        """Fixed body (or ``agent.system_prompt_file``) + the profile's addendum + ``Current date: …``."""
        agent = self.config.agent
        return system_prompt(self.profile.system_addendum(), agent.current_date, agent.system_prompt_file)

    def run(self, question: str) -> RunResult:
        """Run the loop to a stop reason, record everything, write ``result.json`` and return the result.

        KeyboardInterrupt is recorded (``interrupted``) and re-raised after ``result.json`` is written."""
        started_at = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
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
        )
        answer: str | None = None
        stop: StopReason
        pending: BaseException | None = None
        try:
            stop, answer = self._loop(tools, t0)
        except KeyboardInterrupt as e:
            stop, pending = "interrupted", e
            rec.event("error", turn=self.turns, message="interrupted (KeyboardInterrupt or SIGTERM)")
        except Exception as e:  # noqa: BLE001 - recorded, then re-raised below
            stop, pending = "crashed", e
            rec.event("error", turn=self.turns, message=f"{e.__class__.__name__}: {e}")
        result = RunResult(
            question=question,
            answer=answer,
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
        rec.event("end", stop_reason=stop, answer=answer, turns=self.turns, wall_s=result.wall_s)
        rec.write_result(
            {**result.model_dump(mode="json", exclude={"run_dir"}), "started_at": started_at, "meta": self.meta,
             "config_digest": config_digest(self.config)}  # fte_shell/digest.py: which config this run used
        )
        if pending is not None:
            raise pending
        return result

    def _loop(self, tools: list[dict[str, Any]], t0: float) -> tuple[StopReason, str | None]:
        cfg = self.config.agent
        names = {t.get("function", {}).get("name") for t in tools}
        failed_turns = 0
        deadline = t0 + cfg.time_budget_s if cfg.time_budget_s is not None else None

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
                c = self.model.complete(self.messages, tools or None, deadline=deadline)
            except ModelError as e:
                self.recorder.event("error", turn=turn, message=str(e))
                return ("time_budget" if over_budget() else "model_error"), None
            self._record_completion(turn, c)
            msg = c.message
            self.messages.append(msg)
            calls = msg.get("tool_calls") or []
            if not calls:
                answer = extract_answer(msg.get("content"))
                if answer is not None:
                    return "answer", answer
                self.messages.append({"role": "user", "content": NUDGE})
                self.recorder.event("nudge", turn=turn, message=NUDGE)
                continue
            all_failed = True
            for call in calls:
                if not self._execute(turn, call, names).error:
                    all_failed = False
            failed_turns = failed_turns + 1 if all_failed else 0
            if failed_turns >= cfg.max_consecutive_errors:
                self.recorder.event(
                    "error", turn=turn, message=f"{failed_turns} consecutive turns whose tool calls all failed"
                )
                return "errors", None

    def _record_completion(self, turn: int, c: Completion) -> None:
        _add_usage(self.usage, c.usage)
        fields: dict[str, Any] = {
            "turn": turn,
            "latency_s": round(c.latency_s, 4),
            "usage": c.usage,
            "message": c.message,
            "finish_reason": c.finish_reason,
            "attempts": c.attempts,
        }
        if c.reasoning:
            fields["reasoning"] = c.reasoning
        self.recorder.event("model_call", **fields)

    def _execute(self, turn: int, call: dict[str, Any], names: set[str | None]) -> ToolResult:
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
            args, problem = _parse_arguments(raw)
            if args is None:
                res = ToolResult(output=f"Error: the arguments of '{name}' {problem}; call it again with a JSON object.", error=True)
            else:
                try:
                    res = self._call_profile(name, args)
                except BaseException as e:
                    what = "call was interrupted" if isinstance(e, KeyboardInterrupt) else f"crashed: {e.__class__.__name__}: {e}"
                    self._record_call(turn, call_id, name, args, raw_s, t, ToolResult(output=f"(the tool {what})", error=True))
                    raise
        _add_usage(self.summary_usage, res.meta.get(TOOL_USAGE_META))
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": res.output})
        self._record_call(turn, call_id, name, args, raw_s, t, res)
        return res

    def _record_call(
        self, turn: int, call_id: str, name: str, args: dict[str, Any] | None, raw_s: str, t: float, res: ToolResult
    ) -> None:
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
        )

    def _call_profile(self, name: str, args: dict[str, Any]) -> ToolResult:
        try:
            return self.profile.execute(name, args)
        except ToolError as e:
            return ToolResult(output=f"Error: {e}", error=True)
        except (TypeError, KeyError, ValueError) as e:  # the model's arguments did not fit the tool
            return ToolResult(output=f"Error: bad arguments for '{name}': {e.__class__.__name__}: {e}", error=True)


def _parse_arguments(raw: Any) -> tuple[dict[str, Any] | None, str | None]:
    """Parse tool-call arguments: ``(dict, None)`` or ``(None, problem)``; empty means ``{}``."""
    if isinstance(raw, dict):
        return raw, None
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}, None
    try:
        value = json.loads(raw)
    except (TypeError, json.JSONDecodeError) as e:
        return None, f"are not valid JSON ({e})"
    if not isinstance(value, dict):
        return None, f"must be a JSON object, got {type(value).__name__}"
    return value, None
