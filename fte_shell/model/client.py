"""The model client: one OpenAI-compatible endpoint behind its wire API (:mod:`.wire`: chat completions,
:mod:`.chat`, or OpenAI's Responses API with ``model.api = "responses"``, :mod:`.responses`; chosen once,
when the client is made), with our own pacing, retry loop and error classes for both.

``ModelClient(cfg).complete(messages, tools)`` sends the conversation with the paper's sampling defaults
(from :class:`~fte_shell.config.ModelConfig`) and returns a :class:`Completion` (the message as the server
sent it, the parameters actually sent, the response's id/model/fingerprint and full usage);
``ModelClient(cfg).ask(prompt)`` is the one-shot form (no tools; the judge, the WideSearch aligner and the
visit-summary reader), whose reply text is ``.text``. Both take per-call ``max_tokens`` and ``temperature``.

Retries (each one reported to ``on_retry``): connection errors, 408/409/429 and 5xx with exponential
backoff and jitter (a ``Retry-After`` header wins), up to ``model.max_retries``; a read timeout at most
``model.timeout_retries`` times (a runaway generation is not restarted blindly); all attempts of one call
within ``model.call_time_cap_s``. The same 500 body twice is a deterministic refusal (no more retries).
Each attempt first waits for ``model.rpm``/``model.tpm`` and any ``Retry-After`` another thread was given
(:mod:`.ratelimit`, shared by the process's clients of the endpoint).
Failures are typed (:mod:`fte_shell.model.errors`): :class:`ContextOverflow`, :class:`AuthFailed` and
:class:`BadRequest` are never retried; :class:`EndpointUnavailable` is what is left after the retries.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from ..config import ModelConfig
from ..errors import ModelError
from ..retry_after import retry_after_s
from .base import RetryListener
from .chat import ChatCompletions
from .completion import Completion
from .errors import BadRequest, EndpointUnavailable, ModelCallError, classify_status
from .ratelimit import estimate_request_tokens, pacer_for
from .responses import ResponsesApi
from .window import ServerInfo, ServerKind, discover, kind_named
from .wire import Ask, Channel, WireApi

ENDPOINT_HELP = (
    "no model endpoint configured: give one with --base-url URL --model NAME (and --api-key if the server "
    "needs one), or a [model] table (base_url, model, api_key) in the --config TOML file, or the "
    "environment variables OPENAI_BASE_URL, OPENAI_MODEL and OPENAI_API_KEY. Any OpenAI-compatible server "
    "works (vLLM, SGLang, OpenRouter, llama.cpp, Ollama, DeepSeek, OpenAI); `fte-shell demo` runs without one."
)

PLACEHOLDER_API_KEY = "sk-no-key-required"
"""Sent to servers that need no key (the ``openai`` client refuses to start without one)."""

MAX_BACKOFF_S = 60.0
MAX_RETRY_AFTER_S = 300.0
TRANSIENT_5XX = frozenset({502, 503, 504})
"""5xx statuses always retried (a proxy or an overloaded server); any other 5xx whose body repeats is a
deterministic refusal (llama-cpp-python answers a message it cannot validate with 500)."""

WIRE_APIS: dict[str, Callable[[Channel], WireApi]] = {"chat": ChatCompletions, "responses": ResponsesApi}
"""The wire API of each ``model.api`` (:mod:`.wire`)."""


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


class ModelClient:
    """A model endpoint over the ``openai`` package, through its wire API (:attr:`wire`), with a retry loop
    of our own (the SDK's is off)."""

    def __init__(self, cfg: ModelConfig, *, sleep: Callable[[float], None] = time.sleep):
        import openai  # heavy import, done on first client only

        self.cfg = cfg
        self.base_url, self._api_key, self.model = resolve_endpoint(cfg)
        self._openai = openai
        self._sleep = sleep
        self._client = openai.OpenAI(
            base_url=self.base_url, api_key=self._api_key, timeout=cfg.timeout_s, max_retries=0
        )
        self._info: ServerInfo | None = None
        self.wire: WireApi = WIRE_APIS[cfg.api](Channel(cfg, self.model, self._client, self._api_key, self._kind))
        """How requests are built, sent and read (``model.api``)."""
        self.pacer = pacer_for(self.endpoint, self.model, cfg.rpm, cfg.tpm)
        """``model.rpm``/``model.tpm`` and the 429 signal, shared with this process's other clients of the
        endpoint (:mod:`.ratelimit`)."""
        self.calls = 0
        """Successful completions so far."""
        self.retries = 0
        """Retries made so far (all calls together)."""

    @property
    def endpoint(self) -> str:
        """The base URL this client talks to (for messages)."""
        return self.base_url or "https://api.openai.com/v1"

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` released the connection pool."""
        return bool(self._client.is_closed())

    def server_info(self) -> ServerInfo:
        """The context window and server kind (probed once, then cached; see :mod:`.window`)."""
        if self._info is None:
            self._info = discover(self.base_url, self._api_key, self.model, self.cfg.context_window, self.cfg.server)
            if self.cfg.thinking is not None and kind_named(self._info.server).thinking is None:
                self._info.warnings.append(
                    f"model.thinking is set but the server kind ({self._info.server or 'unknown'}) has no thinking "
                    "switch: nothing is sent (give the server's own field in model.extra_body)")
        return self._info

    def _kind(self) -> ServerKind:
        return kind_named(self.server_info().server)

    def _delay(self, attempt: int, err: Exception) -> float:
        response = getattr(err, "response", None)
        after = retry_after_s(getattr(response, "headers", None))
        if after is not None:
            return min(after, MAX_RETRY_AFTER_S)
        base = min(MAX_BACKOFF_S, self.cfg.backoff_s * (2**attempt))
        return base * (0.5 + random.random() / 2)  # jitter: 50-100 % of the exponential delay

    def _final_error(self, err: Exception, what: str, attempt: int, timeouts: int, body: str | None,
                     last_body: str | None) -> ModelCallError | None:
        """The error that ends the call after ``err`` failed attempt ``attempt`` (0-based; ``timeouts`` read
        timeouts so far, ``body`` its response body, ``last_body`` the previous one), or None to retry."""
        oa, cfg = self._openai, self.cfg
        if isinstance(err, oa.APITimeoutError):
            if timeouts > cfg.timeout_retries or attempt >= cfg.max_retries:
                return EndpointUnavailable(
                    f"model call to {self.endpoint} timed out {timeouts} time(s) "
                    f"(model.timeout_s = {cfg.timeout_s:g} s, retried at most {cfg.timeout_retries}): {what}",
                    attempts=attempt + 1)
        elif isinstance(err, oa.APIConnectionError):
            if attempt >= cfg.max_retries:
                return EndpointUnavailable(
                    f"model endpoint {self.endpoint} unreachable after {attempt + 1} attempt(s): {what}",
                    attempts=attempt + 1)
        elif isinstance(err, oa.APIStatusError):
            status = err.status_code
            cls = classify_status(status, body or "")
            if cls is not EndpointUnavailable:
                return cls(f"model call refused by {self.endpoint}: {what}", status=status, body=body,
                           attempts=attempt + 1)
            if status >= 500 and status not in TRANSIENT_5XX and body == last_body:
                return BadRequest(
                    f"model call refused by {self.endpoint} with the same HTTP {status} body twice "
                    f"(a deterministic error, not retried further): {what}",
                    status=status, body=body, attempts=attempt + 1)
            if attempt >= cfg.max_retries:
                return EndpointUnavailable(
                    f"model call to {self.endpoint} failed after {attempt + 1} attempts: {what}",
                    status=status, body=body, attempts=attempt + 1)
        else:
            return ModelCallError(f"model call to {self.endpoint} failed: {what}", attempts=attempt + 1)
        return None

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
        """One assistant turn. Raises a :class:`ModelCallError` subclass on a refusal or after the retries.

        ``max_tokens`` and ``temperature`` replace ``model.max_tokens`` / ``model.temperature`` for this call
        (the values sent are in :attr:`Completion.params`). ``deadline`` (a ``time.monotonic()`` instant,
        e.g. the end of a question's time budget) caps each attempt's timeout, and no retry is made whose
        backoff would pass it; ``model.call_time_cap_s`` bounds all attempts of this call the same way.
        ``on_retry`` gets ``{attempt, error, delay_s, endpoint}`` before each retry."""
        oa = self._openai
        cfg = self.cfg
        request = self.wire.request(Ask(messages, tools, tool_choice, max_tokens, temperature))
        start = time.monotonic()
        limit = start + cfg.call_time_cap_s if cfg.call_time_cap_s is not None else None
        budget_first = deadline is not None and (limit is None or deadline <= limit)
        if deadline is not None:
            limit = deadline if limit is None else min(limit, deadline)
        attempt, timeouts, last_body, cooled = 0, 0, None, 0.0
        tokens = estimate_request_tokens(messages, tools) if self.pacer.tpm is not None else 0
        while True:
            slot = self.pacer.wait(tokens, limit, cooled)
            if slot is None:
                raise (ModelError("model call not made: the time budget is spent waiting for model.rpm/tpm")
                       if budget_first else EndpointUnavailable(
                           f"model call to {self.endpoint} not made: model.call_time_cap_s passes while waiting "
                           f"for model.rpm/model.tpm", attempts=attempt))
            t0 = time.monotonic()
            timeout = None
            if limit is not None:
                left = limit - t0
                if left <= 0:
                    if budget_first:
                        raise ModelError("model call not made: the time budget is spent")
                    raise EndpointUnavailable(
                        f"model call to {self.endpoint} gave up: model.call_time_cap_s ({cfg.call_time_cap_s:g} s) "
                        f"spent after {attempt} attempt(s)", attempts=attempt)
                timeout = min(cfg.timeout_s, left)
            try:
                reply = self.wire.send(request, timeout)
            except oa.OpenAIError as err:
                self.pacer.settle(slot, 0)
                status = getattr(err, "status_code", None)
                if isinstance(status, int):  # this thread sleeps its Retry-After below: the rest wait in the pacer
                    cooled = self.pacer.record(status, retry_after_s(getattr(getattr(err, "response", None), "headers", None)))
                what = describe_error(err)
                timeouts += isinstance(err, oa.APITimeoutError)
                body = _body(err) if isinstance(err, oa.APIStatusError) else last_body
                final = self._final_error(err, what, attempt, timeouts, body, last_body)
                if final is not None:
                    raise final from err
                last_body = body
                delay = self._delay(attempt, err)
                if limit is not None and time.monotonic() + delay >= limit:
                    if budget_first:
                        raise ModelError(f"model call failed and the time budget leaves no room to retry: {what}") from err
                    raise EndpointUnavailable(
                        f"model call to {self.endpoint} failed and model.call_time_cap_s leaves no room to retry: {what}",
                        attempts=attempt + 1) from err
                attempt += 1
                self.retries += 1
                if on_retry is not None:
                    on_retry({"attempt": attempt, "error": what, "delay_s": round(delay, 3), "endpoint": self.endpoint})
                self._sleep(delay)
                continue
            latency = time.monotonic() - t0
            self.pacer.settle(slot, self.wire.reported_tokens(reply) or tokens)
            self.pacer.record(200)
            self.calls += 1
            return self.wire.read(reply, request, latency, attempt + 1, self.calls)

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
        """A one-shot question without tools (a judge, an aligner, a page summariser): ``prompt`` is the
        user message's text (after ``system``, when given) or a whole conversation. The reply's text is
        :attr:`Completion.text`; its usage, latency and the parameters sent are there too. Same retries,
        error classes and overrides as :meth:`complete`."""
        if isinstance(prompt, str):
            messages = [{"role": "user", "content": prompt}]
            if system is not None:
                messages.insert(0, {"role": "system", "content": system})
        else:
            if system is not None:
                raise ValueError("ModelClient.ask: give the system message inside the conversation, not as system=")
            messages = prompt
        return self.complete(messages, None, deadline=deadline, max_tokens=max_tokens, temperature=temperature,
                             on_retry=on_retry)


def _body(err: Any) -> str:
    """The error response's body text, whole."""
    response = getattr(err, "response", None)
    try:
        text = response.text if response is not None else ""
    except Exception:  # noqa: BLE001 - a streamed or closed body
        text = ""
    return text or str(getattr(err, "body", "") or "")


def describe_error(err: Exception) -> str:
    """The error as one string, never shortened (the whole server message is the evidence)."""
    status = getattr(err, "status_code", None)
    body = _body(err).strip() if status else ""
    text = body or str(err).strip()
    name = err.__class__.__name__
    return f"{name} (HTTP {status}): {text}" if status else f"{name}: {text}"
