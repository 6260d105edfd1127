"""One HTTP POST with retries, for the search layer's remote services (Serper, an embeddings endpoint):
a timeout, a connection error or a transient status (:data:`RETRY_STATUS`) is retried with exponential
backoff and jitter, a ``Retry-After`` is honoured (:func:`fte_shell.retry_after.retry_after_s`, at most
:data:`MAX_WAIT_S`); any other
answer is returned to the caller, who reads it."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

import httpx

from ..errors import SearchUnavailable
from ..retry_after import retry_after_s

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
"""Answers worth asking again: request timeout, conflict, too early, rate limit, server errors."""

MAX_WAIT_S = 30.0
"""The longest wait between two attempts (backoff or ``Retry-After``)."""


def post_retrying(client: httpx.Client, url: str, *, name: str, body: Any, retries: int, backoff_s: float,
                  gave_up: Callable[[str, int], str], headers: dict[str, str] | None = None) -> httpx.Response:
    """POST ``body`` (JSON) to ``url`` up to ``retries + 1`` times; the first answer that is not transient.
    ``name`` names the service in the problem lines ("Serper"); when every attempt failed,
    :class:`SearchUnavailable` with ``gave_up(last problem, attempts)``."""
    last, retry_after = "", None
    for attempt in range(retries + 1):
        if attempt:
            delay = min(backoff_s * 2 ** (attempt - 1), MAX_WAIT_S) * (0.5 + random.random() / 2)
            time.sleep(min(retry_after, MAX_WAIT_S) if retry_after is not None else delay)
            retry_after = None
        try:
            resp = client.post(url, json=body, headers=headers)
        except httpx.TimeoutException:
            last = f"{name} did not answer within {client.timeout.read or 0:g} s ({url})"
            continue
        except httpx.HTTPError as e:
            last = f"{name} is unreachable at {url}: {e.__class__.__name__}: {e}"
            continue
        if resp.status_code in RETRY_STATUS:
            last = f"{name} answered HTTP {resp.status_code} ({url})"
            retry_after = retry_after_s(resp.headers)
            continue
        return resp
    raise SearchUnavailable(gave_up(last, retries + 1))

