"""Typed model-endpoint errors and how a server's refusal is classified.

Each subclass of :class:`~fte_shell.errors.ModelError` names the stop reason (``fte_shell.stops``) the loop
ends with when it is raised. :data:`OVERFLOW_PATTERNS` is the one table of the texts servers use to say
"the conversation no longer fits the context window", each with its source.
"""

from __future__ import annotations

import re

from ..errors import ModelError


class ModelCallError(ModelError):
    """A model call failed. ``stop_reason`` is the run's stop reason; ``status`` the HTTP status (if any);
    ``body`` the server's error text, whole."""

    stop_reason = "model_error"

    def __init__(self, message: str, *, status: int | None = None, body: str = "", attempts: int = 1):
        super().__init__(message)
        self.status = status
        self.body = body
        self.attempts = attempts


class ContextOverflow(ModelCallError):
    """The conversation does not fit the context window (the server said so, or too little room is left
    for a reply). Never retried."""

    stop_reason = "context_overflow"


class EndpointUnavailable(ModelCallError):
    """Connection errors, timeouts, 429 and 5xx after the retries (or the per-call time cap)."""

    stop_reason = "endpoint_unavailable"


class AuthFailed(ModelCallError):
    """HTTP 401/403: the API key is missing, wrong or not allowed this model."""

    stop_reason = "auth"


class BadRequest(ModelCallError):
    """Another 4xx (or the same 500 body twice: a deterministic refusal), with the server's message."""

    stop_reason = "bad_request"


OVERFLOW_PATTERNS: tuple[tuple[str, str], ...] = (
    # OpenAI: 400 with error.code "context_length_exceeded" (also used by Azure OpenAI and many proxies)
    (r"context_length_exceeded", "OpenAI API error codes"),
    # vLLM: "This model's maximum context length is N tokens. However, you requested M output tokens and
    # your prompt contains at least P input tokens…" / "…input tokens plus 'max_tokens'" (vllm#20409, #33425)
    (r"maximum context length is \d+ tokens", "vLLM serving_engine (vllm#20409, #33425)"),
    # llama.cpp server: 400 type exceed_context_size_error, "request (N tokens) exceeds the available
    # context size (M tokens), try increasing it" (tools/server/server.cpp)
    (r"exceed_context_size_error|exceeds the available context size", "llama.cpp server"),
    # llama-cpp-python: "Requested tokens (N) exceed context window of M" (llama_cpp/llama.py)
    (r"exceed context window of \d+", "llama-cpp-python"),
    # DeepSeek: 400 invalid_request_error "This model's maximum context length is 131072 tokens. However,
    # you requested … tokens" (same wording as OpenAI's legacy text; DeepSeek API error docs)
    (r"model's maximum context length", "DeepSeek / OpenAI legacy wording"),
    # SGLang: "Requested token count exceeds the model's maximum context length of N tokens…" (matched above) and
    # "The input (N tokens) is longer than the model's context length (M tokens)." (sglang tokenizer_manager)
    (r"is longer than the model's context length", "SGLang tokenizer_manager"),
    # Anthropic-compatible and other gateways: "prompt is too long", "input is too long for requested model"
    (r"prompt is too long|input is too long|context window exceeded|too many tokens", "gateways (LiteLLM, OpenRouter)"),
)

_OVERFLOW_RE = re.compile("|".join(f"(?:{p})" for p, _ in OVERFLOW_PATTERNS), re.IGNORECASE)


def is_overflow_text(text: str) -> bool:
    """True when a server's error text says the context window is exceeded (see :data:`OVERFLOW_PATTERNS`)."""
    return bool(_OVERFLOW_RE.search(text or ""))


def classify_status(status: int, body: str) -> type[ModelCallError]:
    """The error class of a refused request (no retry decided here)."""
    if is_overflow_text(body):
        return ContextOverflow
    if status in (401, 403):
        return AuthFailed
    if 400 <= status < 500 and status not in (408, 409, 429):
        return BadRequest
    return EndpointUnavailable
