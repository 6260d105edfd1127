"""Search backends (the plugins of :mod:`.registry`: Serper, a local corpus ranked by a retriever, a
third-party one), the result cache and the one result rendering.

``make_search(cfg)`` builds the backend :class:`~fte_shell.config.SearchConfig` selects and wraps it in the
result cache; ``make_page_source(cfg)`` gives the local corpus (if any) for fetch to serve docids from.
"""

from __future__ import annotations

from collections.abc import Callable

from ..config import SearchConfig
from .base import SearchBackend, SearchResult, format_results
from .cache import CachedSearch
from .local import LocalCorpus, open_corpus
from .registry import BACKENDS, BackendPlugin, page_source, selected, selected_for_replay

__all__ = [
    "BACKENDS",
    "BackendPlugin",
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

def backend_name(cfg: SearchConfig, *, recorded: Callable[[str], bool] | None = None) -> str | None:
    """The name the configured backend records under, found without building it (None: no search).
    ``recorded``: in a replay, ``auto`` also picks a backend whose searches the snapshot holds (e.g.
    Serper's without its key; :func:`.registry.selected_for_replay`)."""
    plugin = selected(cfg) if recorded is None else selected_for_replay(cfg, recorded)
    return None if plugin.name == "none" else plugin.recorded_name(cfg)


def uses_corpus(cfg: SearchConfig) -> bool:
    """Whether the configured search ranks the local corpus (the ``local`` backend, chosen or by ``auto``)."""
    return selected(cfg).name == "local"


def make_search(cfg: SearchConfig) -> SearchBackend | None:
    """The configured backend (:func:`.registry.selected`) wrapped in :class:`CachedSearch`
    (``cfg.cache_dir``), or None for ``none`` and for ``auto`` when no backend is usable (no Serper key, no
    corpus). Raises :class:`SearchUnavailable` naming the fix when the chosen backend cannot be used."""
    plugin = selected(cfg)
    if plugin.name == "none":
        return None
    backend = plugin.build(cfg)
    # a shared backend (the local corpus, shared by every run of this process: open_corpus) is not closed
    # with one run's search
    return CachedSearch(backend, cfg.cache_dir, owns_backend=plugin.name != "local", default_n=cfg.num_results)


def make_page_source(cfg: SearchConfig) -> LocalCorpus | None:
    """The local corpus of ``cfg.corpus`` as a page source (fetch serves its docids and urls with no
    HTTP), or None when no corpus is configured."""
    return page_source(cfg)
