"""What every run of a sweep shares: the search backend (HotpotQA: its local corpus, built once), the
page source and the converted-page cache."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ...config import RunConfig
from ..datasets import Dataset
from .config import BenchConfig

if TYPE_CHECKING:  # pragma: no cover
    from ...fetch import PageCache, PageSource
    from ...search import SearchBackend

HOTPOTQA_CORPUS_VERSION = 2
"""Version of the HotpotQA → corpus conversion (2: HTML entities in titles and URLs decoded). A corpus
index built by another version is rebuilt once."""


def default_cache_root() -> Path:
    """``$FTE_CACHE_DIR``, else ``~/.cache/fte-shell``."""
    env = os.environ.get("FTE_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "fte-shell"


_corpus_lock = threading.Lock()


def _content_stamp(files: list[Path]) -> str:
    """First 16 hex digits of SHA-256 over the names and bytes of ``files`` (a copy or a ``touch`` of the
    data does not change it; an edit does)."""
    h = hashlib.sha256()
    for p in files:
        h.update(p.name.encode() + b"\0")
        with p.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        h.update(b"\0")
    return h.hexdigest()[:16]


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``path`` (other processes building the same corpus wait)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def hotpotqa_corpus_name(data_dir: Path) -> str:
    """The name a current HotpotQA corpus index carries in its ``meta.json``:
    ``hotpotqa-amor@v<version>-<content stamp of the data files>``."""
    files = sorted(Path(data_dir).glob("*.jsonl"))
    return f"hotpotqa-amor@v{HOTPOTQA_CORPUS_VERSION}-{_content_stamp(files)}"


def ensure_hotpotqa_corpus(data_dir: Path, corpus_dir: Path | None = None, log: Callable[[str], None] | None = None) -> Path:
    """Build the HotpotQA passages into a bm25s corpus once. The index is current — and reused, never
    rebuilt — while the data files' content and :data:`HOTPOTQA_CORPUS_VERSION` are unchanged (file times
    and the data directory's path do not matter). Threads and processes building the same index wait for
    one another (a lock file beside it) instead of building it twice."""
    from ...search.corpus import META, build_corpus, hotpotqa_docs

    data_dir = Path(data_dir).resolve()
    corpus_dir = Path(corpus_dir or default_cache_root() / "corpora" / "hotpotqa-amor").expanduser().resolve()
    name = hotpotqa_corpus_name(data_dir)

    def current() -> bool:
        try:
            meta = json.loads((corpus_dir / META).read_text())
        except (OSError, json.JSONDecodeError):
            return False
        return bool(meta.get("name") == name)

    with _corpus_lock:
        if current():
            return corpus_dir
        with _file_lock(corpus_dir.parent / f".{corpus_dir.name}.lock"):
            if current():  # another process built it while we waited
                return corpus_dir
            if log:
                log(f"building the HotpotQA corpus index in {corpus_dir} (once)")
            return build_corpus(hotpotqa_docs(data_dir), corpus_dir, name=name, source=str(data_dir))


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
    """Local corpus serving fetches by docid/url (HotpotQA), or None."""

    page_cache: PageCache | None
    """Converted-page cache shared by every profile, or None."""


def sweep_config(bench: BenchConfig, dataset: Dataset, config: RunConfig, log: Callable[[str], None] | None = None) -> RunConfig:
    """The run configuration with the sweep's search settings filled in (HotpotQA: its local corpus,
    built once; every dataset: the sweep's shared search-result cache)."""
    cfg = config.model_copy(deep=True)
    if dataset.kind == "hotpotqa":
        cfg.search.backend = "local"
        cfg.search.corpus = ensure_hotpotqa_corpus(Path(dataset.source), bench.corpus_dir, log)
    elif dataset.kind == "browsecomp-plus":  # its fixed corpus, indexed once (fte_shell/bench/bcplus.py)
        from ..bcplus import ensure_corpus

        cfg.search.backend = "local"
        cfg.search.corpus = ensure_corpus(Path(dataset.source), bench.corpus_dir, log)
    if cfg.search.cache_dir is None or dataset.kind in ("hotpotqa", "browsecomp-plus"):
        cfg.search.cache_dir = Path(bench.out) / "shared" / "search-cache"
    return cfg


def prepare_shared(bench: BenchConfig, dataset: Dataset, config: RunConfig, log: Callable[[str], None] | None = None,
                   *, filled: RunConfig | None = None) -> Shared:
    """Pick the search backend (HotpotQA: its local corpus) with the sweep's result cache. ``filled``: the
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
