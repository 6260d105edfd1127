"""Search backends (Serper, a local bm25s corpus), the result cache and the one result rendering.

``make_search(cfg)`` picks the backend from :class:`~fte_shell.config.SearchConfig` and wraps it in the
result cache; ``make_page_source(cfg)`` gives the local corpus (if any) for fetch to serve docids from.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from ..config import SearchConfig
from ..errors import SearchUnavailable
from .base import SearchBackend, SearchResult, format_results
from .cache import CachedSearch
from .local import LocalCorpus

__all__ = [
    "CachedSearch",
    "LocalCorpus",
    "SearchBackend",
    "SearchResult",
    "backend_name",
    "format_results",
    "make_page_source",
    "make_search",
    "open_corpus",
    "uses_corpus",
]

_corpora: dict[tuple[Path, str, str], tuple[int, LocalCorpus]] = {}
_corpora_lock = threading.Lock()


def open_corpus(index_dir: Path, retriever: str = "bm25s", settings: SearchConfig | None = None) -> LocalCorpus:
    """The :class:`LocalCorpus` of ``index_dir`` searched with ``retriever``, opened once per process and
    shared (it is thread-safe); reopened when the corpus was rebuilt since (its ``meta.json`` changed)."""
    from .corpus import META
    path = Path(index_dir).expanduser().resolve()
    try:
        stamp = (path / META).stat().st_mtime_ns
    except OSError:
        stamp = -1  # LocalCorpus raises the error that names the fix
    key = (path, retriever, settings.embeddings.model_dump_json() if settings is not None else "")
    with _corpora_lock:
        held = _corpora.get(key)
        if held is None or held[0] != stamp:
            held = _corpora[key] = (stamp, LocalCorpus(path, retriever, settings))
        return held[1]


def _serper_key(cfg: SearchConfig) -> str | None:
    if cfg.serper_api_key is not None and cfg.serper_api_key.get_secret_value():
        return cfg.serper_api_key.get_secret_value()
    return os.environ.get("SERPER_API_KEY") or None


def backend_name(cfg: SearchConfig, *, serper_recorded: bool = False) -> str | None:
    """The name the configured backend records under, found without building it (None: no search).
    ``serper_recorded``: ``auto`` picks Serper even without a key (a replay of recorded Serper searches)."""
    kind = cfg.backend
    if kind == "auto":
        kind = "serper" if _serper_key(cfg) or serper_recorded else "local" if cfg.corpus is not None else "none"
    if kind == "none":
        return None
    if kind == "serper":
        from .serper import serper_name  # httpx is imported only when Serper is used

        return serper_name(cfg.serper_url)
    return open_corpus(cfg.corpus, cfg.retriever, cfg).name if cfg.corpus is not None else "local"


def uses_corpus(cfg: SearchConfig) -> bool:
    """Whether the configured search ranks the local corpus (``local``, or ``auto`` with a corpus and no
    Serper key)."""
    return cfg.corpus is not None and (cfg.backend == "local" or (cfg.backend == "auto" and not _serper_key(cfg)))


def make_search(cfg: SearchConfig) -> SearchBackend | None:
    """The configured backend wrapped in :class:`CachedSearch` (``cfg.cache_dir``), or None for
    ``backend = "none"`` and for ``auto`` with neither a Serper key nor a corpus.

    ``auto``: Serper when a key is set (config or ``SERPER_API_KEY``), else the local corpus when
    ``cfg.corpus`` is set. Raises :class:`SearchUnavailable` naming the fix when the chosen backend
    cannot be used (no key for ``serper``, no or a missing corpus for ``local``)."""
    from .serper import SerperSearch

    backend: SearchBackend
    kind = cfg.backend
    if kind == "none":
        return None
    if kind == "auto":
        kind = "serper" if _serper_key(cfg) else "local" if cfg.corpus is not None else "none"
        if kind == "none":
            return None
    if kind == "serper":
        backend = SerperSearch(
            _serper_key(cfg), url=cfg.serper_url, timeout_s=cfg.timeout_s, max_retries=cfg.max_retries
        )
    else:
        if cfg.corpus is None:
            raise SearchUnavailable(
                "search backend 'local' needs a corpus: set [search] corpus = DIR (an index made by "
                "`fte-shell corpus build`)"
            )
        # shared by every run of this process (open_corpus): closing one run's search must not close it
        return CachedSearch(open_corpus(cfg.corpus, cfg.retriever, cfg), cfg.cache_dir, owns_backend=False,
                            default_n=cfg.num_results)
    return CachedSearch(backend, cfg.cache_dir, default_n=cfg.num_results)


def make_page_source(cfg: SearchConfig) -> LocalCorpus | None:
    """The local corpus of ``cfg.corpus`` as a page source (fetch serves its docids and urls with no
    HTTP), or None when no corpus is configured."""
    if cfg.corpus is None:
        return None
    return open_corpus(cfg.corpus, cfg.retriever, cfg)
