"""What every editing strategy shares (:class:`Editing`): the state of what it sends, the trigger, the
window guard and its escalation, and the recorded edit.

The kept conversation is ``[system, question, step, step, …, trailing notices]``: a *step* is one
assistant message and the tool messages that answer its calls (the loop appends them right after it);
a nudge or notice is a user message of its own. An editing strategy sends::

    [system, question (+ a note when earlier steps were dropped), kept[cut:] with cleared results]

- ``cut`` only ever lands on the start of a step (an assistant message) or on the trailing user messages
  (the request's own notice, e.g. the final-answer request, is never dropped): a step is sent whole or
  not at all, so no tool result goes without its call and no call without its result, and an assistant
  message goes with every field the server needs back (reasoning pass-back, OpenRouter's
  ``reasoning_details``, the Responses API's output items) or not at all;
- a cleared result keeps its tool message (and so its pairing) with a short fixed placeholder that names
  the tool and never repeats its output (:func:`placeholder`);
- the note is merged into the question's message (a second user message in a row is refused by chat
  templates that require alternating roles), together with any user message the tail starts with.

The window guard: whenever a strategy other than ``keep_all`` would send more than fits the window
(``window − model.context_margin − model.reply_floor``, what the loop's ``max_tokens`` fit needs),
it acts even below its trigger; and when its own edit is not enough it **escalates**: the oldest steps
still sent are dropped, one by one, until the prompt fits (recorded ``escalated``). When even
``[system, question + note]`` does not fit, the request is not sent: the loop stops ``context_overflow``.
"""

from __future__ import annotations

from typing import Any

from ...config import ContextConfig, ModelConfig
from .base import ContextEdit, ContextView, Sent

DROP_NOTE = ("Earlier steps of this conversation (your tool calls and their results) were cleared to free "
             "the context window.")
WORKSPACE_NOTE = " The workspace still holds every document you fetched: list_fetched lists them."
"""Said after :data:`DROP_NOTE` (and in each placeholder) when the profile has a workspace."""


def placeholder(name: str, workspace: bool) -> str:
    """The content sent instead of a cleared tool result: fixed, naming the tool, never its output."""
    tail = " Documents it fetched are still in the workspace." if workspace else ""
    return f"[Result of this {name} call cleared to free the context window.{tail}]"


def has_workspace(view: ContextView) -> bool:
    """Whether the run's profile keeps a workspace the model can list (``list_fetched``: a tool of the
    structured profiles, a helper command of the shell profile's)."""
    return "list_fetched" in view.episode.names or view.episode.profile.name == "shell"


def trailing_start(messages: list[dict[str, Any]]) -> int:
    """Index of the first of the user messages that end the conversation after its last step (the
    request's own notices), or ``len(messages)``."""
    i = len(messages)
    while i > 2 and messages[i - 1].get("role") == "user":
        i -= 1
    return i


def boundaries(messages: list[dict[str, Any]], start: int) -> list[int]:
    """Where a cut may land after ``start``: each assistant message's index, then :func:`trailing_start`."""
    end = trailing_start(messages)
    return [i for i in range(start + 1, end) if messages[i].get("role") == "assistant"] + [end]


def call_ids(messages: list[dict[str, Any]], start: int, stop: int) -> list[str]:
    """Ids of the tool calls made by the assistant messages in ``messages[start:stop]``, in order."""
    return [str(tc.get("id")) for m in messages[start:stop] if m.get("role") == "assistant"
            for tc in m.get("tool_calls") or []]


def tool_names(messages: list[dict[str, Any]]) -> dict[str, str]:
    """Tool call id → the tool's name."""
    return {str(tc.get("id")): str((tc.get("function") or {}).get("name") or "tool")
            for m in messages if m.get("role") == "assistant" for tc in m.get("tool_calls") or []}


def head(question: dict[str, Any], note: str | None, tail: list[dict[str, Any]]) -> tuple[dict[str, Any], int]:
    """The question's message with ``note`` (and the user messages ``tail`` starts with) merged into it,
    and how many of ``tail``'s messages were merged."""
    if note is None:
        return question, 0
    parts = [str(question.get("content") or ""), note]
    n = 0
    while n < len(tail) and tail[n].get("role") == "user" and isinstance(tail[n].get("content"), str):
        parts.append(tail[n]["content"])
        n += 1
    return {**question, "content": "\n\n".join(parts)}, n


