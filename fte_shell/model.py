"""The model client: one OpenAI-compatible chat-completions endpoint, with our own retry loop.

``ModelClient(cfg).complete(messages, tools)`` sends the conversation with the paper's sampling defaults
(from :class:`~fte_shell.config.ModelConfig`), retries 429 / 5xx / timeouts / connection errors with
exponential backoff and jitter (a ``Retry-After`` header wins), and returns a :class:`Completion` whose
``message`` is a plain dict ready to be appended to the conversation.
"""

from __future__ import annotations

import email.utils
import json
import random
import time
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .config import ModelConfig
from .errors import ModelError

ENDPOINT_HELP = (
    "no model endpoint configured: give one with --base-url URL --model NAME (and --api-key if the server "
    "needs one), or a [model] table (base_url, model, api_key) in the --config TOML file, or the "
    "environment variables OPENAI_BASE_URL, OPENAI_MODEL and OPENAI_API_KEY. Any OpenAI-compatible server "
    "works (vLLM, llama.cpp, Ollama, DeepSeek, OpenAI); `fte-shell demo` runs without one."
)

PLACEHOLDER_API_KEY = "sk-no-key-required"
"""Sent to servers that need no key (the ``openai`` client refuses to start without one)."""

MAX_BACKOFF_S = 60.0
MAX_RETRY_AFTER_S = 300.0
RETRYABLE_STATUS = frozenset({408, 409, 429})


class Completion(BaseModel):
    """One assistant turn as the endpoint returned it."""

    model_config = ConfigDict(extra="forbid")

    message: dict[str, Any]
    """The assistant message: ``role``, ``content`` (str or None) and, when the model called tools,
    ``tool_calls`` = ``[{id, type, function: {name, arguments}}]``; ready to append to the conversation."""

    usage: dict[str, int] = Field(default_factory=dict)
    """``prompt_tokens``, ``completion_tokens``, ``total_tokens`` as the endpoint reported them (0 when
    it reported none)."""

    latency_s: float = 0.0
    """Seconds of the successful call (retries and backoff excluded)."""

    finish_reason: str | None = None
    """The endpoint's finish reason (``stop``, ``tool_calls``, ``length``…)."""

    reasoning: str | None = None
    """Reasoning text some servers return beside the content (``reasoning_content``); recorded but never
    sent back to the model."""

    attempts: int = 1
    """HTTP attempts this completion took (1 = no retry)."""


def resolve_endpoint(cfg: ModelConfig) -> tuple[str | None, str, str]:
    """Return ``(base_url, api_key, model)`` or raise :class:`ModelError` naming the ways to configure it.

    ``base_url`` None means the ``openai`` package's default (api.openai.com), allowed only when an API
    key is given."""
    key = cfg.api_key.get_secret_value() if cfg.api_key is not None else None
    if cfg.base_url is None and not key:
        raise ModelError(ENDPOINT_HELP)
    if not cfg.model:
        raise ModelError("no model name configured: " + ENDPOINT_HELP.split(": ", 1)[1])
    return cfg.base_url, key or PLACEHOLDER_API_KEY, cfg.model


