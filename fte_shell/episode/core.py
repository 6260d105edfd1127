"""The :class:`Episode`: one question's world binding, run record, profile and sandbox — no loop, no
model. Anything drives it: fte-shell's agent loop (``run_question``), a hand-written script, an MCP
server, an RL trainer.

::

    with Episode.open(config, "Which …?", Path("runs/e1")) as ep:
        ep.tools                                              # the profile's tool schemas
        r = ep.call("bash", {"command": "fetch https://…"})  # the profile's ToolResult, recorded
        ep.finish(answer="…")                                 # end event + result.json

Tool dispatch has its one home here (:meth:`Episode.call_raw`): an unknown tool or bad arguments is an
error result the caller (the model) can correct, never an exception; a crash or an interrupt is recorded
as the call's result, then re-raised. Turns: a driver that passes ``turn=`` numbers its own turns (the
loop does: one per model call, :meth:`Episode.begin_turn`); each call made without it is a turn of its
own. An episode left without :meth:`Episode.finish` ends ``abandoned``; one left by an exception ends with
the stop reason the exception names (``crashed`` if none; ``interrupted`` for Ctrl-C, SIGTERM or an
asyncio cancellation) — its trajectory and ``result.json`` on disk, its box closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as _dt
import json
import re
import threading
import time
import uuid
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from ..config import RunConfig
from ..errors import ConfigError, ToolError
from ..model import ServerInfo
from ..model.prices import price_for, usage_cost
from ..profiles import (
    Profile,
    QuestionContext,
    SandboxRelease,
    SandboxSource,
    ToolResult,
    make_profile,
    parse_arguments,
)
from ..profiles.answer_format import answer_format_of
from ..profiles.base import check_profile_name
from ..prompts import system_prompt
from ..record.events import ErrorEvent, KnownEvent, ToolCallEvent
from ..record.rundir import EventListener, RunWriter
from ..stops import BY_NAME, StopReason, stop_of_exception
from ..world import RunWorld, World
from .result import TOOL_USAGE_META, RunResult, Tally, add_usage, write_end, write_start
from .signals import sigterm_as_interrupt_if_unowned
from .threads import closed_if_cancelled, in_thread

if TYPE_CHECKING:
    from ..model import Model
    from .fork import ForkPrefix
    from .resume import ResumePrefix


def slugify(text: str, limit: int = 40) -> str:
    """A short file-name-safe slug of ``text`` (lower-case words joined by ``-``; never empty)."""
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:limit].strip("-")
    return slug or "question"


def new_run_id(question: str) -> str:
    """``YYYYmmdd-HHMMSS-<slug>-<4 hex>``: sortable, readable, unique."""
    now = _dt.datetime.now(_dt.UTC).strftime("%Y%m%d-%H%M%S")
    return f"{now}-{slugify(question, 32)}-{uuid.uuid4().hex[:4]}"


def check_question(question: str, config: RunConfig) -> None:
    """Raise :class:`~fte_shell.errors.ConfigError` for an empty question or an unknown profile."""
    if not question.strip():
        raise ConfigError("the question is empty")
    check_profile_name(config.agent.profile)


class Episode:
    """One question's run: its profile (and box), its run record and its world binding."""

    def __init__(self, config: RunConfig, question: str, profile: Profile, recorder: RunWriter, *,
                 run_id: str | None = None, meta: dict[str, Any] | None = None, server: ServerInfo | None = None,
                 world: RunWorld | None = None):
        """An episode on a profile and a run writer the caller holds (and closes): writes the start event.
        :meth:`open` builds (and owns) all of it."""
        self.config, self.question, self.profile, self.recorder = config, question, profile, recorder
        self.run_id = run_id or uuid.uuid4().hex[:12]
        self.meta = dict(meta or {})
        """``result.json``'s ``meta``."""
        self.server = server
        """What the model server said about itself (in the start event), when the driver passed it."""
        self.world = world if world is not None else RunWorld()
        self.tools: list[dict[str, Any]] = profile.tools()
        """The profile's tool schemas (OpenAI function format)."""
        self.names = {n for t in self.tools if (n := t.get("function", {}).get("name"))}
        agent = config.agent
        self.answer_format = answer_format_of(profile)
        """The profile's answer format (:mod:`fte_shell.profiles.answer_format`); None: ``<answer>`` tags."""
        fmt = self.answer_format
        self.system_prompt = fmt.system_prompt if fmt is not None and agent.system_prompt_file is None else \
            system_prompt(profile.system_addendum(), agent.current_date, agent.system_prompt_file)
        """Fixed body (or ``agent.system_prompt_file``) + the profile's addendum + ``Current date: …``; a
        profile with an answer format: the format's (the benchmark's clients send none) unless the file is set."""
        self.user_message = fmt.pose(question) if fmt is not None else question
        """The question as the model is asked it (an answer format's query template around it)."""
        price = price_for(config.model)
        reader = agent.summary_model
        self.reader_price = price if reader is None else price_for(
            reader if reader.model else reader.model_copy(update={"model": config.model.model}))
        """visit-summary's reader model's price (its tokens are in the run's cost when known)."""
        self.tally = Tally(cost_usd=0.0 if price is not None else None,
                           answer_format=None if fmt is None else {**fmt.record(), "user_message": self.user_message})
        self.result: RunResult | None = None
        """Set by :meth:`finish`."""
        self.prefix: ForkPrefix | ResumePrefix | None = None
        """A fork's or a resumed run's turns to replay before its driver goes live (the agent's loop applies
        them)."""
        self.forked_from: dict[str, Any] | None = None
        """A fork's parent, turn and check (``result.json``'s ``forked_from``)."""
        self.resumed: dict[str, Any] | None = None
        """A resumed or redone run's record (``result.json``'s ``resumed``; :mod:`.resume`)."""
        self._lock = threading.Lock()
        self._calls = 0
        self._owned: contextlib.ExitStack | None = None
        self.started_at = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
        self._t0 = time.monotonic()
        write_start(recorder, question, profile.name, config, self.system_prompt, self.tools, self.run_id, server)

    @classmethod
    def open(cls, config: RunConfig, question: str, out_dir: Path, *, world: World | None = None,
             run_id: str | None = None, meta: dict[str, Any] | None = None, log: EventListener | None = None,
             server: ServerInfo | None = None, model: Model | None = None,
             sandbox_source: SandboxSource | None = None, sandbox_release: SandboxRelease | None = None) -> Episode:
        """Open ``question``'s episode with ``config.agent.profile``, its run directory ``out_dir``.

        ``world`` (a sweep shares one) defaults to :meth:`World.from_config` of ``config``, then made and
        closed by the episode; ``log`` gets every trajectory event as it is written; ``run_id`` defaults to
        timestamp + slug; ``meta`` goes into ``result.json``'s ``meta`` over the world's; ``server`` (the
        model server's info) goes into the start event; ``model`` is the client a profile may use
        (visit-summary's reader); ``sandbox_source`` gives the shell profile a box started ahead (a
        pool's ``acquire``; the episode closes it, its /work kept as the run's workspace), which the episode
        gives to ``sandbox_release`` (a pool's ``release``: reset and reused) instead of closing it. In the main thread, SIGTERM becomes an interrupt while the episode is
        open if nothing else handles it (:func:`~fte_shell.episode.signals.sigterm_as_interrupt_if_unowned`).
        A profile that fails to start is recorded (an ``error`` event, turn 0) and its exception raised."""
        check_question(question, config)
        run_id = run_id or new_run_id(question)
        with contextlib.ExitStack() as stack:  # undone in reverse order, unless the episode takes it
            if world is None:
                world = stack.enter_context(World.from_config(config))
            run_world = stack.enter_context(world.bind(run_id, Path(out_dir), log))
            stack.enter_context(sigterm_as_interrupt_if_unowned())  # kept through the closes below
            rec = stack.enter_context(RunWriter(Path(out_dir), listener=run_world.listener))
            ctx = QuestionContext(config=config, workspace_dir=rec.workspace_dir, world=run_world, run_id=run_id,
                                  model=model, sandbox_source=sandbox_source, sandbox_release=sandbox_release)
            try:
                profile = make_profile(config.agent.profile, ctx)
            except Exception as e:
                rec.write(ErrorEvent(turn=0, message=f"profile '{config.agent.profile}' failed to start: {e}"))
                raise
            stack.callback(_close_quietly, profile)
            ep = cls(config, question, profile, rec, run_id=run_id, meta={**run_world.meta, **(meta or {})},
                     server=server, world=run_world)
            ep._owned = stack.pop_all()
        return ep

    @classmethod
    def fork(cls, parent_dir: Path, at_turn: int, out_dir: Path, **kw: Any) -> Episode:
        """Open a fork of the finished run in ``parent_dir`` at turn ``at_turn``, its run directory
        ``out_dir`` (the parent's is only read): the parent's question, profile and configuration (a
        whole ``config=``, or ``overrides=`` over the parent's), its world the parent's snapshot. Its
        :attr:`prefix` holds the parent's replies of turns 1..K for a driver to replay before going live
        (``Agent(config, model).drive(ep)`` does; its ``config`` is ``ep.config``). Other keywords as
        :meth:`open`. Raises :class:`~fte_shell.errors.ConfigError` for a parent without a snapshot (the
        message says how to record one) or without K replayable turns. :mod:`fte_shell.episode.fork`."""
        from .fork import open_fork

        return open_fork(cls, Path(parent_dir), at_turn, Path(out_dir), **kw)

    @classmethod
    async def aopen(cls, config: RunConfig, question: str, out_dir: Path, **kw: Any) -> Episode:
        """:meth:`open` in a worker thread (the event loop is never blocked by a box's start). Cancelled
        while opening: the episode opened meanwhile is ended ``interrupted`` when it comes
        (:func:`.threads.closed_if_cancelled`)."""
        return await closed_if_cancelled(in_thread(cls.open, config, question, out_dir, **kw))

    @property
    def workspace_dir(self) -> Path:
        """Host directory of the question's workspace (``RUN_DIR/workspace``; /work in the box)."""
        return self.recorder.workspace_dir

    @property
    def run_dir(self) -> Path:
        return self.recorder.run_dir

    @property
    def finished(self) -> bool:
        return self.result is not None

    # --- driving ----------------------------------------------------------------------------------------
    def record(self, event: KnownEvent) -> None:
        """Append a driver's event (a typed model of :mod:`fte_shell.record.events`) to the trajectory."""
        if self.result is not None:
            raise RuntimeError(f"episode {self.run_id} is finished ({self.result.stop_reason}); nothing more is recorded")
        self.recorder.write(event)

    def begin_turn(self) -> int:
        """Start the next turn (a loop: one per model call) and return its number (1-based)."""
        with self._lock:
            self.tally.turns += 1
            turn = self.tally.turns
        if self.world.snapshot is not None:  # what the snapshot's log records a capture under
            self.world.snapshot.turn = turn
        return turn

    def call(self, name: str, args: dict[str, Any] | str | None = None, *, turn: int | None = None) -> ToolResult:
        """Run tool ``name`` with ``args`` (a dict, or a JSON text as a model sends it) through the profile,
        record it (a ``tool_call`` event) and return the profile's result. ``turn`` None: a turn of its own."""
        with self._lock:
            self._calls += 1
            call_id = f"hand_{self._calls}"
        return self.call_raw({"id": call_id, "function": {"name": name, "arguments": args}}, turn=turn)[1]

    async def acall(self, name: str, args: dict[str, Any] | str | None = None, *, turn: int | None = None) -> ToolResult:
        """:meth:`call` in a worker thread, so many episodes proceed concurrently in one event loop."""
        if turn is None:
            turn = self.begin_turn()
        return await in_thread(self.call, name, args, turn=turn)

    def call_raw(self, call: dict[str, Any], *, turn: int | None = None, salvaged: bool = False) -> tuple[str, ToolResult]:
        """Run one model tool call (``{id, function: {name, arguments}}``, arguments raw) and record it;
        returns ``(call id, result)`` (a call without an id gets ``call_<turn>``). ``salvaged``: a call
        taken from a reply's text. Unknown tools and bad arguments are error results the model can
        correct; a crash or an interrupt is recorded as an error result, then re-raised."""
        if self.result is not None:
            raise RuntimeError(f"episode {self.run_id} is finished ({self.result.stop_reason}); no more tool calls")
        if turn is None:
            turn = self.begin_turn()
        fn = call.get("function") or {}
        name = str(fn.get("name") or "")
        with self._lock:
            self.tally.turns = max(self.tally.turns, turn)
            self.tally.tool_counts[name] = self.tally.tool_counts.get(name, 0) + 1
        raw = fn.get("arguments")
        raw_s = raw if isinstance(raw, str) else json.dumps(raw)
        call_id = call.get("id") or f"call_{turn}"
        args: dict[str, Any] | None = None
        t = time.monotonic()

        def record(res: ToolResult) -> None:
            self.recorder.write(ToolCallEvent(
                turn=turn, id=call_id, name=name, arguments=args, raw_arguments=raw_s, observation=res.output,
                error=bool(res.error), duration_s=round(time.monotonic() - t, 4), meta=res.meta,
                **({"salvaged": True} if salvaged else {})))

        if name not in self.names:
            avail = ", ".join(sorted(self.names)) or "none"
            res = ToolResult(output=f"Error: unknown tool '{name}'. Available tools: {avail}.", error=True)
        else:
            args, problem = parse_arguments(raw)
            if args is None:
                shown = raw_s if len(raw_s) <= 200 else raw_s[:200] + "…"
                res = ToolResult(output=f"Error: the arguments of '{name}' {problem}; they were: {shown}\n"
                                 "Call it again with a JSON object as its arguments.", error=True)
            else:
                try:
                    res = _run_tool(self.profile, name, args)
                except BaseException as e:
                    what = ("call was interrupted" if isinstance(e, KeyboardInterrupt)
                            else f"crashed: {e.__class__.__name__}: {e}")
                    record(ToolResult(output=f"(the tool {what})", error=True))
                    raise
        record(res)
        self._count_tool_usage(res)
        return call_id, res

    def _count_tool_usage(self, res: ToolResult) -> None:
        """A tool's own model tokens (``meta.summary_usage``) into the tally, and their cost when known."""
        if (spent := res.meta.get(TOOL_USAGE_META)) is not None:
            self.count_side_usage(spent, self.reader_price)

    def count_side_usage(self, spent: Any, price: Any, billed: dict[str, Any] | None = None) -> None:
        """Tokens of a model called besides the agent's turns (visit-summary's reader, the ``summary``
        context strategy's writer) into ``summary_usage``, and their cost at ``price`` (a
        :func:`~fte_shell.model.prices.price_for`; None: unknown) when the run's cost is known; ``billed``:
        the call's whole usage (cached tokens) when there is more than ``spent``'s counts."""
        with self._lock:
            add_usage(self.tally.summary_usage, spent)
            if price is not None and self.tally.cost_usd is not None and isinstance(spent, dict):
                self.tally.cost_usd += usage_cost(billed or spent, price)

    # --- ending -----------------------------------------------------------------------------------------
    def finish(self, answer: str | None = None, *, stop_reason: StopReason | str = "answer",
               error: str | None = None) -> RunResult:
        """End the run: an ``error`` event when ``error`` is given, then the ``end`` event and
        ``result.json`` (the same fields as a loop's run). ``stop_reason`` is a name of
        :mod:`fte_shell.stops`; ``answer`` is required with ``answer``. Does not close the episode."""
        if self.result is not None:
            raise RuntimeError(f"episode {self.run_id} is already finished ({self.result.stop_reason})")
        if stop_reason not in BY_NAME:
            raise ValueError(f"unknown stop reason {stop_reason!r} (fte_shell.stops: {', '.join(BY_NAME)})")
        if stop_reason == "answer" and answer is None:
            raise ValueError("finish with stop_reason 'answer' needs the answer (give another stop reason without one)")
        if error is not None:
            self.recorder.write(ErrorEvent(turn=self.tally.turns, message=error))
        result = self.tally.result(self.question, stop_reason, answer, profile=self.profile.name,  # type: ignore[arg-type]
                                   model=self.config.model.model, context=self.config.agent.context.label,
                                   wall_s=round(time.monotonic() - self._t0, 3),
                                   run_id=self.run_id, run_dir=self.recorder.run_dir, forked_from=self.forked_from,
                                   resumed=self.resumed)
        self.result = result
        write_end(self.recorder, result, started_at=self.started_at, meta=self.meta, config=self.config)
        return result

    def finish_on(self, e: BaseException) -> RunResult:
        """Finish with the stop reason ``e`` names (:func:`~fte_shell.stops.stop_of_exception`, else
        ``crashed``; Ctrl-C, SIGTERM or a cancellation: ``interrupted``) and its message as the error."""
        if isinstance(e, KeyboardInterrupt | asyncio.CancelledError):
            return self.finish(stop_reason="interrupted", error="interrupted (KeyboardInterrupt or SIGTERM)"
                               if isinstance(e, KeyboardInterrupt) else "interrupted (cancelled)")
        return self.finish(stop_reason=stop_of_exception(e, default="crashed"), error=f"{e.__class__.__name__}: {e}")

    async def afinish(self, answer: str | None = None, **kw: Any) -> RunResult:
        """:meth:`finish` in a worker thread (it writes and fsyncs files)."""
        return await in_thread(self.finish, answer, **kw)

    def close(self) -> None:
        """Finish ``abandoned`` if not finished, then close what :meth:`open` made (the profile and its box,
        the run writer, the world binding; idempotent). A Ctrl-C during the close does not stop it."""
        try:
            if self.result is None:
                self.finish(stop_reason="abandoned")
        finally:
            owned, self._owned = self._owned, None
            if owned is not None:
                owned.close()

    async def aclose(self) -> None:
        await in_thread(self.close)

    def end(self, answer: str | None = None, *, stop_reason: StopReason | str | None = None,
            why: BaseException | None = None) -> RunResult:
        """Finish, unless finished, with ``answer``, else ``stop_reason``, else the stop ``why`` names
        (:meth:`finish_on`), else ``abandoned``; then :meth:`close`. The run's result: how every host of
        an episode ends one (a ``with`` block, an MCP workspace, an RL pool's episode)."""
        try:
            if self.result is None and (answer is not None or stop_reason is not None):
                self.finish(answer, stop_reason=stop_reason or "answer")
            elif self.result is None and why is not None:
                self.finish_on(why)
        finally:
            self.close()
        assert self.result is not None  # close() finishes 'abandoned' when nothing else did
        return self.result

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.end(why=exc)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await asyncio.shield(in_thread(self.__exit__, exc_type, exc, tb))


def _run_tool(profile: Profile, name: str, args: dict[str, Any]) -> ToolResult:
    try:
        return profile.execute(name, args)
    except ToolError as e:
        return ToolResult(output=f"Error: {e}", error=True)
    except (TypeError, KeyError, ValueError) as e:  # the model's arguments did not fit the tool
        return ToolResult(output=f"Error: bad arguments for '{name}': {e.__class__.__name__}: {e}", error=True)


def _close_quietly(profile: Profile) -> None:
    """Close the profile; a Ctrl-C or SIGTERM arriving during the close does not stop the close."""
    try:
        profile.close()
    except KeyboardInterrupt:
        profile.close()
        raise
