"""The host-side gateway: the container's only way out.

One :class:`Gateway` per question listens on a unix socket in a host directory that is bind-mounted into
the container (at ``/run/fte``). The in-container helpers ``fetch``, ``search`` and ``list_fetched``
(``sandbox/bin``) send it ONE JSON line and read ONE JSON line back, then close the connection.

Requests::

    {"op": "fetch",  "urls": ["https://…", "docid", …]}       # 1..20 references
    {"op": "search", "query": "…", "n": 10}                   # n optional (default_n), 1..50
    {"op": "list"}
    {"op": "ping"}

Responses: ``{"ok": true, …}`` or ``{"ok": false, "error": "<one line>"}``. ``fetch`` answers
``{"ok": true, "results": [{"ref", "ok": true, "line", "path", "new"} | {"ref", "ok": false, "error"}]}``
(``ok`` is per reference; the request itself succeeded); ``search`` and ``list`` answer ``{"ok": true,
"text": …}`` — ``text`` is :func:`fte_shell.search.format_results` / :meth:`Workspace.listing_text`.

The gateway holds this question's FetchService, search backend and workspace only, so one socket reaches
one question. API keys stay in this (host) process. Requests are bounded (128 KiB, 10 s to arrive, 16 at a
time); every failure is a one-line error, and no request can stop the server.
"""

from __future__ import annotations

import collections
import json
import os
import socket
import stat
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, Self

from ..errors import FteError, SearchUnavailable, ToolError
from ..search.base import SearchBackend, cache_hit, format_results
from ..workspace import FetchRecord, Workspace
from .gateway_wire import LineServer, RequestLineError, read_request_line, send_response

MAX_CONCURRENT = 16
"""Requests served at once; more are answered at once with an error."""

MAX_URLS = 20
"""References per ``fetch`` request."""

MAX_REF_CHARS = 4096
"""Longest URL or docid accepted."""

MAX_QUERY_CHARS = 1000
"""Longest search query accepted."""

MAX_RESULTS = 50
"""Largest ``n`` of a ``search`` request."""

FETCH_WORKERS = 4
"""References of one ``fetch`` request fetched concurrently."""

MAX_EVENTS = 10_000
"""Events kept between drains; beyond that the oldest are dropped and counted in ``events_dropped``, so a
client flooding the socket cannot grow the host's memory without bound."""

MAX_EVENT_CHARS = 16_000_000
"""Characters of request arguments (URLs, queries) kept between drains, the same way (20 URLs of 4,096
characters per event would otherwise let 10,000 events hold 800 MB)."""


class Fetcher(Protocol):
    """What the gateway needs of :class:`fte_shell.fetch.FetchService`."""

    def fetch(self, ref: str) -> FetchRecord:
        """Materialize ``ref`` in the workspace; raise a :class:`ToolError` (one line) when refused."""
        ...


@dataclass(frozen=True)
class GatewayEvent:
    """One request the gateway served (for metrics and audits)."""

    op: str
    """``fetch``, ``search``, ``list``, ``ping`` or ``invalid``."""
    t: float
    """Unix time the request arrived."""
    duration_s: float
    """Time to answer it."""
    ok: bool
    """Whether the request as a whole succeeded."""
    args: dict[str, Any] = field(default_factory=dict)
    """The request's arguments (``urls``; ``query`` and ``n``)."""
    results: list[dict[str, Any]] = field(default_factory=list)
    """``fetch``: per reference ``{ref, ok, path?, new?, chars?, source?, error?}``; ``search``: ``{rank, url}``."""
    error: str | None = None
    """The one-line error, if the request failed."""
    cache_hit: bool | None = None
    """``search``: whether the result cache or a snapshot answered (:func:`fte_shell.search.base.cache_hit`)."""


CACHE_HIT = "_cache_hit"
"""Key under which an op hands the record whether a cache answered (removed before the response is sent)."""


def _one_line(text: str) -> str:
    return " ".join(str(text).split()) or "unknown error"


def _event_chars(event: GatewayEvent) -> int:
    """About how many characters an event holds (its URLs, query and error; 100 for the rest)."""
    urls = event.args.get("urls") or []
    return 100 + sum(len(u) for u in urls if isinstance(u, str)) + len(str(event.args.get("query", ""))) + len(
        event.error or ""
    )


