"""What every run of a sweep shares: its world (:class:`fte_shell.world.World`: the search backend — the
benchmark's world: HotpotQA's and BrowseComp-Plus's local corpus, built once —, the page source, the
converted-page cache or the snapshot)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
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

    worlds: dict[str, World] = field(default_factory=dict)
    """``bench --retrievers``: the world of each retriever arm (its own search over the same corpus; the
    page source, page cache and snapshot are :attr:`world`'s)."""

    def world_for(self, retriever: str | None) -> World:
        """The world of a run of the retriever arm ``retriever`` (None: the sweep's own)."""
        return self.world if retriever is None else self.worlds[retriever]


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
    if bench.retrievers:  # the shared world is the first arm's (the setting varies by arm)
        cfg.search.retriever = bench.retrievers[0]
    return cfg


def prepare_shared(bench: BenchConfig, dataset: Dataset, config: RunConfig, log: Callable[[str], None] | None = None,
                   *, filled: RunConfig | None = None) -> Shared:
    """The sweep's world (the benchmark's world) with the sweep's result cache. ``filled``: the result of
    :func:`sweep_config` when the caller has it already."""
    cfg = filled if filled is not None else sweep_config(bench, dataset, config, log)
    shared = SweepDir(Path(bench.out)).shared
    build_indexes(cfg, bench.retrievers or [cfg.search.retriever], log)
    world = World.from_config(cfg, manifest=shared / MANIFEST, page_cache_dir=shared / "page-cache")
    worlds = {}
    for spec in bench.retrievers:
        arm = cfg.model_copy(deep=True)
        arm.search.retriever = spec
        worlds[spec] = world if spec == cfg.search.retriever else world.with_search(arm.search)
    return Shared(config=cfg, world=world, worlds=worlds)


def build_indexes(cfg: RunConfig, specs: list[str], log: Callable[[str], None] | None = None) -> None:
    """Build the index each retriever of ``specs`` needs over the sweep's local corpus before the first run
    (not inside a run's time budget); nothing when the search is no local corpus or is replayed."""
    from ..search import uses_corpus
    from ..search.retrievers import build_index, index_path, parse_spec

    if not uses_corpus(cfg.search) or cfg.search.corpus is None or (
            cfg.snapshot.dir is not None and cfg.snapshot.mode == "replay"):
        return
    for text in specs:
        spec = parse_spec(text)
        settings = cfg.search.model_copy(update={"retriever": text})
        if log and not index_path(cfg.search.corpus, spec, settings).is_dir():
            log(f"building the {text} index of {cfg.search.corpus} (once)")
        build_index(cfg.search.corpus, spec, settings)
