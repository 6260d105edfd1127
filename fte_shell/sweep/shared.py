"""What every run of a sweep shares: its world (:class:`fte_shell.world.World`: the search backend — the
benchmark's world: HotpotQA's and BrowseComp-Plus's local corpus, built once —, the page source, the
converted-page cache or the snapshot)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..benchmarks.base import Dataset
from ..benchmarks.registry import get
from ..config import RunConfig
from ..record.sweepdir import SweepDir
from ..snapshot import MANIFEST
from ..world import World
from .config import BenchConfig


@dataclass(frozen=True)
class Shared:
    """The configuration and the world shared by every run of a sweep."""

    config: RunConfig
    """The run configuration with the sweep's search settings filled in."""

    world: World
    """The (cached) search backend, the local corpus serving fetches by docid/url (HotpotQA,
    BrowseComp-Plus), and the converted-page cache (``OUT/shared/page-cache``) or the snapshot
    (``[snapshot]``: the one store, its manifest in ``OUT/shared/``) shared by every profile."""


def sweep_config(bench: BenchConfig, dataset: Dataset, config: RunConfig, log: Callable[[str], None] | None = None) -> RunConfig:
    """The run configuration with the sweep's search settings filled in: the benchmark's world
    (:meth:`fte_shell.benchmarks.base.Benchmark.world`: a local corpus, built once; a closed world) and,
    for every dataset, the sweep's shared search-result cache."""
    cfg = config.model_copy(deep=True)
    plan = get(dataset.kind).world(Path(dataset.source), bench.corpus_dir, log, cfg)
    if plan.corpus is not None:
        cfg.search.backend = "local"
        cfg.search.corpus = plan.corpus
    if plan.prompts_file is not None and cfg.agent.standard.prompts_file is None:
        cfg.agent.standard.prompts_file = plan.prompts_file
    if cfg.search.cache_dir is None or plan.closed:
        cfg.search.cache_dir = SweepDir(Path(bench.out)).shared / "search-cache"
    return cfg


def prepare_shared(bench: BenchConfig, dataset: Dataset, config: RunConfig, log: Callable[[str], None] | None = None,
                   *, filled: RunConfig | None = None) -> Shared:
    """The sweep's world (the benchmark's world) with the sweep's result cache. ``filled``: the result of
    :func:`sweep_config` when the caller has it already."""
    cfg = filled if filled is not None else sweep_config(bench, dataset, config, log)
    shared = SweepDir(Path(bench.out)).shared
    return Shared(config=cfg, world=World.from_config(cfg, manifest=shared / MANIFEST, page_cache_dir=shared / "page-cache"))
