"""What every run of a sweep shares: the search backend (the benchmark's world: HotpotQA's and
BrowseComp-Plus's local corpus, built once), the page source and the converted-page cache."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ...benchmarks.base import Dataset
from ...benchmarks.registry import get
from ...config import RunConfig
from .config import BenchConfig

if TYPE_CHECKING:  # pragma: no cover
    from ...fetch import PageCache, PageSource
    from ...search import SearchBackend


def _page_cache(path: Path) -> PageCache:
    """The converted-page cache every profile of the sweep shares."""
    from ...fetch import PageCache

    return PageCache(path)


@dataclass(frozen=True)
class Shared:
    """Search backend, page source and page cache shared by every run of a sweep."""

    config: RunConfig
    """The run configuration with the sweep's search settings filled in."""

    search: SearchBackend | None
    """The (cached) search backend."""

    page_source: PageSource | None
    """Local corpus serving fetches by docid/url (HotpotQA, BrowseComp-Plus), or None."""

    page_cache: PageCache | None
    """Converted-page cache shared by every profile, or None."""


def sweep_config(bench: BenchConfig, dataset: Dataset, config: RunConfig, log: Callable[[str], None] | None = None) -> RunConfig:
    """The run configuration with the sweep's search settings filled in: the benchmark's world
    (:meth:`fte_shell.benchmarks.base.Benchmark.world`: a local corpus, built once; a closed world) and,
    for every dataset, the sweep's shared search-result cache."""
    cfg = config.model_copy(deep=True)
    plan = get(dataset.kind).world(Path(dataset.source), bench.corpus_dir, log)
    if plan.corpus is not None:
        cfg.search.backend = "local"
        cfg.search.corpus = plan.corpus
    if cfg.search.cache_dir is None or plan.closed:
        cfg.search.cache_dir = Path(bench.out) / "shared" / "search-cache"
    return cfg


def prepare_shared(bench: BenchConfig, dataset: Dataset, config: RunConfig, log: Callable[[str], None] | None = None,
                   *, filled: RunConfig | None = None) -> Shared:
    """Pick the search backend (the benchmark's world) with the sweep's result cache. ``filled``: the
    result of :func:`sweep_config` when the caller has it already."""
    from ...search import make_page_source, make_search
    from ...snapshot import MANIFEST, open_session, snapshot_search

    cfg = filled if filled is not None else sweep_config(bench, dataset, config, log)
    page_source = make_page_source(cfg.search)
    snap = open_session(cfg, manifest=Path(bench.out) / "shared" / MANIFEST)  # [snapshot]: the one store
    if snap is not None:
        return Shared(config=cfg, search=snapshot_search(cfg.search, snap), page_source=page_source,
                      page_cache=snap)  # type: ignore[arg-type]
    search = make_search(cfg.search)
    return Shared(config=cfg, search=search, page_source=page_source,
                  page_cache=_page_cache(Path(bench.out) / "shared" / "page-cache"))
