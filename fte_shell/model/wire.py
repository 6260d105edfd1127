"""The seam between :class:`~fte_shell.model.client.ModelClient` and a wire API: :class:`WireApi`.

The loop, the judges and every other caller speak chat-completions messages and tool schemas whatever
the endpoint speaks; a wire API converts them at the wire. One implementation per ``model.api``, chosen
once when the client is made (``client.WIRE_APIS``):

- ``chat``: ``POST /chat/completions`` (:class:`~fte_shell.model.chat.ChatCompletions`, module :mod:`.chat`);
- ``responses``: OpenAI's ``POST /responses`` (:class:`~fte_shell.model.responses.ResponsesApi`, module
  :mod:`.responses`).

The client paces, retries, classifies the errors and counts; the wire API builds the request, sends it
through the ``openai`` client (raising the SDK's errors as they come) and reads the reply into a
:class:`~fte_shell.model.completion.Completion` (the message, usage in the chat-completions shape, the
reasoning, the opaque fields to send back, the finish reason and the parameters sent).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..config import ModelConfig
from .completion import Completion
from .window import ServerKind

CONVERSATION_FIELDS = ("messages", "input", "tools")
"""Request fields not recorded in :attr:`Completion.params` (the conversation and the tool schemas: the
trajectory has them already; the tools are recorded by name)."""


@dataclass(frozen=True)
class Channel:
    """What a wire API sends through: given by the model client once, when it is made."""

    cfg: ModelConfig
    """The ``[model]`` table (sampling defaults, ``extra_body``, reasoning settings)."""
    model: str
    """The model name sent."""
    client: Any
    """The ``openai.OpenAI`` client (its own retries off: the model client retries)."""
    api_key: str = field(repr=False)
    """The key sent (a placeholder for servers that need none; never in the repr)."""
    kind: Callable[[], ServerKind]
    """The server kind (probed on first use, then cached: ``ModelClient.server_info``)."""


@dataclass(frozen=True)
class Ask:
    """What one model call asks, in the chat-completions form every caller speaks: made once per call by
    :meth:`ModelClient.complete <fte_shell.model.client.ModelClient.complete>`, turned into a
    :class:`WireRequest` by the wire API."""

    messages: list[dict[str, Any]]
    """The conversation (chat-completions messages)."""
    tools: list[dict[str, Any]] | None
    """The chat tool schemas offered (None or empty: no tools)."""
    tool_choice: str | dict[str, Any] | None
    """The call forced (``"required"`` or a named function), or None: the model's choice."""
    max_tokens: int | None
    """This call's output limit (None: ``model.max_tokens``)."""
    temperature: float | None
    """This call's temperature (None: ``model.temperature``)."""


@dataclass(frozen=True)
class WireRequest:
    """One request as a wire API built it."""

    fields: dict[str, Any]
    """What is sent: the request's fields, ``extra_body`` kept apart (merged into the body when sent)."""
    params: dict[str, Any]
    """What is recorded (:attr:`Completion.params`): the fields but the conversation and the tool schemas,
    and the tools' names."""

    @classmethod
    def of(cls, fields: dict[str, Any], tools: list[dict[str, Any]] | None) -> WireRequest:
        """``fields`` with the parameters recorded of them (``tools`` the chat tool schemas asked for)."""
        params = {k: v for k, v in fields.items() if k not in CONVERSATION_FIELDS}
        if tools:
            params["tools"] = [t.get("function", {}).get("name") for t in tools]
        return cls(fields, params)


class WireApi(Protocol):
    """One wire API: a chat-completions conversation in, a :class:`Completion` out."""

    def request(self, ask: Ask) -> WireRequest:
        """The request for this call (its ``max_tokens``/``temperature`` None: the config's)."""
        ...

    def send(self, request: WireRequest, timeout: float | None) -> Any:
        """Send it once (``timeout`` None: ``model.timeout_s``) and return the reply as the wire gave it.
        Raises the ``openai`` package's errors as they come (the client retries and classifies them), or a
        :class:`~fte_shell.model.errors.ModelCallError` for a reply that is no reply at all."""
        ...

    def reported_tokens(self, reply: Any) -> int:
        """The total tokens the server reported for the reply (0 when it reported none)."""
        ...

    def read(self, reply: Any, request: WireRequest, latency: float, attempts: int, n: int) -> Completion:
        """The reply as a :class:`Completion` (``n``: the client's call number, for tool call ids the server
        left out). Raises :class:`~fte_shell.model.errors.EndpointUnavailable` for a reply without a turn."""
        ...
