"""Client-side rate limits and the 429 signal of one endpoint: :class:`Pacer`, shared by every model client
of this process that talks to the same endpoint and model (:func:`pacer_for`), so all of a sweep's threads
draw on one budget.

Before each HTTP attempt the client calls :meth:`Pacer.wait` with an estimate of the request's prompt
tokens (:func:`estimate_request_tokens`); it blocks until, over the last 60 s (a sliding window), fewer
than ``model.rpm`` requests were sent and the tokens of those requests plus this one stay within
``model.tpm``, and until any ``Retry-After`` a server gave has passed (it wins over the limits: one thread's
429 with ``Retry-After`` holds every thread). After the attempt :meth:`Pacer.settle` replaces the estimate
by the tokens the server reported (prompt + completion; 0 for a refused request) and :meth:`Pacer.record`
tells the listeners the HTTP status (a sweep lowers its concurrency on repeated 429s, see
``fte_shell.sweep.pace``). The clock and the sleep are seams (tests drive them by hand).
"""

from __future__ import annotations

import contextlib
import json
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

WINDOW_S = 60.0
"""The window ``rpm`` and ``tpm`` are counted over (one minute)."""

StatusListener = Callable[[int], None]
"""Gets the HTTP status of every attempt (200 for a completion, 429 for a rate-limit refusal, …)."""


class Slot:
    """One request in the window: when it was sent and the tokens it counts for."""

    __slots__ = ("t", "tokens")

    def __init__(self, t: float, tokens: int):
        self.t, self.tokens = t, tokens


def estimate_request_tokens(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> int:
    """A request's prompt tokens before it is sent: a quarter of its JSON length, rounded up."""
    text = json.dumps(messages, ensure_ascii=False) + (json.dumps(tools, ensure_ascii=False) if tools else "")
    return max(1, math.ceil(len(text) / 4))


class Pacer:
    """Requests-per-minute and tokens-per-minute limits (None = no limit), the shared ``Retry-After``
    cool-down, and the status listeners. Thread-safe."""

    def __init__(self, rpm: int | None = None, tpm: int | None = None, *,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep):
        self.rpm, self.tpm = rpm, tpm
        self._clock, self._sleep = clock, sleep
        self._lock = threading.Lock()
        self._window: deque[Slot] = deque()
        self._cool_until = 0.0
        self._listeners: list[StatusListener] = []
        self.waited_s = 0.0
        """Seconds callers spent waiting in :meth:`wait`, all threads together."""

    def limit(self, rpm: int | None, tpm: int | None) -> None:
        """Set the limits (a later client of the same endpoint with other limits: the last one wins)."""
        with self._lock:
            self.rpm, self.tpm = rpm, tpm

    def _purge(self, now: float) -> None:
        while self._window and self._window[0].t <= now - WINDOW_S:
            self._window.popleft()

    def _delay(self, now: float, tokens: int, honoured: float) -> float:
        """Seconds until a request of ``tokens`` may go (0: now). Called with the lock held."""
        wait = max(0.0, self._cool_until - now) if self._cool_until > honoured else 0.0
        if self.rpm is not None and len(self._window) >= self.rpm:
            wait = max(wait, self._window[len(self._window) - self.rpm].t + WINDOW_S - now)
        if self.tpm is not None and self._window:
            used = sum(s.tokens for s in self._window)
            excess = used + tokens - self.tpm
            for s in self._window:  # the oldest requests leave the window first
                if excess <= 0:
                    break
                excess -= s.tokens
                wait = max(wait, s.t + WINDOW_S - now)
        return wait

    def wait(self, tokens: int, until: float | None = None, honoured: float = 0.0) -> Slot | None:
        """Block until a request of about ``tokens`` prompt tokens may be sent, then count it; returns its
        :class:`Slot` (for :meth:`settle`), or None when the wait would pass ``until`` (a clock instant).
        ``honoured``: the cool-down instant (from :meth:`record`) the caller already slept out itself —
        the thread that got the ``Retry-After`` retries after its own backoff."""
        tokens = max(0, int(tokens))
        waited = 0.0
        while True:
            with self._lock:
                now = self._clock()
                self._purge(now)
                delay = self._delay(now, tokens, honoured)
                if delay <= 0:
                    slot = Slot(now, tokens)
                    if self.rpm is not None or self.tpm is not None:
                        self._window.append(slot)
                    self.waited_s += waited
                    return slot
            if until is not None and now + delay > until:
                self.waited_s += waited
                return None
            step = min(delay, 1.0)  # re-check: another thread's settle or a new limit may free room sooner
            self._sleep(step)
            waited += step

    def settle(self, slot: Slot | None, tokens: int) -> None:
        """The request of ``slot`` counts for ``tokens`` (what the server reported; 0 when refused)."""
        if slot is not None:
            with self._lock:
                slot.tokens = max(0, int(tokens))

    def record(self, status: int, retry_after_s: float | None = None) -> float:
        """An attempt ended with HTTP ``status``; a ``Retry-After`` holds every caller of :meth:`wait` that
        long. The listeners hear of it (their errors are not the caller's). Returns the cool-down instant
        now in force (0.0: none)."""
        with self._lock:
            if retry_after_s is not None and retry_after_s > 0:
                self._cool_until = max(self._cool_until, self._clock() + retry_after_s)
            cool = self._cool_until
        for fn in list(self._listeners):
            with contextlib.suppress(Exception):  # a listener (a display) never breaks a model call
                fn(status)
        return cool

    def listen(self, fn: StatusListener) -> Callable[[], None]:
        """Call ``fn(status)`` after every attempt; returns the function that stops it."""
        with self._lock:
            self._listeners.append(fn)

        def stop() -> None:
            with self._lock:
                if fn in self._listeners:
                    self._listeners.remove(fn)

        return stop


_PACERS: dict[tuple[str, str], Pacer] = {}
_PACERS_LOCK = threading.Lock()


def pacer_for(endpoint: str, model: str, rpm: int | None, tpm: int | None) -> Pacer:
    """The process's one :class:`Pacer` of ``(endpoint, model)``; limits given (not both None) replace the
    ones it had."""
    key = (endpoint.rstrip("/"), model)
    with _PACERS_LOCK:
        p = _PACERS.get(key)
        if p is None:
            p = _PACERS[key] = Pacer(rpm, tpm)
        elif (rpm is not None or tpm is not None) and (p.rpm, p.tpm) != (rpm, tpm):
            p.limit(rpm, tpm)  # a client without limits (a judge) leaves the sweep's in place
        return p


def share(limit: int | None, parts: int) -> int | None:
    """One part's share of a per-minute limit split ``parts`` ways (at least 1; None stays None): on a Ray
    cluster each run (one slot, one process) gets ``limit // slots``, so a node gets its slots' shares."""
    return None if limit is None else max(1, limit // max(1, parts))
