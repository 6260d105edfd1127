"""Reproducible web: every page and search recorded as WARC 1.1, runs replayed from it byte for byte.

* :class:`SnapshotStore` (store.py): the directory — WARC files (one per writer process), ``index.sqlite``.
* :class:`Snapshot` (session.py): one session in a mode (record | replay | refresh) with its pins and
  manifest; :meth:`Snapshot.bind` gives a run its :class:`RunView`. Both are the ``page_cache`` a
  :class:`~fte_shell.fetch.FetchService` takes (the ``PageArchive`` protocol).
* :class:`SnapshotSearch`: a search backend whose searches go through the snapshot.
* tools.py: ls / show / verify / merge / export (``fte-shell snapshot …``). docs/snapshots.md.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
    from ..config import RunConfig, SearchConfig
    from ..search.base import SearchBackend

__all__ = [
    "MODES", "Capture", "Index", "RunView", "SearchNotInSnapshot", "Snapshot", "SnapshotMiss", "SnapshotSearch",
    "SnapshotStore", "bind_run", "open_session", "open_store", "read_pins", "search_key", "search_params",
    "search_uri", "snapshot_search",
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


def _backend_name(cfg: SearchConfig, snap: Snapshot | RunView) -> str | None:
    """The name the configured backend records under, found without building it (a replay needs no key)."""
    from urllib.parse import urlsplit

    from ..search import _serper_key, open_corpus
    from ..search.serper import DEFAULT_URL

    serper = "serper" if cfg.serper_url == DEFAULT_URL else f"serper@{urlsplit(cfg.serper_url).netloc or cfg.serper_url}"
    kind = cfg.backend
    if kind == "none":
        return None
    if kind == "auto":
        store = snap.snapshot.store if isinstance(snap, RunView) else snap.store
        recorded = snap.mode == "replay" and any(
            c.kind == "search" and f'"backend": "{serper}"' in c.key for c in store.index.all())
        kind = "serper" if _serper_key(cfg) or recorded else "local" if cfg.corpus is not None else "none"
    if kind == "serper":
        return serper
    if kind == "local" and cfg.corpus is not None:
        return open_corpus(cfg.corpus).name
    return None if kind == "none" else "local"


def snapshot_search(cfg: SearchConfig, archive: Snapshot | RunView) -> SnapshotSearch | None:
    """The configured search through ``archive`` (the real backend is built on the first live search)."""
    from ..search import make_search

    name = _backend_name(cfg, archive)
    if name is None:
        return None
    return SnapshotSearch(archive, name, lambda: make_search(cfg), default_n=cfg.num_results)


def bind_run(
    config: RunConfig,
    search: SearchBackend | None,
    page_cache: Any,
    page_source: Any,
    run_id: str,
    run_dir: Path,
    log: Callable[[dict[str, Any]], None] | None,
    cleanup: contextlib.ExitStack,
) -> tuple[SearchBackend | None, Any, Any, Callable[[dict[str, Any]], None] | None, dict[str, Any]]:
    """What :func:`fte_shell.runner.run_question` runs with: ``(search, page_cache, page_source, log,
    meta)``. With a snapshot (given as ``page_cache`` by a sweep, or ``config.snapshot.dir``), the page
    cache becomes the run's :class:`RunView`, searches go through it, ``log`` follows the turn and ``meta``
    says how the run used the snapshot. ``page_source`` (a local corpus) becomes a closed world unless ``search.open_web``."""
    from ..fetch.pages import ClosedWorld

    if page_source is not None and not config.search.open_web and not getattr(page_source, "closed_world", False):
        page_source = ClosedWorld(page_source)
    snap = page_cache if isinstance(page_cache, Snapshot) else None
    if snap is None and page_cache is None:
        snap = open_session(config)
    if snap is None:
        return search, page_cache, page_source, log, {}
    view = snap.bind(run_id, run_dir)
    if isinstance(search, SnapshotSearch):
        search = search.bind(view)
    elif search is None:
        search = snapshot_search(config.search, view)
        if search is not None:
            cleanup.callback(search.close)
    else:
        given = search
        search = SnapshotSearch(view, given.name, lambda: given, owns=False, default_n=getattr(given, "default_n", None))
    meta = {"snapshot": {"dir": str(snap.dir), "mode": snap.mode, "on_miss": snap.on_miss,
                         "replayed": snap.mode == "replay"}}
    return search, view, page_source, view.listener(log), meta


class ShellSnapshot:
    """What ``fte-shell shell --snapshot DIR`` gives its sandbox: the page store and the search."""

    def __init__(self, config: RunConfig, snap: Snapshot):
        self.view = snap.bind(None, None)
        self.search = snapshot_search(config.search, self.view)


def shell_session(config: RunConfig, directory: Path | None, mode: str | None) -> tuple[ShellSnapshot | None, RunConfig]:
    """``(snapshot, config)`` for the interactive shell: ``directory``/``mode`` override ``[snapshot]``."""
    from pydantic import ValidationError

    from ..errors import ConfigError

    cfg = config.model_copy(deep=True)
    try:
        if directory is not None:
            cfg.snapshot.dir = directory
        if mode is not None:
            cfg.snapshot.mode = mode  # type: ignore[assignment]
    except ValidationError as e:
        raise ConfigError(f"--snapshot-mode must be record, replay or refresh (got {mode!r})") from e
    snap = open_session(cfg)
    return (ShellSnapshot(cfg, snap) if snap is not None else None), cfg
