"""The ReAct loop: it drives an :class:`~fte_shell.episode.Episode` and does not know which profile the
episode holds (a profile is tool schemas plus an executor).

Each turn is **ask → apply**. :meth:`Agent.ask` builds the request from the kept conversation through the
run's :class:`~.context.ContextPolicy` (``keep_all``: all of it) and calls the model with ``max_tokens``
fitted to what is left of the window. :meth:`Agent.apply` records the reply; if it called tools, executes
them IN ORDER through the episode (``Episode.call_raw``: malformed JSON arguments or an unknown tool
become an error observation the model can correct; the message kept in the conversation carries ``{}``
instead of arguments that are not a JSON object) and appends one ``tool`` message per call; else, if the
reply finished normally and holds an ``<answer>`` (closed, or opened and never closed), stops; a reply
cut at ``max_tokens`` gets a "your reply was cut" notice; otherwise a short nudge. After a turn's calls
the stuck detector (:mod:`.stuck`, ``agent.stuck_repeats``) may send its notice or stop the run.

Every stop is a :class:`RunOver` raised where it is decided and caught in :meth:`Agent.drive`, the one place
that ends a run (``Episode.finish``; stop reasons: :mod:`fte_shell.stops`). An exception ends it through
``Episode.finish_on`` (the stop reason it names, else ``crashed``; KeyboardInterrupt or SIGTERM:
``interrupted``) and is re-raised after ``result.json`` is written. Token usage: the agent model's in
``usage``; tokens of models that tools call themselves (``meta.summary_usage``, counted by the episode) in
``summary_usage``.
"""

from __future__ import annotations

import time
from typing import Any

from ..config import RunConfig
from ..episode import Episode, RunResult, add_usage
from ..episode.fork import ForkPrefix
from ..episode.resume import ResumePrefix
from ..errors import ModelError
from ..model import Completion, Model, ServerInfo
from ..model.errors import ContextOverflow
from ..model.prices import price_for, usage_cost
from ..model.window import kind_named
from ..record.events import (
    ContextEditEvent,
    ErrorEvent,
    FinalAnswerRequestEvent,
    ModelCallEvent,
    NudgeEvent,
    RetryEvent,
    TextToolCallEvent,
)
from ..stops import StopReason
from .context import (
    ContextPolicy,
    ContextView,
    composed,
    estimate_request,
    make_policy,
    policy_state,
    restore_policy,
)
from .replies import (
    CUT_NOTICE,
    FINAL_ANSWER_REQUEST,
    NUDGE,
    fit_max_tokens,
    kept_message,
    model_call_fields,
    reply_answer,
    reply_signature,
    salvaged_calls,
    text_tool_calls,
    tool_choice,
)
from .state import LoopState
from .stuck import notice_text


class RunOver(Exception):
    """The loop stops: ``reason``, the ``answer`` (if any), and the ``error`` event's message (if any)."""

    def __init__(self, reason: StopReason, answer: str | None = None, error: str | None = None):
        super().__init__(reason)
        self.reason, self.answer, self.error = reason, answer, error


