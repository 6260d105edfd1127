"""``[search]`` and ``[snapshot]``: where results come from, and the web recorded as WARC."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, field_validator

from .base import StrictModel

LEGACY_RETRIEVER = "bm25s"
"""What ranked a local corpus in every run recorded before ``[search] retriever`` existed: a recorded
configuration without the key (a sweep's manifest, a run's start event) is resumed or forked with it."""


def recorded_retriever(recorded: dict[str, Any]) -> dict[str, Any]:
    """A recorded configuration (JSON) with ``search.retriever = "bm25s"`` when it predates the key."""
    search = recorded.get("search")
    if isinstance(search, dict) and "retriever" not in search:
        return {**recorded, "search": {**search, "retriever": LEGACY_RETRIEVER}}
    return recorded


class EmbeddingsConfig(StrictModel):
    """``[search.embeddings]``: how a dense retriever embeds queries and documents."""

    base_url: str | None = None
    """An OpenAI-compatible ``/v1/embeddings`` endpoint for ``dense:openai:MODEL`` (vLLM, llama.cpp's server
    with ``--embedding``, text-embeddings-inference); defaults to ``FTE_EMBEDDINGS_BASE_URL``."""

    api_key: SecretStr | None = None
    """Its key; defaults to ``FTE_EMBEDDINGS_API_KEY``. Stays on the host."""

    query_prefix: str | None = None
    """Text put before every query (never before a document). None: the model's own instruction where it
    has one (Qwen3-Embedding: the instruction BrowseComp-Plus uses), else none; ``""``: none."""

    normalize: bool = True
    """L2-normalise query and document vectors (inner product = cosine), as BrowseComp-Plus's
    ``--normalize``."""

    batch_size: int = 64
    """Documents embedded per batch (per request to an endpoint)."""

    max_length: int = 512
    """Tokens of a document the embedder sees (longer ones are cut by the model's tokenizer)."""

    timeout_s: float = 60.0
    """Timeout of one request to an embeddings endpoint."""

    max_retries: int = 3
    """Retries of an endpoint request on 429, 5xx, timeouts and connection errors, with backoff."""

    prebuilt: str | None = None
    """Prebuilt document vectors to load as they are instead of embedding the corpus: Tevatron pickle shards
    of ``(reps, lookup)``, as a directory of ``*.pkl`` or a glob (BrowseComp-Plus's
    ``…/qwen3-embedding-8b/corpus.shard*.pkl``). The model then only embeds queries; its dimension must match."""


class SearchConfig(StrictModel):
    """Where ``search`` gets its results."""

    backend: str = "auto"
    """``serper`` (web, needs a key), ``local`` (a corpus built by ``fte-shell corpus build``, ranked by
    ``retriever``), ``none`` (no search tool), a third-party backend as ``module:Class`` (docs/search.md),
    or ``auto``: serper when a key is set, else local when ``corpus`` is set."""

    options: dict[str, Any] = Field(default_factory=dict)
    """``[search.options]``: the settings of a third-party backend (its own keys; the built-in ones take
    none)."""

    serper_api_key: SecretStr | None = None
    """Serper API key; defaults to the ``SERPER_API_KEY`` environment variable. Stays on the host."""

    serper_url: str = "https://google.serper.dev/search"
    """Serper endpoint (POST, header ``X-API-KEY``, body ``{q, num}``)."""

    corpus: Path | None = None
    """Directory of a local corpus index (made by ``fte-shell corpus build``)."""

    retriever: str = "bm25"
    """What ranks a local corpus: ``bm25`` (Lucene's BM25 as Pyserini/Anserini run it: k1 0.9, b 0.4,
    Lucene's English analyzer), ``bm25s`` (the bm25s ranking of earlier versions), ``dense:MODEL`` (a
    sentence-transformers model, a name or a path), ``dense:openai:MODEL`` (an embeddings endpoint,
    ``[search.embeddings]``), or a third-party kind as ``module:attr``. Its index is built once, beside the
    corpus."""

    embeddings: EmbeddingsConfig = Field(default_factory=EmbeddingsConfig)
    """How a dense retriever embeds (``[search.embeddings]``)."""

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


    @field_validator("backend")
    @classmethod
    def _backend_name(cls, v: str) -> str:
        if re.fullmatch(r"[a-z][a-z0-9_-]*", v) or re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*", v):
            return v
        raise ValueError("a backend name (auto, serper, local, none) or a third-party one as module:Class")


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
