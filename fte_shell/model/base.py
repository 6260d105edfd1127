"""The :class:`Model` protocol: what the agent loop and one-shot callers need of a model.

:class:`~fte_shell.model.client.ModelClient` is the implementation (an OpenAI-compatible endpoint); the
loop and the profiles are typed against this protocol, so another client plugs in without ``getattr``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from .completion import Completion
from .window import ServerInfo

RetryListener = Callable[[dict[str, Any]], None]
"""Gets ``{attempt, error, delay_s, endpoint}`` before each retry of a model call."""


class Model(Protocol):
    """A model that takes a chat-completions conversation and tool schemas, whatever its wire API (chat
    completions, or the Responses API converted at the wire: :mod:`.responses`)."""

    def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        *,
        deadline: float | None = None,
        tool_choice: str | dict[str, Any] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        on_retry: RetryListener | None = None,
    ) -> Completion:
        """One assistant turn (raises a :class:`~fte_shell.model.errors.ModelCallError` subclass)."""
        ...

    def ask(
        self,
        prompt: str | list[dict[str, Any]],
        *,
        system: str | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        deadline: float | None = None,
        on_retry: RetryListener | None = None,
    ) -> Completion:
        """A one-shot question without tools; the reply text is ``.text``."""
        ...

    def server_info(self) -> ServerInfo:
        """The context window and server kind (probed once, cached)."""
        ...

    def close(self) -> None:
        """Release the connection pool."""
        ...