class Agent:
    """Drives episodes: ``Agent(config, model).drive(episode) -> RunResult`` (an episode from
    :meth:`Episode.open <fte_shell.episode.Episode.open>`, or one on a profile and run writer the caller
    holds: ``Episode(config, question, profile, recorder)``)."""

    def __init__(self, config: RunConfig, model: Model, *, context: ContextPolicy | None = None):
        self.config, self.model = config, model
        self.given_context = context
        self.context: ContextPolicy = context if context is not None else make_policy(config)
        """What is sent of the kept conversation: the ``context`` given, else ``agent.context``'s strategy
        (:func:`~.context.make_policy`, a new one for each episode driven: it keeps state)."""
        self.messages: list[dict[str, Any]] = []
        """The kept conversation."""
        self.state = LoopState()
        self.info: ServerInfo | None = None
        self.deadline: float | None = None
        self.price = price_for(config.model)
        """USD per million tokens of the agent's model (None: unknown, the run records tokens only)."""
        self.ep: Episode | None = None
        self.replaying = False
        """True while a fork's recorded replies are applied (their ``model_call`` events say ``replayed``)."""

    @property
    def episode(self) -> Episode:
        if self.ep is None:
            raise RuntimeError("the agent drives no episode")
        return self.ep

    def drive(self, ep: Episode) -> RunResult:
        """Run the loop on ``ep`` to a stop reason, finish it (end event, ``result.json``) and return the
        result. An exception (KeyboardInterrupt included) is recorded and re-raised after ``result.json``."""
        self.ep, self.state = ep, LoopState()
        if self.given_context is None:
            self.context = make_policy(self.config)
        self.info = ep.server if ep.server is not None else self.model.server_info()  # outside the time budget
        budget = self.config.agent.time_budget_s
        self.deadline = time.monotonic() + budget if budget is not None else None
        self.messages = [{"role": "system", "content": ep.system_prompt}, {"role": "user", "content": ep.user_message}]
        try:
            if ep.prefix is not None:
                self.replay(ep.prefix)
            while True:
                self.turn()
        except RunOver as e:
            return ep.finish(e.answer, stop_reason=e.reason, error=e.error)
        except BaseException as e:  # recorded, then re-raised
            ep.finish_on(e)
            raise

    def replay(self, prefix: ForkPrefix | ResumePrefix) -> None:
        """A fork's or a resumed run's first turns: each recorded reply applied as if the model had just sent
        it (no model call; the tool calls run again), then the state checked against the record. A fork's
        context policy starts fresh after its prefix; a resumed run's takes back, at each turn that had one,
        the recorded edit (its state; a summary re-used, its tokens counted once), so its next request is
        the one the model would have got. A fork's difference stops it (``fork_mismatch``); a resumed
        run's check raises :class:`~fte_shell.episode.resume.ResumeMismatch` (its runner redoes the run).
        A reply that ended the recorded run ends this one the same way, after the check."""
        ep, ended = self.episode, None
        edits = getattr(prefix, "edits", {})
        self.replaying = True
        try:
            for c in prefix.replies:
                turn = ep.begin_turn()
                if (edit := edits.get(turn)) is not None:
                    self.replay_edit(edit)
                sent = composed(self.context, self.messages)
                self.state.last_prompt, self.state.last_sent = (c.usage.get("prompt_tokens") or None), sent
                self.apply(c)
        except RunOver as e:
            ended = e
        finally:
            self.replaying = False
        if (problem := prefix.check(ep)) is not None:
            raise RunOver("fork_mismatch", error=problem)
        if ended is not None:
            raise ended

    def replay_edit(self, edit: ContextEditEvent) -> None:
        """A resumed run's recorded context edit: the policy's state taken back, the event written again
        (``replayed``), a summary's tokens counted once."""
        restore_policy(self.context, edit.state)
        fields = edit.model_dump(exclude_unset=True, exclude={"type", "t", "replayed"})
        self.episode.record(ContextEditEvent(**fields, replayed=True))
        if edit.usage:
            writer = getattr(self.context, "writer", None) or self.config.model
            self.episode.count_side_usage(edit.usage, price_for(writer))

    def over_budget(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    def turn(self) -> None:
        """One turn (ask, then apply); raises :class:`RunOver` when the run is over."""
        ep, cfg = self.episode, self.config.agent
        if ep.tally.turns >= cfg.max_turns:
            raise RunOver("max_turns")
        if self.over_budget():
            raise RunOver("time_budget")
        if cfg.max_total_tokens is not None and (spent := ep.tally.tokens_spent()) >= cfg.max_total_tokens:
            raise RunOver("token_budget", error=f"{spent:,} tokens spent of agent.max_total_tokens "
                                             f"{cfg.max_total_tokens:,}")
        ep.begin_turn()
        try:
            c = self.ask(ep.tools)
        except ContextOverflow as e:
            self.model_failed(e)
            if cfg.on_context_overflow == "final_answer":
                self.final_answer()
            raise RunOver("context_overflow") from None
        except ModelError as e:
            reason = self.model_failed(e)
            raise RunOver("time_budget" if self.over_budget() else reason) from None  # type: ignore[arg-type]
        self.apply(c)

    def ask(self, tools: list[dict[str, Any]], *, final: bool = False) -> Completion:
        """Build the request from the kept conversation through the context policy and call the model,
        ``max_tokens`` fitted to what is left of the context window."""
        s, ep = self.state, self.episode
        turn = ep.tally.turns
        kept_est = estimate_request(self.messages, tools, s.last_sent, s.last_prompt)
        sent = self.context.prepare(ContextView(self.messages, tools, turn, self.info, kept_est, ep, self.model,
                                                s.last_sent, s.last_prompt))
        est = kept_est if sent.messages is self.messages else estimate_request(sent.messages, tools, s.last_sent,
                                                                                s.last_prompt)
        if sent.edit is not None:
            ep.record(ContextEditEvent(turn=turn, strategy=self.context.name, messages_before=len(self.messages),
                                       messages_after=len(sent.messages), tokens_before=kept_est, tokens_after=est,
                                       cleared=sent.edit.cleared, note=sent.edit.note, escalated=sent.edit.escalated,
                                       usage=sent.edit.usage, state=policy_state(self.context)))
        max_tokens = fit_max_tokens(self.info, self.config.model, est, final=final)
        choice = tool_choice(self.config.agent.first_tool_choice, turn, tools, ep.profile.name)
        c = self.model.complete(sent.messages, tools or None, deadline=self.deadline, tool_choice=choice,
                                max_tokens=max_tokens, on_retry=lambda r: ep.record(RetryEvent(turn=turn, **r)))
        s.last_prompt, s.last_sent = (c.usage.get("prompt_tokens") or None), list(sent.messages)
        return c

    def apply(self, c: Completion) -> None:
        """Record the reply; run its tool calls through the episode, or stop, or nudge."""
        s, ep, cfg = self.state, self.episode, self.config.agent
        turn = ep.tally.turns
        msg, changes = self.keep(c)
        escapes = kind_named(self.info.server if self.info is not None else None).escapes
        found = text_tool_calls(c, ep.names, escapes)
        run = bool(found) and self.config.model.parse_text_tool_calls
        if found:
            ep.record(TextToolCallEvent(turn=turn, source=found[0], calls=found[1], executed=run))
            if run:
                msg["tool_calls"] = salvaged_calls(turn, found[1])
        self.record_reply(c, msg, changes)
        # a text call that was whole before the cut is not a cut reply: what the cap cut is what the model
        # wrote after its call (an invented result), which is never executed nor an observation
        s.reply(reply_signature(c), c.finish_reason == "length" and not run)
        if s.repeats >= cfg.max_repeated_replies:
            raise RunOver("repeated_reply", error=f"{s.repeats} identical replies in a row")
        calls = msg.get("tool_calls") or []
        if s.cuts >= 2 and not calls:
            raise RunOver("reply_cut", error="two replies in a row were cut at max_tokens")
        if s.cuts and not calls:
            return self.nudge("reply_cut", CUT_NOTICE)
        if not calls:
            answer = self.answer_in(c, escapes)
            if answer is not None:
                raise RunOver("answer", answer)
            s.nudges += 1
            if s.nudges > cfg.max_nudges:
                raise RunOver("too_many_nudges", error=f"{s.nudges} replies in a row with no tool call and no answer")
            return self.nudge("no_tool_call", NUDGE if ep.answer_format is None else ep.answer_format.nudge)
        s.nudges = 0
        raw = {tc.get("id"): tc for tc in c.message.get("tool_calls") or []}
        all_failed = True
        for call in calls:  # the raw arguments, not the kept "{}"
            all_failed &= self.execute(raw.get(call.get("id"), call), salvaged=str(call.get("id") or "").startswith("text_"))
        if s.cuts >= 2:
            raise RunOver("reply_cut", error="two replies in a row were cut at max_tokens")
        s.failed_turns = s.failed_turns + 1 if all_failed else 0
        if s.failed_turns >= cfg.max_consecutive_errors:
            raise RunOver("errors", error=f"{s.failed_turns} consecutive turns whose tool calls all failed")
        self.check_stuck()

    def check_stuck(self) -> None:
        """After a turn's calls: the stuck detector's notice, or its stop (:mod:`.stuck`)."""
        streak = self.state.streak
        verdict = streak.verdict(self.config.agent.stuck_repeats)
        if verdict == "stop":
            raise RunOver("stuck", error=f"the same {streak.tool} call with the same observation {streak.count} times "
                                      f"in a row, after a notice at {streak.noticed_at}")
        if verdict == "notice":
            self.nudge("stuck", notice_text(streak.tool, streak.count), tool=streak.tool, repeats=streak.count)

    def final_answer(self) -> None:
        """``agent.on_context_overflow = final_answer``: one last call without tools asking for the answer;
        raises ``RunOver("answer")`` when it gives one (else the caller stops with ``context_overflow``)."""
        ep = self.episode
        if ep.tally.turns >= self.config.agent.max_turns:
            return
        turn = ep.begin_turn()
        request = FINAL_ANSWER_REQUEST if ep.answer_format is None else ep.answer_format.final_request
        self.messages.append({"role": "user", "content": request})
        ep.record(FinalAnswerRequestEvent(turn=turn, message=request))
        try:
            c = self.ask([], final=True)
        except ModelError as e:
            self.model_failed(e)
            return
        msg, changes = self.keep(c)
        self.record_reply(c, msg, changes)
        answer = self.answer_in(c, escapes=False) if c.finish_reason != "length" else None
        if answer is not None:
            raise RunOver("answer", answer)

    def answer_in(self, c: Completion, escapes: bool) -> str | None:
        """The final answer of a reply without tool calls: in ``<answer>`` tags (their flags into the tally),
        or, for a profile with an answer format, what the format parses (its detail into the tally)."""
        ep = self.episode
        fmt = ep.answer_format
        if fmt is None:
            answer, ep.tally.answer_unclosed, ep.tally.answer_unescaped = reply_answer(c, escapes)
            return answer
        parsed = fmt.parse(c.text or "")
        if parsed is None:
            return None
        ep.tally.answer_format = {**(ep.tally.answer_format or {}), **parsed.detail}
        return parsed.answer

    def keep(self, c: Completion) -> tuple[dict[str, Any], list[str]]:
        """The message kept in the conversation, and how it differs from the server's."""
        kept = kept_message(c, self.config.model.reasoning_passback, self.state.reasoning_fields)
        self.state.reasoning_fields = c.reasoning_fields or self.state.reasoning_fields
        return kept

    def record_reply(self, c: Completion, msg: dict[str, Any], changes: list[str]) -> None:
        ep = self.episode
        tally = ep.tally
        add_usage(tally.usage, c.usage)
        fields = model_call_fields(tally.turns, c, changes)
        if self.price is not None and tally.cost_usd is not None:
            cost = usage_cost(c.usage_details or c.usage, self.price)
            tally.cost_usd += cost
            fields["cost_usd"] = cost
        ep.record(ModelCallEvent(**fields, **({"replayed": True} if self.replaying else {})))
        self.messages.append(msg)

    def nudge(self, kind: str, text: str, **fields: Any) -> None:
        self.messages.append({"role": "user", "content": text})
        self.episode.record(NudgeEvent(turn=self.episode.tally.turns, kind=kind, message=text, **fields))

    def model_failed(self, e: ModelError) -> str:
        """Record a failed model call; returns its stop reason."""
        fields: dict[str, Any] = {"turn": self.episode.tally.turns, "message": str(e),
                                  "error_class": e.__class__.__name__}
        for k in ("status", "body"):
            if v := getattr(e, k, None):
                fields[k] = v
        self.episode.record(ErrorEvent(**fields))
        return str(getattr(e, "stop_reason", "model_error"))

    def execute(self, call: dict[str, Any], *, salvaged: bool) -> bool:
        """Run one tool call through the episode and append its observation; True when it failed."""
        call_id, res = self.episode.call_raw(call, turn=self.episode.tally.turns, salvaged=salvaged)
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": res.output})
        self.state.streak.see(call, res.output)
        return bool(res.error)
