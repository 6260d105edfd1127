"""How fast a sweep may start runs: its spending limits (:class:`Budget`, ``--max-cost`` and
``--max-tokens-total``) and its concurrency under rate limiting (:class:`Throttle`: repeated 429s lower it,
a run of successes raises it again). Both are gates of the work queue (:class:`Gates`): a worker asks
before it takes a run and reports when the run is over. Definitions: docs/run.md "Budgets", "Rate limits".
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ..config import ModelPrice
from ..model.prices import usage_cost

Log = Callable[[str], None]

LOWER_AFTER = 3
"""429 answers (since the concurrency last changed) that halve the sweep's concurrency."""

RAISE_AFTER = 10
"""Successful model calls in a row (no 429 between) that raise the concurrency by one, up to the slots."""


def run_spend(result: dict[str, Any] | None, price: ModelPrice | None) -> tuple[int, float | None]:
    """``(tokens, USD)`` one run spent, from its ``result.json``: ``usage.total_tokens`` plus a reader
    model's ``summary_usage.total_tokens``; ``cost_usd``, or (a run written without it) its usage at
    ``price`` (prompt and completion tokens; the cached share is not in result.json, so an upper bound);
    None without either."""
    if not result:
        return 0, None
    usage = result.get("usage") if isinstance(result.get("usage"), dict) else {}
    reader = result.get("summary_usage") if isinstance(result.get("summary_usage"), dict) else {}
    tokens = int(usage.get("total_tokens") or 0) + int(reader.get("total_tokens") or 0)
    cost = result.get("cost_usd")
    if isinstance(cost, (int, float)) and not isinstance(cost, bool):
        return tokens, float(cost)
    return tokens, usage_cost(usage, price) if price is not None else None


class Budget:
    """What the sweep may still spend. ``spent_*`` are the runs of this sweep that finished (those already
    on disk when it started included: :meth:`add`); a run in flight is estimated at the mean of the
    finished runs. :meth:`admit` lets a run start while spent + (in flight + 1) × mean stays within every
    limit; otherwise it waits for the runs in flight to end and decides again on what they really spent;
    with none in flight it refuses: the budget is reached. Before any run has finished (no mean yet),
    one run at a time."""

    def __init__(self, max_cost: float | None, max_tokens: int | None, *, stop: threading.Event | None = None):
        self.max_cost, self.max_tokens = max_cost, max_tokens
        self.spent_cost, self.spent_tokens, self.finished, self.in_flight = 0.0, 0, 0, 0
        self.reached: str | None = None
        """``max_cost`` or ``max_tokens_total`` once the budget refused a run."""
        self._stop = stop or threading.Event()
        self._cond = threading.Condition()

    @property
    def limited(self) -> bool:
        return self.max_cost is not None or self.max_tokens is not None

    def add(self, tokens: int, cost: float | None) -> None:
        """A finished run's spending (at planning: the runs on disk; later: :meth:`settle`)."""
        with self._cond:
            self.spent_tokens += tokens
            self.spent_cost += cost or 0.0
            self.finished += 1
            self._cond.notify_all()

    def mean(self) -> tuple[float, float] | None:
        """``(tokens, USD)`` of the mean finished run, or None before any."""
        if not self.finished:
            return None
        return self.spent_tokens / self.finished, self.spent_cost / self.finished

    def _passes(self, n: int) -> str | None:
        """The limit that ``n`` runs more at the mean would pass (None: none). Called with the lock held.
        Before any run finished only a limit already spent is known to be passed."""
        m = self.mean()
        tokens, cost = m if m is not None else (0.0, 0.0)
        if self.max_tokens is not None and (self.spent_tokens >= self.max_tokens
                                            or self.spent_tokens + n * tokens > self.max_tokens):
            return "max_tokens_total"
        if self.max_cost is not None and (self.spent_cost >= self.max_cost
                                          or self.spent_cost + n * cost > self.max_cost):
            return "max_cost"
        return None

    def admit(self) -> bool:
        """True: a run may start (counted in flight until :meth:`settle` or :meth:`release`). False: the
        budget is reached (no run in flight could change that), or the sweep stopped."""
        if not self.limited:
            return True
        with self._cond:
            while not self._stop.is_set():
                first = self.finished == 0
                over = self._passes(self.in_flight + 1)
                if over is None and not (first and self.in_flight):
                    self.in_flight += 1
                    return True
                if not self.in_flight:
                    self.reached = over or self.reached
                    return False
                self._cond.wait(timeout=0.2)  # runs in flight: decide again when one ends
            return False

    def settle(self, tokens: int, cost: float | None) -> None:
        """An admitted run ended having spent this much."""
        with self._cond:
            self.in_flight = max(0, self.in_flight - 1) if self.limited else 0
        self.add(tokens, cost)

    def release(self) -> None:
        """An admitted run did not happen (or nothing of it is known)."""
        if self.limited:
            with self._cond:
                self.in_flight = max(0, self.in_flight - 1)
                self._cond.notify_all()

    def describe(self) -> str:
        """One line: what was spent of which limit."""
        parts = []
        if self.max_cost is not None:
            parts.append(f"${self.spent_cost:,.4f} of --max-cost ${self.max_cost:,.4f}")
        if self.max_tokens is not None:
            parts.append(f"{self.spent_tokens:,} of --max-tokens-total {self.max_tokens:,} tokens")
        m = self.mean()
        mean = f" (a run: {m[0]:,.0f} tokens" + (f", ${m[1]:,.4f}" if self.max_cost is not None else "") + " on average)" if m else ""
        return "; ".join(parts) + f" spent by {self.finished} run(s){mean}"


