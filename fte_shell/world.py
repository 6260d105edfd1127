"""THE world a run sees: the search backend, the page source (a local corpus), the page cache and the
snapshot — built from the configuration in one call, bound to one run in one call.

::

    world = World.from_config(config)                       # one run, a sweep (shared by every run), a shell
    with world.bind(run_id, run_dir, log) as run_world:     # what one run uses
        run_world.search, run_world.page_source, run_world.page_cache, run_world.meta, run_world.listener

With a snapshot, the run's page cache is its :class:`~fte_shell.snapshot.RunView` (every page fetched
through it is recorded or replayed), its searches go through that view, its trajectory listener follows
the turn, and ``meta`` says how the run used the snapshot. A local corpus is a closed world (fetch refuses
every URL it does not hold) unless ``search.open_web``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from .config import RunConfig, SearchConfig
from .fetch import ClosedWorld, PageArchive, PageCache, PageSource
from .record.rundir import EventListener
from .search import SearchBackend, make_page_source, make_search, uses_corpus
from .search.registry import selected, selected_for_replay
from .snapshot import RunView, Snapshot, SnapshotSearch, open_session


@dataclass
class RunWorld:
    """What one run sees of the world (what the profiles, the sandbox and its gateway use)."""

    search: SearchBackend | None = None
    """The run's search backend; None = no search tool."""

    page_source: PageSource | None = None
    """Local corpus that fetch consults for docids and known URLs; None = web only."""

    page_cache: PageCache | PageArchive | None = None
    """Converted pages shared by every run of a sweep, or the run's snapshot view."""

    snapshot: RunView | None = None
    """The run's view of the snapshot, when there is one."""

    meta: dict[str, Any] = field(default_factory=dict)
    """What ``result.json``'s ``meta`` records about the world (how the run used the snapshot)."""

    listener: EventListener | None = None
    """The run's trajectory listener (with a snapshot: it follows the turn, then calls the caller's)."""

    closers: list[Callable[[], None]] = field(default_factory=list)
    """What :meth:`close` calls, last first."""

    def close(self) -> None:
        while self.closers:
            self.closers.pop()()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class World:
    """Search, page source, page cache and snapshot, shared by the runs bound to it."""

    def __init__(self, search: SearchBackend | None = None, page_source: PageSource | None = None,
                 page_cache: PageCache | PageArchive | None = None, snapshot: Snapshot | None = None, *,
                 open_web: bool = False, owns_search: bool = False):
        """``page_source`` becomes a closed world unless ``open_web``; ``owns_search``: :meth:`close`
        closes the search backend."""
        if page_source is not None and not open_web and not getattr(page_source, "closed_world", False):
            page_source = ClosedWorld(page_source)
        self.search, self.page_source, self.page_cache, self.snapshot = search, page_source, page_cache, snapshot
        self.owns_search = owns_search
        self.meta: dict[str, Any] = {}
        """What ``result.json``'s ``meta`` records about every run of this world (its retriever)."""

    @classmethod
    def from_config(cls, config: RunConfig, *, manifest: Path | None = None, page_cache_dir: Path | None = None,
                    pages: bool = True) -> World:
        """The world of ``config``: its local corpus (unless not ``pages``), its snapshot (``snapshot.dir``;
        ``manifest``: where the session appends its pins) or else a page cache in ``page_cache_dir``, and
        its search (through the snapshot when there is one: the real backend is built on the first live
        search). Raises :class:`~fte_shell.errors.SearchUnavailable` when the configured search cannot work."""
        page_source = make_page_source(config.search) if pages else None
        snap = open_session(config, manifest=manifest)
        if snap is not None:
            world = cls(snapshot_search(config.search, snap), page_source, snapshot=snap,
                        open_web=config.search.open_web, owns_search=True)
        else:
            cache = PageCache(page_cache_dir) if page_cache_dir is not None else None
            world = cls(make_search(config.search), page_source, cache, open_web=config.search.open_web,
                        owns_search=True)
        world.meta = retriever_meta(config.search)
        return world

    def with_search(self, cfg: SearchConfig) -> World:
        """A world with this one's page source, page cache and snapshot but the search of ``cfg`` (e.g.
        another retriever over the same corpus: a sweep's retriever arm); it owns that search."""
        w = World(page_cache=self.page_cache, snapshot=self.snapshot, owns_search=True)
        w.page_source = self.page_source  # already a closed world when this one's is
        w.search = snapshot_search(cfg, self.snapshot) if self.snapshot is not None else make_search(cfg)
        w.meta = retriever_meta(cfg)
        return w

    def bind(self, run_id: str | None, run_dir: Path | None, log: EventListener | None = None) -> RunWorld:
        """The world of one run (``run_dir`` None: no ``snapshot.jsonl``, e.g. the interactive shell)."""
        snap = self.snapshot
        if snap is None:
            return RunWorld(self.search, self.page_source, self.page_cache, meta=dict(self.meta), listener=log)
        view = snap.bind(run_id, run_dir)
        search = self.search
        if isinstance(search, SnapshotSearch):
            search = search.bind(view)
        elif search is not None:
            given = search
            search = SnapshotSearch(view, given.name, lambda: given, owns=False, default_n=getattr(given, "default_n", None))
        meta = {**self.meta, "snapshot": {"dir": str(snap.dir), "mode": snap.mode, "on_miss": snap.on_miss,
                                          "replayed": snap.mode == "replay"}}
        return RunWorld(search, self.page_source, view, view, meta, view.listener(log))

    def close(self) -> None:
        """Close the search backend when this world made it (a shared local corpus stays open)."""
        search, self.search = self.search, None
        close = getattr(search, "close", None)
        if self.owns_search and callable(close):
            close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def retriever_meta(cfg: SearchConfig) -> dict[str, Any]:
    """``{"retriever": SPEC}`` when the configured search ranks a local corpus (what ``result.json``'s
    ``meta`` records), else nothing."""
    return {"retriever": cfg.retriever} if uses_corpus(cfg) else {}


def snapshot_search(cfg: SearchConfig, archive: Snapshot | RunView) -> SnapshotSearch | None:
    """The configured search through ``archive``, keyed by the name the backend records under and the
    parameters it sends (found without building it: a replay needs no key; the real backend is built on
    the first live search). In a replay, ``auto`` also picks a backend whose searches the snapshot holds."""
    snap = archive.snapshot if isinstance(archive, RunView) else archive
    if snap.mode == "replay":
        keys = [c.key for c in snap.store.index.all() if c.kind == "search"]

        def recorded(name: str) -> bool:
            return any(f'"backend": {json.dumps(name, ensure_ascii=False)}' in k for k in keys)

        plugin = selected_for_replay(cfg, recorded)
    else:
        plugin = selected(cfg)
    if plugin.name == "none":
        return None
    return SnapshotSearch(archive, plugin.recorded_name(cfg), lambda: make_search(cfg), default_n=cfg.num_results,
                          params=plugin.search_params)
