"""A result cache in front of any backend, so every profile of a comparison sees identical results.

Results are kept per (backend name, query, n) in memory and, given a directory, as one JSON file per key
(written atomically: temp file + rename), shared by every run that points at the same directory.
Concurrent identical queries make one backend call. Errors are never cached.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from ..keyed_lock import KeyedLocks
from .base import SearchBackend, SearchResult, SearchResults


def normalize_query(query: str) -> str:
    """Whitespace-collapsed query: the form used in the cache key."""
    return " ".join(query.split())


class CachedSearch:
    """A :class:`SearchBackend` answering from the cache first, then from ``backend``."""

    def __init__(
        self,
        backend: SearchBackend,
        cache_dir: Path | None = None,
        *,
        owns_backend: bool = True,
        default_n: int | None = None,
    ) -> None:
        self.backend = backend
        self.default_n = default_n
        """Result count used when a caller gives none (``search.num_results``; the gateway reads it so the
        shell's ``search`` without ``-n`` matches the structured tool's default)."""
        self.owns_backend = owns_backend
        """Whether :meth:`close` closes ``backend`` (False for a corpus shared through ``open_corpus``)."""
        self.name = backend.name
        self.cache_dir = Path(cache_dir).expanduser() if cache_dir is not None else None
        self.hits = 0
        """Searches answered from the cache (memory or disk)."""
        self.misses = 0
        """Searches that called the backend."""
        self._mem: dict[tuple[str, str, int], list[SearchResult]] = {}
        self._locks: KeyedLocks[tuple[str, str, int]] = KeyedLocks()

    def __repr__(self) -> str:
        return f"CachedSearch({self.backend!r}, cache_dir={str(self.cache_dir) if self.cache_dir else None!r})"

    def search(self, query: str, n: int) -> list[SearchResult]:
        """Results for (query, n): from memory, else from the cache directory, else from the backend."""
        key = (self.name, normalize_query(query), int(n))
        with self._locks[key]:
            cached = self._mem.get(key)
            if cached is None:
                cached = self._read(key)
                if cached is not None:
                    self._mem[key] = cached
            if cached is not None:
                self.hits += 1
                return SearchResults(cached, cache_hit=True)
            results = list(self.backend.search(key[1], key[2]))
            self.misses += 1
            self._mem[key] = results
            self._write(key, results)
            return SearchResults(results, cache_hit=False)

    def close(self) -> None:
        """Close the wrapped backend if this cache owns it and it can be closed."""
        if not self.owns_backend:
            return
        close = getattr(self.backend, "close", None)
        if callable(close):
            close()

    def path_for(self, query: str, n: int) -> Path | None:
        """The cache file of (query, n), or None without a cache directory."""
        return self._path((self.name, normalize_query(query), int(n)))

    def _path(self, key: tuple[str, str, int]) -> Path | None:
        if self.cache_dir is None:
            return None
        digest = hashlib.sha256(json.dumps(list(key), ensure_ascii=False).encode()).hexdigest()[:32]
        folder = re.sub(r"[^A-Za-z0-9._-]+", "_", key[0]) or "backend"
        return self.cache_dir / folder / f"{digest}.json"

    def _read(self, key: tuple[str, str, int]) -> list[SearchResult] | None:
        path = self._path(key)
        if path is None or not path.is_file():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if [data["backend"], data["query"], data["n"]] != list(key):
                return None  # a hash collision or a foreign file: ask the backend
            return [SearchResult.from_dict(r) for r in data["results"]]
        except (OSError, ValueError, KeyError, TypeError):
            return None  # unreadable entry: re-query and overwrite it

    def _write(self, key: tuple[str, str, int], results: list[SearchResult]) -> None:
        path = self._path(key)
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        record = {
            "backend": key[0],
            "query": key[1],
            "n": key[2],
            "created": datetime.now(UTC).isoformat(timespec="seconds"),
            "results": [r.to_dict() for r in results],
        }
        fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(record, fh, ensure_ascii=False, indent=1)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
