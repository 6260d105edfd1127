"""Opt-in JavaScript rendering (``FetchPolicy.render_js``) with Debian's headless chromium.

The browser never touches the network itself. Playwright drives chromium over CDP and intercepts EVERY
request of the page: the main document is answered with the body the policy-checked downloader already
fetched; scripts, stylesheets, XHR/fetch and frames (GET only) are downloaded through the same
:class:`~fte_shell.fetch.http.HttpFetcher` (so the SSRF checks, caps and budgets apply to each); images,
media and fonts are not loaded; anything else is aborted. As a backstop, chromium is started with a proxy
that points at a closed port (loopback included) and WebRTC limited to proxied UDP, so a request that
escaped interception fails instead of reaching the network. Each page gets a fresh browser context.

One browser per process, started on first use (≈2 s, ≈0.9 GB), driven from one thread (Playwright's sync
API is single-threaded), so pages are rendered one at a time.
"""

from __future__ import annotations

import os
import queue
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any

from ..errors import BudgetExceeded, ConfigError, FetchRefused
from .http import HttpFetcher, HttpResult

CHROMIUM_CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
MAX_SUBRESOURCES = 150
"""Requests a page may make besides its document; later ones are aborted."""
IDLE_WAIT_S = 2.0
"""After ``load``, wait at most this long for the network to go idle (scripts fetching data)."""
_SKIP_TYPES = frozenset(
    {"image", "media", "font", "texttrack", "eventsource", "websocket", "manifest", "ping"}
)
_CHROMIUM_ARGS = [
    "--no-sandbox",  # root in a container; the page has no direct network (see the module docstring)
    "--proxy-server=http://127.0.0.1:9",
    "--proxy-bypass-list=<-loopback>",
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--mute-audio",
]


def find_chromium() -> str:
    """Path of the chromium binary (``FTE_CHROMIUM`` or the first of CHROMIUM_CANDIDATES on PATH);
    raises :class:`ConfigError` naming the fix."""
    env = os.environ.get("FTE_CHROMIUM")
    if env:
        if os.path.isfile(env) and os.access(env, os.X_OK):
            return env
        raise ConfigError(f"FTE_CHROMIUM={env} is not an executable file; render_js needs a chromium binary")
    for name in CHROMIUM_CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    raise ConfigError(
        "fetch_policy.render_js = true needs a headless chromium: apt-get install chromium "
        "(or set FTE_CHROMIUM to its path), or set render_js = false"
    )


@dataclass
class RenderResult:
    """The rendered page."""

    html: str
    """``document.documentElement.outerHTML`` after scripts ran."""
    wire_bytes: int
    """Network bytes the page's sub-requests downloaded."""
    subrequests: list[str] = field(default_factory=list)
    """``resource_type url -> outcome`` per sub-request (for logs and tests)."""


@dataclass
class _Job:
    url: str
    first: HttpResult
    fetcher: HttpFetcher
    deadline: float
    budget_bytes: int | None
    future: Future[RenderResult]


class _Renderer:
    """Owns Playwright and the browser on one thread; renders jobs from a queue."""

    def __init__(self, executable: str) -> None:
        self.executable = executable
        self._jobs: queue.Queue[_Job | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="fte-render", daemon=True)
        self._started: Future[None] = Future()
        self._thread.start()
        self._started.result(timeout=60)

    def submit(self, job: _Job) -> None:
        self._jobs.put(job)

    def close(self) -> None:
        self._jobs.put(None)
        self._thread.join(timeout=30)

    def _run(self) -> None:
        try:
            from playwright.sync_api import sync_playwright

            pw = sync_playwright().start()
            browser = pw.chromium.launch(executable_path=self.executable, headless=True, args=_CHROMIUM_ARGS)
        except Exception as e:  # noqa: BLE001 - any launch failure is reported to the caller
            self._started.set_exception(
                ConfigError(f"cannot start chromium for render_js ({self.executable}): {e}")
            )
            return
        self._started.set_result(None)
        try:
            while (job := self._jobs.get()) is not None:
                if job.future.set_running_or_notify_cancel():
                    try:
                        job.future.set_result(self._render(browser, job))
                    except BaseException as e:  # noqa: BLE001 - handed to the waiting caller
                        job.future.set_exception(e)
        finally:
            browser.close()
            pw.stop()

    def _render(self, browser: Any, job: _Job) -> RenderResult:
        from playwright.sync_api import Error as PlaywrightError
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        result = RenderResult(html="", wire_bytes=0)
        budget: list[int | None] = [job.budget_bytes]
        context = browser.new_context(
            service_workers="block", accept_downloads=False, user_agent=job.fetcher.policy.user_agent
        )
        try:
            page = context.new_page()
            page.route("**/*", _router(job, result, budget))
            left_ms = max(100.0, (job.deadline - time.monotonic()) * 1000)
            try:
                page.goto(job.url, wait_until="load", timeout=left_ms)
            except PlaywrightTimeout:
                raise FetchRefused(f"timed out rendering {job.url} (timeout_s)") from None
            except PlaywrightError as e:
                raise FetchRefused(f"rendering {job.url} failed: {str(e).splitlines()[0]}") from None
            idle_ms = min(IDLE_WAIT_S, job.deadline - time.monotonic()) * 1000
            if idle_ms > 50:
                try:
                    page.wait_for_load_state("networkidle", timeout=idle_ms)
                except PlaywrightTimeout:
                    pass  # still busy (polling, analytics): take the DOM as it is
            result.html = page.content()
            return result
        finally:
            context.close()


