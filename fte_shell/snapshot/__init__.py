"""Reproducible web: every page and search recorded as WARC 1.1, runs replayed from it byte for byte.

* :class:`SnapshotStore` (store.py): the directory — WARC files (one per writer process), ``index.sqlite``.
* :class:`Snapshot` (session.py): one session in a mode (record | replay | refresh) with its pins and
  manifest; :meth:`Snapshot.bind` gives a run its :class:`RunView`. Both are the ``page_cache`` a
  :class:`~fte_shell.fetch.FetchService` takes (the ``PageArchive`` protocol).
* :class:`SnapshotSearch`: a search backend whose searches go through the snapshot.
* :func:`open_session`: the session of a configuration (:class:`fte_shell.world.World` binds it to runs).
* tools.py: ls / show / verify / merge / export (``fte-shell snapshot …``). docs/snapshots.md.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

from .index import Capture, Index
from .session import (
    MODES,
    RunView,
    SearchNotInSnapshot,
    Snapshot,
    SnapshotMiss,
    SnapshotSearch,
    read_pins,
    search_params,
)
from .store import SnapshotStore, search_key, search_uri

if TYPE_CHECKING:  # pragma: no cover
    from ..config import RunConfig

__all__ = [
    "MANIFEST",
    "MODES",
    "Capture",
    "Index",
    "RunView",
    "SearchNotInSnapshot",
    "Snapshot",
    "SnapshotMiss",
    "SnapshotSearch",
    "SnapshotStore",
    "open_session",
    "open_store",
    "read_pins",
    "search_key",
    "search_params",
    "search_uri",
]

MANIFEST = "snapshot-manifest.jsonl"
"""A sweep's manifest, under ``OUT/shared/``."""

_stores: dict[Path, SnapshotStore] = {}
_stores_lock = threading.Lock()


def open_store(directory: Path | str) -> SnapshotStore:
    """The store of ``directory``, opened once per process (so the process writes ONE WARC file)."""
    path = Path(directory).expanduser().resolve()
    with _stores_lock:
        store = _stores.get(path)
        if store is None or not (path / "index.sqlite").exists():
            store = _stores[path] = SnapshotStore(path)
        return store


def open_session(config: RunConfig, manifest: Path | None = None) -> Snapshot | None:
    """A :class:`Snapshot` for ``config.snapshot`` (None when no ``dir`` is set). ``manifest``: where
    the session appends its pins (a sweep's)."""
    sc = config.snapshot
    if sc.dir is None:
        return None
    return Snapshot(open_store(sc.dir), sc.mode, sc.on_miss, manifest=manifest,
                    pins_from=[sc.manifest] if sc.manifest is not None else [])
