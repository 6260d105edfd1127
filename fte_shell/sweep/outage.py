"""Waiting out infrastructure that stopped answering: probes of the model endpoint, the sandbox provider
(e.g. the Docker daemon) and the search backend, and :class:`Outages`, the gate a sweep's workers pass
before they start a run.

When a run ends because a resource is unavailable (``endpoint_unavailable``, ``sandbox_unavailable``,
``search_unavailable``), the sweep reports it here: the gate closes (no new run starts), a watcher probes
the resource with exponential backoff and says so through ``log``, and the gate opens again when the
probe answers. If the resource stays down longer than the configured wait, the outage is given up: every
worker's wait returns False and the sweep stops with a named status.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from ..config import RunConfig, SandboxConfig, SearchConfig
from ..sandbox.base import get_provider

MAX_PROBE_DELAY_S = 60.0
PROBE_TIMEOUT_S = 10.0
REMIND_EVERY_S = 60.0
"""While waiting, a reminder line is logged at most this often."""


class Probe(Protocol):
    """Asks one piece of infrastructure whether it answers."""

    resource: str
    """``endpoint``, ``sandbox`` or ``search``."""

    label: str
    """What is probed, for messages (``the model endpoint http://…``)."""

    def check(self) -> str | None:
        """None when it answers, else a one-line description of the problem."""
        ...


DOWN_STATUS = frozenset({429, 502, 503, 504})
"""HTTP statuses of a probe that mean "down": a gateway that finds no server behind it, or a server that
says it is overloaded (503, and 429: "come back later", so the sweep waits instead of starting runs that
would spend their retries on it). Any other answer (200, 401, 404, a 501 from a server that has no
``GET /models``, a 500 of a broken route) is a server that answers; its model calls say what is wrong."""


@dataclass
class EndpointProbe:
    """``GET {base_url}/models``: only no connection, a timeout or a gateway/overload status
    (:data:`DOWN_STATUS`) mean the endpoint is down (a server answering chat completions but 404, 405 or
    501 on this route is up)."""

    base_url: str
    api_key: str
    resource: str = "endpoint"
    label: str = ""

    def __post_init__(self) -> None:
        self.label = self.label or f"the model endpoint {self.base_url}"

    def check(self) -> str | None:
        import httpx

        url = self.base_url.rstrip("/") + "/models"
        try:
            r = httpx.get(url, headers={"Authorization": f"Bearer {self.api_key}"}, timeout=PROBE_TIMEOUT_S)
        except httpx.HTTPError as e:
            return f"GET {url}: {e.__class__.__name__}: {e}"
        if r.status_code in DOWN_STATUS:
            return f"GET {url}: HTTP {r.status_code}"
        return None


@dataclass
class SandboxProbe:
    """The sandbox provider's own check with fresh connections (Docker: ``docker ping``)."""

    cfg: SandboxConfig
    resource: str = "sandbox"
    label: str = ""

    def __post_init__(self) -> None:
        self.label = self.label or get_provider(self.cfg.provider).backend

    def check(self) -> str | None:
        return get_provider(self.cfg.provider).probe(PROBE_TIMEOUT_S)


@dataclass
class SearchProbe:
    """The search backend's own health check (its plugin's ``probe``, :mod:`fte_shell.search.registry`):
    Serper's endpoint answers an HTTP request (no query spent); a local corpus and its index open."""

    cfg: SearchConfig
    resource: str = "search"
    label: str = ""
    replayed: bool = False
    """Searches are answered from a snapshot in replay mode: nothing live to probe."""

    def __post_init__(self) -> None:
        self.label = self.label or f"the search backend ({self.cfg.backend})"

    def check(self) -> str | None:
        if self.replayed:
            return None
        from ..search.registry import selected

        try:
            plugin = selected(self.cfg)
        except Exception as e:  # noqa: BLE001 - the backend's plugin cannot be loaded
            return f"{e.__class__.__name__}: {e}"
        return plugin.probe(self.cfg, PROBE_TIMEOUT_S)


def default_probes(cfg: RunConfig, base_url: str | None, api_key: str) -> dict[str, Probe]:
    """The probes of a sweep's infrastructure (the endpoint's default base URL is OpenAI's)."""
    return {
        "endpoint": EndpointProbe(base_url or "https://api.openai.com/v1", api_key),
        "sandbox": SandboxProbe(cfg.sandbox),
        "search": SearchProbe(cfg.search, replayed=cfg.snapshot.dir is not None and cfg.snapshot.mode == "replay"),
    }


class Outages:
    """The gate of a sweep: closed while any reported resource is down (see the module docstring)."""

    def __init__(
        self,
        probes: dict[str, Probe],
        *,
        wait_s: float,
        backoff_s: float,
        log: Callable[[str], None],
        stop: threading.Event,
    ):
        self.probes = probes
        self.wait_s = wait_s
        self.backoff_s = backoff_s
        self.log = log
        self.stop = stop
        self.gave_up: str | None = None
        """The resource given up on (the sweep stops), or None."""
        self.count = 0
        """Outages so far."""
        self.paused_s = 0.0
        """Seconds the gate was closed, all outages together."""
        self._down: dict[str, float] = {}
        self._watchers: list[threading.Thread] = []
        self._closed_at: float | None = None
        self._cond = threading.Condition()

    def report(self, resource: str, problem: str | None = None) -> None:
        """A run ended because ``resource`` was unavailable: close the gate and watch it (once per outage).
        The watcher probes at once; if that probe answers it was no outage (the gate opens again without
        a word), else the outage is announced and waited out."""
        probe = self.probes.get(resource)
        if probe is None:
            return
        with self._cond:
            if resource in self._down or self.gave_up is not None:
                return
            self._down[resource] = time.monotonic()
            if self._closed_at is None:
                self._closed_at = time.monotonic()
        first = (problem or "").strip().splitlines()[0][:300] if (problem or "").strip() else "a run failed"
        watcher = threading.Thread(target=self._watch, args=(resource, first), name=f"probe-{resource}",
                                   daemon=True)
        with self._cond:
            self._watchers.append(watcher)
        watcher.start()

    def _watch(self, resource: str, cause: str) -> None:
        probe = self.probes[resource]
        with self._cond:
            since = self._down[resource]
        delay = self.backoff_s
        reminded = since
        announced = False
        while not self.stop.is_set():
            problem = probe.check()
            if self.stop.is_set():  # the sweep ended while it probed: nothing to announce or wait for
                return
            waited = time.monotonic() - since
            if problem is None:
                if announced:
                    self.log(f"{probe.label} answers again after {waited:.0f} s: the sweep goes on")
                self._open(resource, paused=announced)
                return
            if not announced:
                announced = True
                with self._cond:
                    self.count += 1
                self.log(f"{probe.label} is not answering ({cause}): no new run starts until it does; "
                         f"probing it with backoff for up to {self.wait_s:g} s")
            if waited >= self.wait_s:
                self.log(f"{probe.label} still does not answer after {waited:.0f} s ({problem}): the sweep "
                         f"gives up (rerun the same command to resume)")
                with self._cond:
                    self.gave_up = resource
                    self._cond.notify_all()
                return
            if time.monotonic() - reminded >= REMIND_EVERY_S:
                reminded = time.monotonic()
                self.log(f"still waiting for {probe.label} ({waited:.0f} s of {self.wait_s:g} s): {problem}")
            self.stop.wait(min(delay, max(0.0, self.wait_s - waited)))
            delay = min(delay * 2, MAX_PROBE_DELAY_S)

    def _open(self, resource: str, *, paused: bool = True) -> None:
        with self._cond:
            self._down.pop(resource, None)
            if not self._down and self._closed_at is not None:
                if paused:
                    self.paused_s += time.monotonic() - self._closed_at
                self._closed_at = None
            self._cond.notify_all()

    def wait_open(self) -> bool:
        """Block while the gate is closed. True: a run may start; False: the sweep stops (given up or
        stopped)."""
        with self._cond:
            while self._down and self.gave_up is None and not self.stop.is_set():
                self._cond.wait(timeout=0.5)
            return self.gave_up is None and not self.stop.is_set()

    def preflight(self, resources: list[str]) -> bool:
        """Probe ``resources`` before the sweep starts; wait out any that is down. False when given up."""
        for r in resources:
            probe = self.probes.get(r)
            if probe is None:
                continue
            problem = probe.check()
            if problem is not None:
                self.report(r, problem)
        return self.wait_open()

    def finish(self) -> None:
        """The sweep ends: stop the watchers and wait for them (each ends after its probe in progress, which
        :data:`PROBE_TIMEOUT_S` bounds; none logs or counts once the sweep ended); account the time of an
        outage still open."""
        self.stop.set()
        with self._cond:
            watchers, self._watchers = self._watchers, []
        for w in watchers:
            w.join(2 * PROBE_TIMEOUT_S)
        with self._cond:
            if self._closed_at is not None:
                self.paused_s += time.monotonic() - self._closed_at
                self._closed_at = None
