"""A snapshot in use: the mode (record | replay | refresh), the pins (which capture served each resource),
per-run views, and the search wrapper.

* ``record``: a resource the store holds is answered from it; otherwise it is fetched live (under the fetch
  policy) and stored.
* ``replay``: never live. No HTTP client is built; a miss is refused in one line (``on_miss = "refuse"``)
  or stops the run (``"fail-run"``).
* ``refresh``: fetched live once per session and added as a new capture.

Within one session (one ``run``, one sweep) the first capture that served a resource is *pinned*: every
later request of the session gets the same capture, so every profile of a sweep sees the same page even
while a refresh runs. The pins are appended to the manifest (JSON lines) when the session has one, and a
session started with ``pins_from`` manifests serves exactly those captures.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Self

from ..errors import BudgetExceeded, FetchRefused, FteError, ToolError
from ..keyed_lock import KeyedLocks
from ..search.base import SearchResults, cache_hit
from ..workspace import Document, parse_document, render
from .index import Capture
from .store import SnapshotStore, search_key

if TYPE_CHECKING:  # pragma: no cover
    from ..fetch.http import Hop
    from ..search.base import SearchBackend, SearchResult

Mode = Literal["record", "replay", "refresh"]
MODES = ("record", "replay", "refresh")


class SnapshotMiss(FteError):
    """A replay asked for a resource the snapshot does not hold and ``on_miss = "fail-run"``: the run
    stops (an infrastructure failure, never a wrong answer)."""

    stop_reason = "snapshot_miss"


class SearchNotInSnapshot(ToolError):
    """A replayed search the snapshot does not hold (``on_miss = "refuse"``): one line for the model."""


def _shown(url: str) -> str:
    return url if len(url) <= 200 else url[:199] + "…"


class Snapshot:
    """One session over a :class:`SnapshotStore`. Thread-safe."""

    def __init__(self, store: SnapshotStore, mode: Mode = "record", on_miss: str = "refuse", *,
                 manifest: Path | None = None, pins_from: Iterable[Path] = ()):
        if mode not in MODES:
            raise ValueError(f"snapshot mode must be one of {', '.join(MODES)} (got {mode!r})")
        self.store = store
        self.mode: Mode = mode
        self.on_miss = on_miss
        self.manifest = Path(manifest) if manifest is not None else None
        self._pins: dict[tuple[str, str], str] = {}
        self._loaded: dict[tuple[str, str], str] = {}
        for path in [*pins_from, *([self.manifest] if self.manifest is not None else [])]:
            self._loaded.update(read_pins(path))
        if self.manifest is not None and self.manifest.exists():  # a resumed sweep keeps its own pins
            self._pins.update(read_pins(self.manifest))
        self._guard = threading.Lock()
        self._locks: KeyedLocks[tuple[str, str]] = KeyedLocks()

    @property
    def dir(self) -> Path:
        return self.store.dir

    def bind(self, run_id: str | None = None, run_dir: Path | None = None) -> RunView:
        """A view for one run: tags captures with the run and its turn, logs what served each resource to
        ``run_dir/snapshot.jsonl``."""
        return RunView(self, run_id, run_dir)

    # --- PageArchive (fte_shell.fetch.pages) ---------------------------------------------------------
    def capture(self, canon: str) -> PageLease:
        return PageLease(self, None, canon)

    def search_lease(self, backend: str, params: dict[str, Any]) -> SearchLease:
        return SearchLease(self, None, backend, params)

    # --- internals -----------------------------------------------------------------------------------
    def resolve(self, kind: str, key: str) -> Capture | None:
        """The capture that answers (kind, key) now, or None (live in record/refresh, a miss in replay)."""
        k = (kind, key)
        with self._guard:
            pin = self._pins.get(k) or (self._loaded.get(k) if self.mode != "refresh" else None)
        if pin is not None:
            cap = self.store.index.get(pin)
            if cap is not None or self.mode == "replay":
                return cap
        if self.mode == "refresh":
            return None
        return self.store.index.latest(kind, key)

    def pin(self, cap: Capture) -> None:
        k = (cap.kind, cap.key)
        with self._guard:
            if self._pins.get(k) == cap.id:
                return
            self._pins[k] = cap.id
            if self.manifest is not None:
                self.manifest.parent.mkdir(parents=True, exist_ok=True)
                with open(self.manifest, "a", encoding="utf-8") as f:
                    f.write(json.dumps(_pin_line(cap), ensure_ascii=False) + "\n")

    def miss(self, what: str, view: RunView | None, verb: str = "fetched") -> FteError:
        """The error for a replay miss (one line)."""
        if self.on_miss == "fail-run":
            err = SnapshotMiss(f"{what} is not in the snapshot {self.dir} (replay mode, on_miss = fail-run: the run stops)")
            if view is not None:
                view.failure = err
            return err
        return FetchRefused(f"{what}: not in the snapshot (replay mode: nothing is {verb} live)")


def _pin_line(cap: Capture) -> dict[str, Any]:
    return {"kind": cap.kind, "key": cap.key, "capture": cap.id, "uri": cap.uri, "time": cap.time,
            "status": cap.status, "sha256": cap.sha256}


def read_pins(path: Path) -> dict[tuple[str, str], str]:
    """(kind, key) -> capture id from a manifest or a run's ``snapshot.jsonl`` (first line per key wins)."""
    out: dict[tuple[str, str], str] = {}
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return out
    for line in lines:
        try:
            d = json.loads(line)
            k = (str(d["kind"]), str(d["key"]))
            if d.get("capture"):
                out.setdefault(k, str(d["capture"]))
        except (ValueError, KeyError, TypeError):
            continue  # a line cut by a crash
    return out