def _router(job: _Job, result: RenderResult, budget: list[int | None]) -> Callable[[Any], None]:
    count = [0]
    served = [False]

    def handle(route: Any) -> None:
        req = route.request
        label = f"{req.resource_type} {req.url}"
        try:
            if not served[0] and req.is_navigation_request() and req.frame.parent_frame is None:
                served[0] = True
                first = job.first
                ctype = first.content_type or "text/html"
                headers = {"content-type": f"{ctype}; charset={first.charset}" if first.charset else ctype}
                route.fulfill(status=first.status, headers=headers, body=first.body)
                result.subrequests.append(f"{label} -> document")
                return
            count[0] += 1
            if req.method != "GET" or req.resource_type in _SKIP_TYPES or count[0] > MAX_SUBRESOURCES:
                route.abort("blockedbyclient")
                result.subrequests.append(f"{label} -> skipped")
                return
            if time.monotonic() >= job.deadline:
                raise FetchRefused("render deadline reached")
            got = job.fetcher.get(req.url, budget_bytes=budget[0], deadline=job.deadline)
            result.wire_bytes += got.wire_bytes
            if budget[0] is not None:
                budget[0] -= got.wire_bytes
            ctype = got.content_type or "application/octet-stream"
            headers = {"content-type": f"{ctype}; charset={got.charset}" if got.charset else ctype}
            route.fulfill(status=got.status, headers=headers, body=got.body)
            result.subrequests.append(f"{label} -> {got.status}")
        except (FetchRefused, BudgetExceeded) as e:
            result.subrequests.append(f"{label} -> refused: {e}")
            route.abort("blockedbyclient")
        except Exception as e:  # noqa: BLE001 - the page must never hang on an unanswered route
            result.subrequests.append(f"{label} -> error: {e}")
            try:
                route.abort("failed")
            except Exception:  # noqa: BLE001, S110 - the page may already be gone
                pass

    return handle


_renderer: _Renderer | None = None
_renderer_lock = threading.Lock()


def render(
    url: str, first: HttpResult, fetcher: HttpFetcher, *, deadline: float, budget_bytes: int | None
) -> RenderResult:
    """Render ``url`` whose document ``first`` was already downloaded; sub-requests go through
    ``fetcher``. Raises :class:`FetchRefused` on timeout or browser failure, :class:`ConfigError` if
    chromium is missing or cannot start."""
    global _renderer
    with _renderer_lock:
        if _renderer is None:
            _renderer = _Renderer(find_chromium())
        renderer = _renderer
    fut: Future[RenderResult] = Future()
    renderer.submit(_Job(url, first, fetcher, deadline, budget_bytes, fut))
    try:
        return fut.result(timeout=max(1.0, deadline - time.monotonic()) + 30.0)
    except FutureTimeout:
        fut.cancel()
        raise FetchRefused(f"timed out rendering {url} (the browser did not answer)") from None


def shutdown_renderer() -> None:
    """Stop the browser (a later render starts a new one)."""
    global _renderer
    with _renderer_lock:
        r, _renderer = _renderer, None
    if r is not None:
        r.close()
