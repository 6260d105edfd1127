"""One search and page cache for a whole distributed sweep: :class:`CacheService` runs as a Ray actor on
the driver's node (over the sweep's own ``shared/search-cache`` and ``shared/page-cache`` directories and
its search backend / local corpus); every node talks to it through the proxies below, which implement the
interfaces the run already uses (``SearchBackend``, ``PageSource``, ``PageCache``'s ``get``/``put``).
It serves one search per retriever (``bench --retrievers``: each arm's, built on its first use, recorded
under the name a local sweep's arm records under).

So every profile on every node sees the same results and page text, and a URL is downloaded once per
sweep: the first node that misses a URL gets a *lease* to download it; others asking for the same URL
wait (up to :data:`LEASE_S`) for its ``put``. A lease ends with the ``put``, with the holder's next
``get`` (its download failed), when its run ends, or after :data:`LEASE_S`.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..search.cache import normalize_query
from .runenv import restore_secrets

if TYPE_CHECKING:  # pragma: no cover
    from ..config import RunConfig
    from ..search.base import SearchBackend, SearchResult
    from ..workspace import Document

LEASE_S = 120.0
"""Longest time a node waits for another node's download of the same URL before downloading it itself."""


class CacheService:
    """The actor body (a plain class; :mod:`.executor` wraps it with ``ray.remote``, threaded)."""

    def __init__(self, config: RunConfig, has_search: bool, has_pages: bool, page_cache_dir: str) -> None:
        from ..fetch import PageCache
        from ..search import make_page_source

        cfg = config.model_copy(deep=True)
        restore_secrets(cfg)  # the Serper key, from this actor's runtime environment
        self._search_cfg = cfg.search
        self._has_search = has_search
        self._searches: dict[str, SearchBackend | None] = {}
        """The search of each retriever asked for (the sweep's own, and each ``--retrievers`` arm's)."""
        self._building = threading.Lock()
        if has_search:
            self._backend(None)  # the sweep's own: a search that cannot be built fails the sweep here
        self.page_source = make_page_source(cfg.search) if has_pages else None
        self.page_cache = PageCache(Path(page_cache_dir))
        self._cond = threading.Condition()
        self._leases: dict[str, tuple[str, float]] = {}
        self._checkpoints: dict[str, tuple[list[str], list[str]]] = {}
        """Run id -> (the longest trajectory an earlier attempt left, this attempt's lines so far)."""
        self.puts: Counter[str] = Counter()
        """Pages stored per canonical URL (a URL downloaded once per sweep: every count is 1)."""
        self.counts: Counter[str] = Counter()

    def _backend(self, retriever: str | None) -> SearchBackend | None:
        """The search of ``retriever`` (None: the sweep's own ``[search] retriever``), built on first use
        from the sweep's ``[search]`` with that retriever, as a local sweep builds a retriever arm's."""
        from ..search import make_search

        key = retriever or self._search_cfg.retriever
        if key in self._searches:  # no lock: a search never waits for another retriever's first build
            return self._searches[key]
        with self._building:
            if key not in self._searches:
                self._searches[key] = (make_search(self._search_cfg.model_copy(update={"retriever": key}))
                                       if self._has_search else None)
            return self._searches[key]

    def info(self, retriever: str | None = None) -> dict[str, Any]:
        """Name and default result count of ``retriever``'s search (what the gateway reads)."""
        b = self._backend(retriever)
        return {"name": getattr(b, "name", None), "default_n": getattr(b, "default_n", None)}

    def search(self, query: str, n: int, retriever: str | None = None) -> list[SearchResult]:
        backend = self._backend(retriever)
        if backend is None:
            from ..errors import SearchUnavailable

            raise SearchUnavailable("this sweep has no search backend")
        self.counts["search"] += 1
        return backend.search(normalize_query(query), n)

    def lookup(self, ref: str) -> Document | None:
        self.counts["lookup"] += 1
        return self.page_source.lookup(ref) if self.page_source is not None else None

    def page_get(self, url: str, holder: str) -> Document | None:
        """The cached page, or None with a lease to download it (after waiting out another holder's)."""
        deadline = time.monotonic() + LEASE_S
        with self._cond:
            self._release_held_by(holder)  # its previous download failed (no put came)
            while True:
                doc = self.page_cache.get(url)
                if doc is not None:
                    self.counts["page_hit"] += 1
                    return doc
                lease = self._leases.get(url)
                now = time.monotonic()
                if lease is None or lease[1] <= now or now >= deadline:
                    self._leases[url] = (holder, now + LEASE_S)
                    self.counts["page_miss"] += 1
                    return None
                self._cond.wait(timeout=min(lease[1], deadline) - now)

    def page_put(self, url: str, doc: Document, holder: str) -> None:
        self.page_cache.put(url, doc)
        with self._cond:
            self.puts[url] += 1
            if self._leases.get(url, ("",))[0] == holder:
                del self._leases[url]
            self._cond.notify_all()

    def release(self, holder: str) -> None:
        """End every lease of ``holder`` (its run is over)."""
        with self._cond:
            self._release_held_by(holder)

    def _release_held_by(self, holder: str) -> None:
        gone = [u for u, (h, _) in self._leases.items() if h == holder]
        for u in gone:
            del self._leases[u]
        if gone:
            self._cond.notify_all()

    # --- run checkpoints: a run on a lost node resumes from its trajectory (fte_shell.episode.resume) ---------
    def checkpoint(self, run: str, line: str) -> None:
        """One trajectory line of run ``run`` as its node wrote it."""
        with self._cond:
            self._checkpoints.setdefault(run, ([], []))[1].append(line)

    def begin(self, run: str) -> list[str]:
        """A new attempt at ``run``: the longest trajectory (by replies) an earlier attempt left, to resume."""
        with self._cond:
            best, current = self._checkpoints.get(run, ([], []))
            if _replies(current) > _replies(best):
                best = current
            self._checkpoints[run] = (best, [])
            return list(best)

    def forget(self, run: str) -> None:
        """``run``'s directory reached the driver: its checkpoint is no longer needed."""
        with self._cond:
            self._checkpoints.pop(run, None)

    def stats(self) -> dict[str, Any]:
        """Calls served and pages stored per URL (for tests and the closing log line)."""
        return {"counts": dict(self.counts), "puts": dict(self.puts)}