class RunView:
    """A :class:`Snapshot` seen by one run."""

    def __init__(self, snapshot: Snapshot, run_id: str | None, run_dir: Path | None):
        self.snapshot = snapshot
        self.run_id = run_id
        self.run_dir = run_dir
        self.turn = 0
        """The agent's current turn (from the trajectory's model_call events)."""
        self.failure: SnapshotMiss | None = None
        """Set when a replay miss must stop the run (``on_miss = "fail-run"``)."""
        self._lock = threading.Lock()

    @property
    def mode(self) -> Mode:
        return self.snapshot.mode

    def capture(self, canon: str) -> PageLease:
        return PageLease(self.snapshot, self, canon)

    def search_lease(self, backend: str, params: dict[str, Any]) -> SearchLease:
        return SearchLease(self.snapshot, self, backend, params)

    def listener(self, inner: Callable[[dict[str, Any]], None] | None) -> Callable[[dict[str, Any]], None]:
        """A trajectory listener that follows the turn, then calls ``inner``."""

        def listen(ev: dict[str, Any]) -> None:
            if ev.get("type") == "model_call" and isinstance(ev.get("turn"), int):
                self.turn = ev["turn"]
            if inner is not None:
                inner(ev)

        return listen

    def provenance(self) -> dict[str, Any]:
        return {"run": self.run_id, "turn": self.turn}

    def log(self, cap: Capture | None, served: str, kind: str, key: str) -> None:
        if self.run_dir is None:
            return
        line = {"kind": kind, "key": key, "served": served, "capture": cap.id if cap else None,
                "uri": cap.uri if cap else None, "time": cap.time if cap else None,
                "status": cap.status if cap else "miss", "turn": self.turn}
        with self._lock:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            with open(self.run_dir / "snapshot.jsonl", "a", encoding="utf-8") as f:
                f.write(json.dumps(line, ensure_ascii=False) + "\n")


class _Lease:
    kind = ""

    def __init__(self, snapshot: Snapshot, view: RunView | None, key: str):
        self.snapshot = snapshot
        self.view = view
        self.key = key
        self._lock = snapshot._locks[(self.kind, key)]
        self.stored = False

    def __enter__(self) -> Self:
        """Hold this key (one request per key at a time) and look it up: answered from the snapshot
        (:meth:`_answer`), left to the caller to fetch live, or — replaying — refused (:meth:`_miss`)."""
        self._lock.acquire()
        try:
            cap = self.snapshot.resolve(self.kind, self.key)
            if cap is None and self.snapshot.mode == "replay":
                self._served(None, "miss")
                raise self._miss()
            if cap is not None:
                self._answer(cap)
            return self
        except BaseException:
            self._lock.release()
            raise

    def _answer(self, cap: Capture) -> None:
        """Take the snapshot's answer ``cap`` (or raise what it recorded)."""
        raise NotImplementedError

    def _miss(self) -> Exception:
        """The error of a replay that finds no capture."""
        raise NotImplementedError

    def _served(self, cap: Capture | None, served: str) -> None:
        if cap is not None:
            self.snapshot.pin(cap)
        if self.view is not None:
            self.view.log(cap, served, self.kind, self.key)

    def _provenance(self) -> dict[str, Any]:
        p = self.view.provenance() if self.view is not None else {"run": None, "turn": None}
        return {"first_asked_by": p, "mode": self.snapshot.mode}


