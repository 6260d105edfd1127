"""``[search]`` and ``[snapshot]``: where results come from, and the web recorded as WARC."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import SecretStr

from .base import StrictModel


class SearchConfig(StrictModel):
    """Where ``search`` gets its results."""

    backend: Literal["auto", "serper", "local", "none"] = "auto"
    """``serper`` (web, needs a key), ``local`` (a bm25s index built by ``fte-shell corpus build``),
    ``none`` (no search tool), or ``auto``: serper when a key is set, else local when ``corpus`` is set."""

    serper_api_key: SecretStr | None = None
    """Serper API key; defaults to the ``SERPER_API_KEY`` environment variable. Stays on the host."""

    serper_url: str = "https://google.serper.dev/search"
    """Serper endpoint (POST, header ``X-API-KEY``, body ``{q, num}``)."""

    corpus: Path | None = None
    """Directory of a local corpus index (made by ``fte-shell corpus build``)."""

    num_results: int = 10
    """Default number of results per query."""

    timeout_s: float = 20.0
    """Timeout of one search request."""

    max_retries: int = 3
    """Serper: retries on 429, 5xx, timeouts and connection errors, with exponential backoff."""

    cache_dir: Path | None = None
    """Directory caching results per (backend, query, n), so every profile of a comparison sees the same
    results. None = no cache across runs (results are still cached within one question)."""

    open_web: bool = False
    """With a local corpus, let fetch reach URLs outside it (live, or from the snapshot). False (the
    default): a run over a local corpus is a closed world; a URL the corpus does not hold is refused."""


class SnapshotConfig(StrictModel):
    """The web as a WARC archive: every page and search recorded, runs replayed from it (docs/snapshots.md)."""

    dir: Path | None = None
    """Snapshot directory (WARC files + index). None = no snapshot."""

    mode: Literal["record", "replay", "refresh"] = "record"
    """``record``: answer from the snapshot when it holds the resource, else fetch live and store it;
    ``replay``: never touch the network (no HTTP client is built), a miss is refused; ``refresh``: always
    fetch live (once per run or sweep) and add a new capture."""

    on_miss: Literal["refuse", "fail-run"] = "refuse"
    """Replay miss: ``refuse`` (one line to the model: not in the snapshot) or ``fail-run`` (the run stops
    as an infrastructure failure)."""

    manifest: Path | None = None
    """Serve exactly the captures this manifest pins (a sweep's ``shared/snapshot-manifest.jsonl`` or a
    run's ``snapshot.jsonl``), even when newer ones exist."""