def _replies(lines: list[str]) -> int:
    return sum('"type": "model_call"' in line for line in lines)


# --- the node side ------------------------------------------------------------------------------------
def _get(ref: Any) -> Any:
    import ray

    return ray.get(ref)


class RemoteSearch:
    """A ``SearchBackend`` answered by the sweep's cache actor (its result cache and the search of
    ``retriever``, None: the sweep's own)."""

    def __init__(self, actor: Any, name: str, default_n: int | None, retriever: str | None = None) -> None:
        self.actor = actor
        self.name = name
        self.default_n = default_n
        self.retriever = retriever

    def search(self, query: str, n: int) -> list[SearchResult]:
        return _get(self.actor.search.remote(query, n, self.retriever))

    def close(self) -> None:
        """Nothing to close: the backend lives on the driver."""


class RemotePageSource:
    """A ``PageSource`` (local corpus) served by the cache actor on the driver's node."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor

    def lookup(self, ref: str) -> Document | None:
        return _get(self.actor.lookup.remote(ref))


class RemotePageCache:
    """``PageCache``'s ``get``/``put`` through the cache actor, with one lease holder per thread."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor
        self._token = uuid.uuid4().hex
        self._holders: set[str] = set()

    def _holder(self) -> str:
        h = f"{self._token}:{threading.get_ident()}"
        self._holders.add(h)
        return h

    def get(self, url: str) -> Document | None:
        return _get(self.actor.page_get.remote(url, self._holder()))

    def put(self, url: str, doc: Document) -> None:
        _get(self.actor.page_put.remote(url, doc, self._holder()))

    def close(self) -> None:
        """Release this run's leases (downloads it started and never stored)."""
        for h in list(self._holders):
            with contextlib.suppress(Exception):  # the lease times out anyway
                _get(self.actor.release.remote(h))