class Throttle:
    """The sweep's concurrency under rate limiting: at most :attr:`allowed` runs in flight (at first all
    ``slots``). :data:`LOWER_AFTER` 429s since the last change halve it (at least 1);
    :data:`RAISE_AFTER` successful calls in a row raise it by one, back up to ``slots``. Each change is
    logged."""

    def __init__(self, slots: int, *, log: Log, stop: threading.Event | None = None,
                 lower_after: int = LOWER_AFTER, raise_after: int = RAISE_AFTER):
        self.slots = self.allowed = self.lowest = max(1, slots)
        self.lower_after, self.raise_after = lower_after, raise_after
        self.running = 0
        self.lowered = 0
        """Times the concurrency was lowered."""
        self._hits = self._ok = 0
        self._log, self._stop = log, stop or threading.Event()
        self._cond = threading.Condition()

    def on_status(self, status: int) -> None:
        """A model call's HTTP status (a :class:`~fte_shell.model.ratelimit.Pacer` listener)."""
        msg = None
        with self._cond:
            if status == 429:
                self._hits += 1
                self._ok = 0
                if self._hits >= self.lower_after and self.allowed > 1:
                    self.allowed = max(1, self.allowed // 2)
                    self.lowest = min(self.lowest, self.allowed)
                    self.lowered += 1
                    self._hits = 0
                    msg = f"rate limited ({self.lower_after} HTTP 429s): concurrency lowered to {self.allowed} of {self.slots}"
            elif 200 <= status < 300:
                self._ok += 1
                if self.allowed < self.slots and self._ok >= self.raise_after:
                    self.allowed += 1
                    self._ok = self._hits = 0
                    msg = f"no HTTP 429 in {self.raise_after} calls: concurrency raised to {self.allowed} of {self.slots}"
                    self._cond.notify_all()
        if msg:
            self._log(msg)

    def acquire(self) -> bool:
        """Wait for a place among :attr:`allowed` runs in flight; False when the sweep stopped."""
        with self._cond:
            while self.running >= self.allowed:
                if self._stop.is_set():
                    return False
                self._cond.wait(timeout=0.2)
            self.running += 1
            return True

    def release(self) -> None:
        with self._cond:
            self.running = max(0, self.running - 1)
            self._cond.notify_all()


class Gates:
    """The work queue's gate: the outage gate, then a place under the :class:`Throttle`, then the
    :class:`Budget`. :meth:`ended` is called once per run the gate let through."""

    def __init__(self, outage_gate: Callable[[], bool], throttle: Throttle, budget: Budget):
        self.outage_gate, self.throttle, self.budget = outage_gate, throttle, budget

    def may_start(self) -> bool:
        if not self.outage_gate():
            return False
        if not self.throttle.acquire():
            return False
        if not self.budget.admit():
            self.throttle.release()
            return False
        return True

    def ended(self, spent: tuple[int, float | None] | None) -> None:
        """The run is over: ``spent`` = (tokens, USD) when known, else None (nothing recorded)."""
        self.throttle.release()
        if spent is None:
            self.budget.release()
        else:
            self.budget.settle(*spent)