class Editing:
    """The base of every strategy but ``keep_all``: :attr:`cut`, :attr:`note` and :attr:`cleared` say what
    is sent (:meth:`compose`); a subclass says when it acts (:meth:`wants`) and what it does
    (:meth:`act`, which returns its edit: the calls it newly cleared, what it did, a model call's usage)."""

    def __init__(self, cfg: ContextConfig, model: ModelConfig):
        self.cfg, self.model_cfg = cfg, model
        self.name = cfg.label
        self.cut = 2
        """Index of the first kept message sent after the question (2: nothing dropped)."""
        self.note: str | None = None
        """Merged into the question's message once earlier steps were dropped."""
        self.cleared: set[str] = set()
        """Ids of tool calls whose results are sent as a placeholder."""
        self.workspace = False

    # --- to override ------------------------------------------------------------------------------------
    def wants(self, view: ContextView, over_trigger: bool) -> bool:
        """Whether to act on this request (default: once the prompt passes the trigger)."""
        return over_trigger

    def act(self, view: ContextView) -> ContextEdit:
        raise NotImplementedError

    # --- the shared part ----------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """Everything that decides what is sent (recorded with each edit, :meth:`restore`d by a resume)."""
        return {"cut": self.cut, "note": self.note, "cleared": sorted(self.cleared)}

    def restore(self, state: dict[str, Any]) -> None:
        """Take back a :meth:`state` (a resumed run, at the turn its edit was recorded)."""
        self.cut, self.note, self.cleared = int(state["cut"]), state.get("note"), set(state.get("cleared") or ())

    def compose(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """What is sent of ``messages`` in the current state."""
        if self.cut == 2 and self.note is None and not self.cleared:
            return messages
        names = tool_names(messages[self.cut:])
        tail = [{**m, "content": placeholder(names.get(str(m.get("tool_call_id")), "tool"), self.workspace)}
                if m.get("role") == "tool" and str(m.get("tool_call_id")) in self.cleared else m
                for m in messages[self.cut:]]
        question, merged = head(messages[1], self.note, tail)
        return [messages[0], question, *tail[merged:]]

    def limits(self, view: ContextView) -> tuple[int | None, int | None]:
        """``(trigger, fit)``: act past ``trigger`` estimated tokens; never send more than ``fit`` (None:
        the window is unknown)."""
        window = view.server.context_window if view.server is not None else None
        fit = window - self.model_cfg.context_margin - self.model_cfg.reply_floor if window else None
        trigger = self.cfg.trigger_tokens or (int(window * self.cfg.trigger) if window else None)
        if fit is not None:
            trigger = min(trigger, fit) if trigger is not None else fit
        return trigger, fit

    def drop_to(self, messages: list[dict[str, Any]], cut: int) -> list[str]:
        """Drop every step before ``cut`` (a :func:`boundaries` index); returns the calls newly cleared."""
        if cut <= self.cut:  # nothing more to drop: the note stays as it is
            return []
        dropped = [i for i in call_ids(messages, self.cut, cut) if i not in self.cleared]
        self.cleared.update(dropped)
        self.cut = cut
        if self.note is None:
            self.note = DROP_NOTE + (WORKSPACE_NOTE if self.workspace else "")
        return dropped

    def escalate(self, view: ContextView, fit: int,
                 sent: list[dict[str, Any]]) -> tuple[list[str], list[dict[str, Any]]]:
        """Drop the oldest steps still sent until the prompt fits ``fit`` tokens (or nothing is left)."""
        dropped: list[str] = []
        for b in boundaries(view.messages, self.cut):
            if view.measure(sent) <= fit:
                break
            dropped += self.drop_to(view.messages, b)
            sent = self.compose(view.messages)
        return dropped, sent

    def prepare(self, view: ContextView) -> Sent:
        self.workspace = has_workspace(view)
        state = (self.cut, self.note, len(self.cleared))
        sent = self.compose(view.messages)
        trigger, fit = self.limits(view)
        done = ContextEdit()
        if self.wants(view, trigger is not None and view.measure(sent) > trigger):
            done = self.act(view)
            sent = self.compose(view.messages)
        cleared, notes = list(done.cleared), [done.note]
        cut = self.cut
        if fit is not None and view.measure(sent) > fit:
            more, sent = self.escalate(view, fit, sent)
            cleared += more
            if self.cut != cut:
                notes.append(f"escalated: {len(more)} more call(s) dropped to fit the window")
        escalated = self.cut != cut
        if (self.cut, self.note, len(self.cleared)) == state and done.usage is None:
            return Sent(sent)
        return Sent(sent, ContextEdit(cleared, "; ".join(n for n in notes if n) or None, escalated, done.usage))
