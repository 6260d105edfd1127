"""What a model call returns: :class:`Completion` (one assistant turn as the endpoint sent it, whatever the
wire API: each reads its replies into one, :mod:`.chat` and :mod:`.responses`), and what every wire API
keeps of a reply: reasoning fields, opaque fields, inline thinking."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

REASONING_FIELDS = ("reasoning_content", "reasoning")
"""Wire names of reasoning text beside the content: DeepSeek, Kimi, llama.cpp and older vLLM send
``reasoning_content``; vLLM ≥ 0.16 sends (and on input reads only) ``reasoning`` (vllm#38488)."""


OUTPUT_ITEMS = "output_items"
"""The assistant message's key holding a Responses API reply's whole ``output`` array (reasoning items with
their ``encrypted_content``, messages, function calls), to be sent back item for item (model/responses.py)."""

OPAQUE_FIELDS = ("reasoning_details", OUTPUT_ITEMS)
"""Fields of the server's assistant message kept byte for byte in the trajectory and sent back unchanged on
the kept message: OpenRouter's ``reasoning_details`` (``reasoning.text`` with a ``signature``,
``reasoning.summary``, ``reasoning.encrypted`` with ``data``), refused when dropped or altered (Gemini: 400
"reasoning details must be preserved"; signed Anthropic reasoning); the Responses API's output items,
refused when a reasoning item is dropped, moved or altered (:data:`OUTPUT_ITEMS`)."""

_THINK = re.compile(r"\A\s*(?:<think>)?(.*?)</think>", re.DOTALL)


def split_think(content: str | None) -> tuple[str | None, str]:
    """``(reasoning, rest)`` of a content that holds its thinking inline: ``<think>…</think>`` at its start, or
    text closed by ``</think>`` without an opening tag (DeepSeek-R1's template opens it in the prompt);
    ``(None, content)`` when there is none."""
    text = content if isinstance(content, str) else ""
    m = _THINK.match(text)
    if m is None or "<think>" in m.group(1):
        return None, text
    return m.group(1).strip(), text[m.end():]


class Completion(BaseModel):
    """One assistant turn as the endpoint returned it."""

    model_config = ConfigDict(extra="forbid")

    message: dict[str, Any]
    """The assistant message as the server sent it: ``role``, ``content`` (str or None) and, when the
    model called tools, ``tool_calls`` = ``[{id, type, function: {name, arguments}}]`` (arguments as the
    raw text the server sent). The loop derives the message it keeps in the conversation from it. From the
    Responses API it is read out of the output items, which it carries whole (:data:`OUTPUT_ITEMS`)."""

    usage: dict[str, int] = Field(default_factory=dict)
    """``prompt_tokens``, ``completion_tokens``, ``total_tokens`` (0 when the endpoint reported none)."""

    usage_details: dict[str, Any] = Field(default_factory=dict)
    """The response's whole ``usage`` object (reasoning and cached tokens when the server reports them)."""

    latency_s: float = 0.0
    """Seconds of the successful attempt (retries and backoff excluded)."""

    finish_reason: str | None = None
    """The endpoint's finish reason (``stop``, ``tool_calls``, ``length``…)."""

    reasoning: str | None = None
    """Reasoning text the server returned beside the content, or None."""

    reasoning_fields: list[str] = Field(default_factory=list)
    """The wire names the reasoning came under (``reasoning_content`` and/or ``reasoning``)."""

    reasoning_inline: bool = False
    """The reasoning came inside ``content`` as ``<think>…</think>`` (no reasoning field): the content is
    kept and sent back whole; :attr:`text` (answers, tool calls written as text) is what follows it."""

    attempts: int = 1
    """HTTP attempts this completion took (1 = no retry)."""

    params: dict[str, Any] = Field(default_factory=dict)
    """The request parameters actually sent (model, sampling, ``max_tokens``, ``tool_choice``,
    ``extra_body``, tool names; not the messages)."""

    response: dict[str, Any] = Field(default_factory=dict)
    """The response's ``id``, ``model`` and ``system_fingerprint``."""

    @property
    def text(self) -> str:
        """The reply's content text (``""`` when the server sent none), after its inline thinking."""
        content = self.message.get("content")
        if not isinstance(content, str):
            return ""
        return split_think(content)[1] if self.reasoning_inline else content