class PageLease(_Lease):
    """One page request: ``document`` is set when the snapshot answers; otherwise the caller downloads
    (``hop`` sees every exchange) and calls :meth:`store`. A refusal raised inside is recorded."""

    kind = "page"

    def __init__(self, snapshot: Snapshot, view: RunView | None, canon: str):
        super().__init__(snapshot, view, canon)
        self.document: Document | None = None
        self.hops: list[Hop] = []

    def _miss(self) -> Exception:
        return self.snapshot.miss(f"refused {_shown(self.key)}", self.view)

    def _answer(self, cap: Capture) -> None:
        if cap.status != "ok":
            meta = self.snapshot.store.metadata(cap)
            if self.snapshot.mode == "record" and not meta.get("redirects"):
                return  # refused before any request (address policy, DNS): checked again, live
            self._served(cap, "snapshot")
            raise FetchRefused(str(meta.get("error") or "refused (recorded)"))
        self.document = parse_document(self.snapshot.store.body(cap).decode("utf-8"))
        self._served(cap, "snapshot")

    def hop(self, hop: Hop) -> None:
        self.hops.append(hop)

    def store(self, doc: Document) -> Document:
        """Record the downloaded ``doc``; returns it as replay will give it (the workspace round trip)."""
        doc = parse_document(render(doc)[1])
        cap = self.snapshot.store.add_page(self.key, self.hops, doc=doc, error=None, provenance=self._provenance())
        self.stored = True
        self._served(cap, "live")
        return doc

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        try:
            if (isinstance(e, FetchRefused) and not isinstance(e, BudgetExceeded) and not self.stored
                    and self.document is None):
                cap = self.snapshot.store.add_page(self.key, self.hops, doc=None, error=e.message,
                                                   provenance=self._provenance())
                self._served(cap, "live")
        finally:
            self._lock.release()


class SearchLease(_Lease):
    """One search: ``results`` is set when the snapshot answers; otherwise call :meth:`store`."""

    kind = "search"

    def __init__(self, snapshot: Snapshot, view: RunView | None, backend: str, params: dict[str, Any]):
        self.backend, self.params = backend, params
        super().__init__(snapshot, view, search_key(backend, params))
        self.results: list[SearchResult] | None = None

    def _miss(self) -> Exception:
        err = self.snapshot.miss(f'search {json.dumps(self.params.get("q", ""), ensure_ascii=False)} '
                                 f'({self.backend})', self.view, "searched")
        return err if isinstance(err, SnapshotMiss) else SearchNotInSnapshot(err.message)

    def _answer(self, cap: Capture) -> None:
        from ..search.base import SearchResult

        data = json.loads(self.snapshot.store.body(cap))
        self.results = [SearchResult.from_dict(r) for r in data["results"]]
        self._served(cap, "snapshot")

    def store(self, results: list[SearchResult], exchange: Any = None) -> None:
        cap = self.snapshot.store.add_search(self.backend, self.params, [r.to_dict() for r in results],
                                             self._provenance(), exchange=exchange)
        self._served(cap, "live")

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


class _Lazy:
    """The real backend, built on first use (never in replay) and shared by every bound copy."""

    def __init__(self, factory: Callable[[], SearchBackend | None], owns: bool):
        self.factory, self.owns = factory, owns
        self.backend: SearchBackend | None = None
        self.lock = threading.Lock()

    def get(self) -> SearchBackend:
        with self.lock:
            if self.backend is None:
                self.backend = self.factory()
                if self.backend is None:
                    from ..errors import SearchUnavailable

                    raise SearchUnavailable("no search backend is configured for live searches")
            return self.backend


def search_params(query: str, n: int) -> dict[str, Any]:
    """The parameters of a search for a backend that names none of its own (its plugin's
    ``search_params``, :mod:`fte_shell.search.registry`, says what it sends): ``{q, n}``."""
    return {"n": int(n), "q": query}


class SnapshotSearch:
    """A search backend whose every search goes through the snapshot (keyed by backend + parameters)."""

    def __init__(self, archive: Snapshot | RunView, name: str, factory: Callable[[], SearchBackend | None], *,
                 owns: bool = True, default_n: int | None = None, _lazy: _Lazy | None = None,
                 params: Callable[[str, int], dict[str, Any]] = search_params):
        self.archive = archive
        self.name = name
        self.default_n = default_n
        self.params = params
        """What the backend sends for (query, n): the capture's key besides ``name``."""
        self._lazy = _lazy or _Lazy(factory, owns)

    def __repr__(self) -> str:
        return f"SnapshotSearch({self.name!r}, {self.archive.snapshot.dir if isinstance(self.archive, RunView) else self.archive.dir})"

    def bind(self, archive: Snapshot | RunView) -> SnapshotSearch:
        return SnapshotSearch(archive, self.name, self._lazy.factory, default_n=self.default_n, _lazy=self._lazy,
                              params=self.params)

    @property
    def backend(self) -> SearchBackend | None:
        return self._lazy.backend

    def search(self, query: str, n: int) -> list[SearchResult]:
        from ..search.cache import normalize_query

        q = normalize_query(query)
        with self.archive.search_lease(self.name, self.params(q, n)) as lease:
            if lease.results is not None:
                return SearchResults(lease.results, cache_hit=True)  # the snapshot answered
            from ..search.base import take_exchange, want_exchange

            backend = self._lazy.get()
            want_exchange()  # an HTTP backend keeps its exchange for the WARC records (none on a result-cache hit)
            try:
                inner = backend.search(q, n)
            finally:
                exchange = take_exchange()
            results = list(inner)
            lease.store(results, exchange)
            return SearchResults(results, cache_hit=bool(cache_hit(inner)))  # the result cache under it, or live

    def close(self) -> None:
        b = self._lazy.backend
        close = getattr(b, "close", None)
        if self._lazy.owns and callable(close):
            close()