def _has_lone_surrogate(value: Any) -> bool:
    """True if a decoded request holds a string with an unpaired surrogate (``"\\udcff"``: e.g. a
    non-UTF-8 command-line argument), which no answer or file could carry."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, list):
        return any(_has_lone_surrogate(v) for v in value)
    if isinstance(value, dict):
        return any(_has_lone_surrogate(k) or _has_lone_surrogate(v) for k, v in value.items())
    return False


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Gateway:
    """A threaded unix-socket server giving one question's container fetch, search and list."""

    def __init__(
        self,
        socket_path: Path | str,
        fetch: Fetcher,
        search: SearchBackend | None,
        workspace: Workspace,
        *,
        default_n: int | None = None,
    ) -> None:
        self.socket_path = Path(socket_path)
        self.fetch = fetch
        self.search = search
        self.workspace = workspace
        self.default_n = default_n or getattr(search, "default_n", None) or 10
        """Results of a ``search`` request without ``n``: the given value, else the backend's ``default_n``
        (set by :func:`fte_shell.search.make_search` from ``search.num_results``), else 10."""
        self._server: LineServer | None = None
        self._thread: threading.Thread | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._slots = threading.BoundedSemaphore(MAX_CONCURRENT)
        self._fetching = 0
        self._closing = False
        self._idle = threading.Condition()
        self._events: collections.deque[tuple[GatewayEvent, int]] = collections.deque()
        self._event_chars = 0
        self._events_lock = threading.Lock()
        self.served = 0
        """Requests recorded so far (a plain counter: a caller sees whether anything was served since it
        last looked without a call into the gateway)."""
        self.events_dropped = 0
        """Events dropped (oldest first) because more than :data:`MAX_EVENTS` events or
        :data:`MAX_EVENT_CHARS` characters of arguments piled up between drains."""

    def __repr__(self) -> str:
        return f"Gateway({str(self.socket_path)!r}, running={self._server is not None})"

    # --- lifecycle -------------------------------------------------------------------------------------
    def start(self) -> Gateway:
        """Bind the socket (mode 0666, so the container's non-root user can connect) and serve in a
        background thread. A stale socket file at the path is replaced; any other file is an error."""
        if self._server is not None:
            return self
        path = self.socket_path
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            st = path.lstat()
        except FileNotFoundError:
            pass
        else:
            if not stat.S_ISSOCK(st.st_mode):
                raise FteError(f"cannot start the gateway: {path} exists and is not a socket")
            path.unlink()
        if len(os.fsencode(path)) >= 104:
            raise FteError(f"cannot start the gateway: socket path too long ({path}); use a shorter directory")
        server = LineServer(str(path), self._serve_connection)
        os.chmod(path, 0o666)
        self._pool = ThreadPoolExecutor(max_workers=FETCH_WORKERS, thread_name_prefix="fte-gw-fetch")
        self._server = server
        self._thread = threading.Thread(target=server.run, name="fte-gateway", daemon=True)
        self._thread.start()
        return self

    def close(self, wait_s: float = 0.0) -> None:
        """Stop serving and remove the socket file. Idempotent. No fetch starts from here on; with
        ``wait_s``, wait that long for those under way to end (a fetch writes into the workspace) and
        raise :class:`FteError` if one is still running then (a box being reset must not get a page
        of its last user's)."""
        with self._idle:
            self._closing = True
        server, self._server = self._server, None
        if server is not None:
            server.stop()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if server is not None:
            server.server_close()
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        try:
            if stat.S_ISSOCK(self.socket_path.lstat().st_mode):
                self.socket_path.unlink()
        except FileNotFoundError:
            pass
        if wait_s > 0:
            with self._idle:
                if not self._idle.wait_for(lambda: self._fetching == 0, timeout=wait_s):
                    raise FteError(f"the gateway's fetches did not end within {wait_s:g} s")

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- events ----------------------------------------------------------------------------------------
    def events(self) -> list[GatewayEvent]:
        """Every request served so far, in order of completion."""
        with self._events_lock:
            return [e for e, _ in self._events]

    def drain_events(self) -> list[GatewayEvent]:
        """The requests served since the last drain (e.g. those one shell command made)."""
        with self._events_lock:
            out = [e for e, _ in self._events]
            self._events.clear()
            self._event_chars = 0
            return out

    def _record(self, event: GatewayEvent) -> None:
        with self._events_lock:
            self.served += 1
            size = _event_chars(event)
            self._events.append((event, size))
            self._event_chars += size
            while len(self._events) > MAX_EVENTS or (self._event_chars > MAX_EVENT_CHARS and len(self._events) > 1):
                _, dropped = self._events.popleft()
                self._event_chars -= dropped
                self.events_dropped += 1

    # --- requests --------------------------------------------------------------------------------------
    def _serve_connection(self, conn: socket.socket) -> None:
        """One client: at most :data:`MAX_CONCURRENT` at a time, one request line, one response line."""
        if not self._slots.acquire(blocking=False):
            send_response(conn, {"ok": False, "error": "gateway busy: too many requests at once; try again"})
            return
        try:
            try:
                raw = read_request_line(conn)
            except RequestLineError as e:
                self._record(GatewayEvent("invalid", time.time(), 0.0, False, error=str(e)))
                send_response(conn, {"ok": False, "error": str(e)})
                return
            send_response(conn, self.handle_line(raw))
        finally:
            self._slots.release()

    def handle_line(self, raw: bytes) -> dict[str, Any]:
        """Answer one request line (the socket protocol without the socket). Never raises."""
        t0 = time.time()
        start = time.monotonic()
        err: str | None = None
        req: Any = None
        try:
            req = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):  # ValueError: also an integer of over 4,300 digits
            err = "bad request: not a JSON object line"
        except RecursionError:  # e.g. 100,000 "[": the parser gives up cleanly, the answer is one line
            err = "bad request: JSON nested too deeply"
        else:
            if _has_lone_surrogate(req):
                err = "bad request: text that is not valid Unicode (an argument that is not UTF-8?)"
        if err is not None:
            self._record(GatewayEvent("invalid", t0, time.monotonic() - start, False, error=err))
            return {"ok": False, "error": err}
        op = req.get("op") if isinstance(req, dict) else None
        handler = {"fetch": self._op_fetch, "search": self._op_search, "list": self._op_list,
                   "ping": self._op_ping}.get(op if isinstance(op, str) else "")
        if handler is None:
            err = f"bad request: unknown op {_short(op)} (expected fetch, search, list or ping)"
            self._record(GatewayEvent("invalid", t0, time.monotonic() - start, False, error=err))
            return {"ok": False, "error": err}
        args: dict[str, Any] = {}
        results: list[dict[str, Any]] = []
        try:
            response = handler(req, args, results)
        except Exception as e:  # noqa: BLE001 - a request must never stop the server
            response = {"ok": False, "error": f"{op} failed: {e.__class__.__name__}: {_one_line(str(e))}"}
        hit = response.pop(CACHE_HIT, None)  # for the record only: not sent into the box
        self._record(
            GatewayEvent(op, t0, time.monotonic() - start, bool(response.get("ok")), args, results,
                         response.get("error"), cache_hit=hit)
        )
        return response

    def _op_ping(self, req: dict[str, Any], args: dict[str, Any], results: list[dict[str, Any]]) -> dict[str, Any]:
        return {"ok": True, "text": "pong"}

    def _op_list(self, req: dict[str, Any], args: dict[str, Any], results: list[dict[str, Any]]) -> dict[str, Any]:
        return {"ok": True, "text": self.workspace.listing_text()}

    def _op_search(self, req: dict[str, Any], args: dict[str, Any], results: list[dict[str, Any]]) -> dict[str, Any]:
        query = req.get("query")
        n = req["n"] if req.get("n") is not None else min(self.default_n, MAX_RESULTS)
        if not isinstance(query, str) or not query.strip():
            return {"ok": False, "error": "search needs a non-empty query"}
        if len(query) > MAX_QUERY_CHARS:
            return {"ok": False, "error": f"query too long ({len(query):,} characters; at most {MAX_QUERY_CHARS:,})"}
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_RESULTS:
            return {"ok": False, "error": f"n must be a whole number from 1 to {MAX_RESULTS}"}
        args.update(query=query, n=n)
        if self.search is None:
            return {"ok": False, "error": "search is not available in this run (no search backend is configured)"}
        try:
            hits = self.search.search(query, n)
        except (SearchUnavailable, ToolError) as e:
            return {"ok": False, "error": f"search unavailable: {_one_line(str(e))}"}
        results.extend({"rank": h.rank, "url": h.url} for h in hits)
        return {"ok": True, "text": format_results(query, hits), CACHE_HIT: cache_hit(hits)}

    def _op_fetch(self, req: dict[str, Any], args: dict[str, Any], results: list[dict[str, Any]]) -> dict[str, Any]:
        urls = req.get("urls")
        if isinstance(urls, str):
            urls = [urls]
        if not isinstance(urls, list) or not urls or not all(isinstance(u, str) for u in urls):
            return {"ok": False, "error": "fetch needs one or more URLs (or docids)"}
        if len(urls) > MAX_URLS:
            return {"ok": False, "error": f"too many URLs in one fetch ({len(urls)}; at most {MAX_URLS})"}
        args["urls"] = list(urls)
        pool = self._pool
        if pool is None or len(urls) == 1:
            out = [self._fetch_one(u) for u in urls]
        else:
            out = list(pool.map(self._fetch_one, urls))
        results.extend(
            {k: v for k, v in r.items() if k in ("ref", "ok", "path", "new", "chars", "source", "retrieved_at", "error")}
            for r in out
        )
        return {"ok": True, "results": [{k: v for k, v in r.items() if k not in ("chars", "source", "retrieved_at")}
                                        for r in out]}

    def _fetch_one(self, ref: str) -> dict[str, Any]:
        ref = ref.strip()
        if not ref:
            return {"ref": ref, "ok": False, "error": "empty URL"}
        if len(ref) > MAX_REF_CHARS:
            return {"ref": ref[:80] + "…", "ok": False, "error": f"URL too long (at most {MAX_REF_CHARS:,} characters)"}
        with self._idle:
            if self._closing:
                return {"ref": ref, "ok": False, "error": "the gateway is closed"}
            self._fetching += 1
        try:
            rec = self.fetch.fetch(ref)
        except ToolError as e:
            return {"ref": ref, "ok": False, "error": _one_line(str(e))}
        except FteError as e:
            return {"ref": ref, "ok": False, "error": _one_line(str(e))}
        except Exception as e:  # noqa: BLE001 - one bad page must not fail the others or the server
            return {"ref": ref, "ok": False, "error": f"fetch failed: {e.__class__.__name__}: {_one_line(str(e))}"}
        finally:
            with self._idle:
                self._fetching -= 1
                self._idle.notify_all()
        return {"ref": ref, "ok": True, "line": rec.line(),
                **rec.model_dump(mode="json", include={"path", "new", "chars", "source", "retrieved_at"})}