def _retry_after_s(headers: Any) -> float | None:
    """Seconds from ``retry-after-ms`` / ``Retry-After`` (seconds or an HTTP date), or None."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class ModelClient:
    """Chat completions over the ``openai`` package with a retry loop of our own (the SDK's is off)."""

    def __init__(self, cfg: ModelConfig, *, sleep: Callable[[float], None] = time.sleep):
        import openai  # heavy import, done on first client only

        self.cfg = cfg
        self.base_url, api_key, self.model = resolve_endpoint(cfg)
        self._openai = openai
        self._sleep = sleep
        self._client = openai.OpenAI(
            base_url=self.base_url, api_key=api_key, timeout=cfg.timeout_s, max_retries=0
        )
        self.calls = 0
        """Successful completions so far."""
        self.retries = 0
        """Retries made so far (all calls together)."""

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` released the connection pool."""
        return bool(self._client.is_closed())

    def _request(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> dict[str, Any]:
        cfg = self.cfg
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": cfg.temperature,
            "top_p": cfg.top_p,
            "max_tokens": cfg.max_tokens,
            "presence_penalty": cfg.presence_penalty,
        }
        if tools:
            kwargs["tools"] = tools
        if cfg.extra_body:
            kwargs["extra_body"] = dict(cfg.extra_body)
        return kwargs

    def _delay(self, attempt: int, err: Exception) -> float:
        response = getattr(err, "response", None)
        after = _retry_after_s(getattr(response, "headers", None))
        if after is not None:
            return min(after, MAX_RETRY_AFTER_S)
        base = min(MAX_BACKOFF_S, self.cfg.backoff_s * (2**attempt))
        return base * (0.5 + random.random() / 2)  # jitter: 50-100 % of the exponential delay

    def _retryable(self, err: Exception) -> bool:
        oa = self._openai
        if isinstance(err, oa.APIConnectionError):  # includes APITimeoutError
            return True
        if isinstance(err, oa.APIStatusError):
            return err.status_code in RETRYABLE_STATUS or err.status_code >= 500
        return False

    def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        *,
        deadline: float | None = None,
    ) -> Completion:
        """One assistant turn. Raises :class:`ModelError` on a non-retryable error or after the last retry.

        ``deadline`` (a ``time.monotonic()`` instant, e.g. the end of a question's time budget) caps each
        attempt's timeout, and no retry is made whose backoff would pass it."""
        oa = self._openai
        kwargs = self._request(messages, tools)
        attempt = 0
        while True:
            t0 = time.monotonic()
            if deadline is not None:
                left = deadline - t0
                if left <= 0:
                    raise ModelError("model call not made: the time budget is spent")
                kwargs["timeout"] = min(self.cfg.timeout_s, left)
            try:
                resp = self._client.chat.completions.create(**kwargs)
            except oa.OpenAIError as err:
                if not self._retryable(err) or attempt >= self.cfg.max_retries:
                    tries = f" after {attempt + 1} attempts" if attempt else ""
                    raise ModelError(f"model call failed{tries}: {_describe(err)}") from err
                delay = self._delay(attempt, err)
                if deadline is not None and time.monotonic() + delay >= deadline:
                    raise ModelError(
                        f"model call failed and the time budget leaves no room to retry: {_describe(err)}"
                    ) from err
                attempt += 1
                self.retries += 1
                self._sleep(delay)
                continue
            latency = time.monotonic() - t0
            self.calls += 1
            return _to_completion(resp, latency, attempt + 1, self.calls)


def _describe(err: Exception) -> str:
    status = getattr(err, "status_code", None)
    text = str(err).strip().replace("\n", " ")
    if len(text) > 300:
        text = text[:300] + "…"
    name = err.__class__.__name__
    return f"{name} (HTTP {status}): {text}" if status else f"{name}: {text}"


def _to_completion(resp: Any, latency: float, attempts: int, n: int) -> Completion:
    """Normalize a chat-completions response. Tool calls without an id get ``call_<n>_<index>`` (some
    servers send none, and the tool messages must name one); non-string arguments are JSON-encoded."""
    if not getattr(resp, "choices", None):
        raise ModelError(f"model response has no choices: {str(resp)[:300]}")
    choice = resp.choices[0]
    msg = choice.message
    message: dict[str, Any] = {"role": "assistant", "content": msg.content}
    calls = []
    for i, tc in enumerate(msg.tool_calls or []):
        fn = getattr(tc, "function", None)
        if fn is None:
            continue
        args = fn.arguments
        if args is None:
            args = ""
        elif not isinstance(args, str):
            args = json.dumps(args, ensure_ascii=False)
        calls.append({"id": tc.id or f"call_{n}_{i}", "type": "function", "function": {"name": fn.name, "arguments": args}})
    if calls:
        message["tool_calls"] = calls
    extra = getattr(msg, "model_extra", None) or {}
    reasoning = extra.get("reasoning_content") or extra.get("reasoning")
    u = resp.usage
    usage = {
        "prompt_tokens": int(getattr(u, "prompt_tokens", 0) or 0),
        "completion_tokens": int(getattr(u, "completion_tokens", 0) or 0),
        "total_tokens": int(getattr(u, "total_tokens", 0) or 0),
    }
    return Completion(
        message=message,
        usage=usage,
        latency_s=latency,
        finish_reason=choice.finish_reason,
        reasoning=reasoning if isinstance(reasoning, str) else None,
        attempts=attempts,
    )
