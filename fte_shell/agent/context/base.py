"""Between the kept conversation and what is sent: the :class:`ContextPolicy` seam and the token estimate
of a request.

Each turn the loop asks its policy what to send: the policy gets a :class:`ContextView` (the kept
conversation, the tools, the turn, the server's window, the estimated prompt tokens of sending it all, the
episode and the model) and returns a :class:`Sent` (the messages to send, and a :class:`ContextEdit`
when it changed what it sends: the loop records it as a ``context_edit`` event). A policy never changes
the kept conversation or its messages (it returns new lists and new message dicts); it may keep state
across turns (one policy object per run). :class:`KeepAll` (``keep_all``: everything, every turn —
requests identical to the loop's before the seam existed) is here; the other strategies are in
:mod:`.clearing` and :mod:`.reset`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ...model import Model, ServerInfo
from ..replies import estimate_tokens

if TYPE_CHECKING:
    from ...episode import Episode


@dataclass(frozen=True)
class ContextView:
    """What a policy sees before one request."""

    messages: list[dict[str, Any]]
    """The kept conversation (system prompt, question, every reply, observation and notice so far)."""
    tools: list[dict[str, Any]]
    """The tool schemas sent with the request ([] for the final-answer request)."""
    turn: int
    """The turn the request is for."""
    server: ServerInfo | None
    """The model server's info (``context_window``), when known."""
    estimate: int
    """Estimated prompt tokens of sending :attr:`messages` whole (:func:`estimate_request`)."""
    episode: Episode
    """The episode (its workspace, its tools)."""
    model: Model
    """The agent's model client (e.g. for a summary through ``ModelClient.ask``)."""
    last_sent: list[dict[str, Any]] = field(default_factory=list)
    """The messages of the last successful request (what :meth:`measure` calibrates on)."""
    last_prompt: int | None = None
    """The server's ``prompt_tokens`` of that request (None: not reported, or no request yet)."""

    def measure(self, messages: list[dict[str, Any]]) -> int:
        """Estimated prompt tokens of sending ``messages`` with :attr:`tools` (:func:`estimate_request`)."""
        return estimate_request(messages, self.tools, self.last_sent, self.last_prompt)


@dataclass(frozen=True)
class ContextEdit:
    """How a policy's messages differ from the kept conversation."""

    cleared: list[str] = field(default_factory=list)
    """Ids of the tool calls whose results were cleared or dropped."""
    note: str | None = None
    """What the policy did, in a few words."""
    escalated: bool = False
    """The strategy's own edit left the prompt over the window, so more was dropped (oldest steps first)."""
    usage: dict[str, int] | None = None
    """Token usage of a model call the edit made (``summary``'s), counted apart from the agent's."""


@dataclass(frozen=True)
class Sent:
    """What a policy sends: the messages, and the edit when they are not the kept conversation."""

    messages: list[dict[str, Any]]
    edit: ContextEdit | None = None


class ContextPolicy(Protocol):
    """What the loop sends of the kept conversation."""

    name: str
    """The strategy's label (``keep_recent:5``; recorded with each edit)."""

    def prepare(self, view: ContextView) -> Sent:
        """The messages to send for the request ``view`` describes."""
        ...


class KeepAll:
    """``keep_all``: the whole kept conversation, every turn."""

    name = "keep_all"

    def prepare(self, view: ContextView) -> Sent:
        return Sent(view.messages)


def estimate_request(messages: list[dict[str, Any]], tools: list[dict[str, Any]], last_sent: list[dict[str, Any]],
                     last_prompt: int | None) -> int:
    """Estimated prompt tokens of a request: the server's ``prompt_tokens`` of the last request plus an
    estimate of what was appended since, when ``messages`` starts with exactly the messages of the last
    request; otherwise (an edited conversation) an estimate of the whole request, tool schemas included
    (:func:`~fte_shell.agent.replies.estimate_tokens`), scaled by how the server counted the last request
    against the same estimate of it — so the kept conversation and an edit of it are measured alike (an
    unscaled estimate of an edit can exceed the calibrated size of what it was cut from); unscaled when
    there is no last request or its usage was not reported."""
    n = len(last_sent)
    if last_prompt is not None and n <= len(messages) and messages[:n] == last_sent:
        return last_prompt + estimate_tokens(messages[n:])
    whole = estimate_tokens(messages, tools or None)
    if last_prompt is not None and last_sent and (base := estimate_tokens(last_sent, tools or None)) > 0:
        return math.ceil(whole * last_prompt / base)
    return whole


def policy_state(policy: ContextPolicy) -> dict[str, Any] | None:
    """A policy's whole state (``state()``: the editing strategies), recorded with each edit; None for a
    policy without one (``keep_all``, or a policy of the caller's)."""
    state = getattr(policy, "state", None)
    return state() if callable(state) else None


def restore_policy(policy: ContextPolicy, state: dict[str, Any] | None) -> bool:
    """Give a policy back a recorded :func:`policy_state` (a resumed run); False when it cannot take one."""
    restore = getattr(policy, "restore", None)
    if state is None or not callable(restore):
        return False
    restore(state)
    return True


def composed(policy: ContextPolicy, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What ``policy`` sends of ``messages`` in its current state without acting (``compose``; the whole
    conversation for a policy without one): a resumed run's record of what each replayed turn sent."""
    compose = getattr(policy, "compose", None)
    return list(compose(messages)) if callable(compose) else list(messages)

