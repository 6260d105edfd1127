"""``[model]``: an OpenAI-compatible chat-completions endpoint and its sampling parameters."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, SecretStr

from .base import StrictModel
from .budget import ModelPrice


class ModelConfig(StrictModel):
    """An OpenAI-compatible chat-completions endpoint (vLLM, llama.cpp, Ollama, DeepSeek, OpenAI)."""

    base_url: str | None = None
    """Endpoint base URL, e.g. ``http://127.0.0.1:8000/v1``; defaults to ``OPENAI_BASE_URL``."""

    api_key: SecretStr | None = None
    """API key; defaults to ``OPENAI_API_KEY`` (a placeholder is sent to servers that need none)."""

    model: str | None = None
    """Model name as the endpoint knows it; defaults to ``OPENAI_MODEL``."""

    api: Literal["chat", "responses"] = "chat"
    """The wire API: ``chat`` = ``POST /chat/completions`` (every OpenAI-compatible server); ``responses`` =
    OpenAI's Responses API (``POST /responses``), where reasoning models keep their reasoning across tool
    calls as reasoning items sent back in order (docs/run.md, "Responses API")."""

    store: bool = False
    """Responses API: let the server store each response (``store``). False: nothing is kept server-side
    and the reasoning goes back as its encrypted content (``include: ["reasoning.encrypted_content"]``)."""

    reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = None
    """Reasoning effort asked of a reasoning model: ``reasoning.effort`` on the Responses API,
    ``reasoning_effort`` on chat completions. None = the server's default (nothing sent). On the Responses API
    an effort other than ``none`` also leaves ``temperature`` and ``top_p`` out (reasoning models refuse them)."""

    temperature: float = 1.0
    """Sampling temperature (the paper's 1.0)."""

    top_p: float = 0.95
    """Nucleus sampling (the paper's 0.95)."""

    max_tokens: int = 16384
    """Completion token cap per call (the paper's 16384)."""

    presence_penalty: float = 0.0
    """Presence penalty (the paper's 0.0)."""

    timeout_s: float = 600.0
    """Timeout of one HTTP attempt of a model call (the read timeout of a generation)."""

    max_retries: int = 6
    """Retries on 429, 5xx, connection errors and timeouts, with exponential backoff and jitter (the same
    500 body twice is a deterministic refusal and stops retrying; 4xx are never retried)."""

    timeout_retries: int = Field(default=1, ge=0)
    """Retries of a call whose attempt timed out (a runaway generation is not restarted again and again)."""

    call_time_cap_s: float | None = Field(default=1800.0, gt=0)
    """Wall-clock cap on ALL attempts and backoffs of one model call; past it the run stops with
    ``endpoint_unavailable``. None = no cap (``agent.time_budget_s`` still caps it)."""

    backoff_s: float = 1.0
    """First backoff delay; doubles per retry (capped at 60 s)."""

    extra_body: dict[str, Any] = Field(default_factory=dict)
    """Extra fields merged into every request body (e.g. vLLM's ``chat_template_kwargs``)."""

    reasoning_passback: Literal["auto", "always", "never"] = "auto"
    """Reasoning text sent back on the assistant messages of the conversation: ``auto`` = when the server
    returned some, under the wire name it used (``reasoning_content`` for DeepSeek, Kimi, llama.cpp;
    ``reasoning`` for vLLM ≥ 0.16) — what DeepSeek and Kimi require on tool-call turns; ``always`` = on every
    assistant message, ``""`` when there was none (Kimi K2 thinking); ``never`` = not sent back."""

    server: str | None = None
    """The server kind, when discovery cannot tell (a proxy in front of it): a name of the table of server
    kinds (``sglang``, ``vllm``, ``openrouter``, ``llama-cpp-python``, ``llama.cpp``, ``ollama``; docs/run.md).
    None = found by probing the endpoint."""

    thinking: bool | None = None
    """Switch the model's thinking on or off the way the server kind takes it (vLLM, SGLang, llama.cpp:
    ``chat_template_kwargs`` ``enable_thinking``, or ``thinking`` for DeepSeek-V3.x models; SGLang also
    ``separate_reasoning``; OpenRouter: ``reasoning.enabled``). None = the server's default, nothing sent."""

    parse_text_tool_calls: bool = False
    """Execute tool calls the server left as text in ``content`` or the reasoning (``<tool_call>{…}``,
    ``<function=…>``, a JSON object naming a tool). Off: they are only recorded (``text_tool_call``
    events); the paper uses native tool calls only."""

    context_window: int | None = Field(default=None, gt=0)
    """Tokens of the model's context window (prompt + reply). None = ask the server (vLLM ``/v1/models``
    ``max_model_len``, llama.cpp ``/props`` ``n_ctx`` per slot, Ollama ``num_ctx``), else unknown."""

    context_margin: int = Field(default=256, ge=0)
    """Tokens kept free beside the prompt estimate when ``max_tokens`` is fitted to the window (the
    estimate is the last ``usage.prompt_tokens`` plus a third of the new messages' characters)."""

    min_reply_tokens: int = Field(default=512, ge=1)
    """When the window leaves fewer tokens than this (or than ``max_tokens`` when that is smaller: a reply
    needs no more room than it may use) for the reply, the run stops with ``context_overflow`` (or asks for
    a final answer, see ``agent.on_context_overflow``)."""

    price: ModelPrice | None = None
    """``[model.price]``: USD per million tokens (``input``, ``cached_input``, ``output``). None = the
    built-in table's price of ``model`` (fte_shell/model/prices.py), else unknown (tokens only)."""

    rpm: int | None = Field(default=None, gt=0)
    """Requests per minute this process may send to the endpoint (a client-side limiter shared by all
    threads; on a Ray cluster each run gets its share, docs/run.md "Rate limits"). None = no limit."""

    tpm: int | None = Field(default=None, gt=0)
    """Tokens per minute (prompt + completion) this process may spend at the endpoint; the prompt is
    estimated before a call and corrected by the reported usage after it. None = no limit."""

    @property
    def reply_floor(self) -> int:
        """The fewest tokens the window must leave for the reply: ``min(min_reply_tokens, max_tokens)``."""
        return min(self.min_reply_tokens, self.max_tokens)
