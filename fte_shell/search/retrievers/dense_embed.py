"""Embedders of the ``dense`` retriever: a local sentence-transformers model, or an OpenAI-compatible
``/v1/embeddings`` endpoint (``dense:openai:MODEL``). Both return float32 rows, L2-normalised when
``[search.embeddings] normalize`` (BrowseComp-Plus's ``--normalize``).

Queries get the query instruction (:func:`query_prefix`), documents none: BrowseComp-Plus encodes its corpus
with ``--passage_prefix ""`` and its queries with the Qwen3-Embedding instruction below.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ...config.secrets import secret_variable
from ...errors import SearchUnavailable
from ..retry import post_retrying

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from ...config import EmbeddingsConfig

QWEN3_QUERY_PREFIX = "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery:"
"""The query instruction BrowseComp-Plus puts before every query for Qwen3-Embedding (its FAISS searcher's
``--task-prefix`` default and its encode script's ``--query_prefix``)."""

OPENAI_PREFIX = "openai:"
CHARS_PER_TOKEN = 8
"""An endpoint gets at most ``max_length * CHARS_PER_TOKEN`` characters of a text (more than ``max_length``
tokens of any English text, which the server's tokenizer then cuts): a long document neither travels whole
nor exceeds the server's context."""


def query_prefix(model: str, settings: EmbeddingsConfig) -> str:
    """The text put before every query: ``[search.embeddings] query_prefix`` when set; else the model's own
    instruction (Qwen3-Embedding: :data:`QWEN3_QUERY_PREFIX`), else none."""
    if settings.query_prefix is not None:
        return settings.query_prefix
    return QWEN3_QUERY_PREFIX if "qwen3-embedding" in model.lower() else ""


class Embedder(Protocol):
    """Turns texts into vectors (one float32 row per text). Thread-safe."""

    label: str
    """What embeds, for messages (``the model /path``, ``the endpoint http://…``)."""

    def embed(self, texts: list[str], *, prefix: str = "") -> np.ndarray:
        """Vectors of ``prefix + text`` for each text, normalised when the settings say so."""
        ...

    def close(self) -> None:
        """Release the model or the HTTP connection pool."""
        ...


def open_embedder(model: str, settings: EmbeddingsConfig) -> Embedder:
    """The embedder ``dense:MODEL`` names: ``openai:M`` -> the endpoint of ``[search.embeddings]``, else a
    sentence-transformers model (a local path, or a name already in the local Hugging Face cache)."""
    if model.startswith(OPENAI_PREFIX):
        return EndpointEmbedder(model[len(OPENAI_PREFIX):], settings)
    return LocalEmbedder(model, settings)


def _normalise(vectors: np.ndarray) -> np.ndarray:
    import numpy as np

    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


class LocalEmbedder:
    """A sentence-transformers model on the CPU (or the GPU torch finds), loaded offline: never a hub download."""

    def __init__(self, model: str, settings: EmbeddingsConfig) -> None:
        self.settings = settings
        self.label = f"the model {model!r}"
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as e:
            raise SearchUnavailable(
                f"[search] retriever dense:{model} needs sentence-transformers: pip install 'fte-shell[dense]'"
            ) from e
        try:
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()  # no "Loading weights" bar on the user's terminal
        except ImportError:  # pragma: no cover - sentence-transformers depends on transformers
            pass
        try:
            # local_files_only: a name resolves from the local Hugging Face cache, never from the hub
            self._model = SentenceTransformer(model, device=None, local_files_only=True)
        except Exception as e:  # noqa: BLE001 - any failure to load is the same fix for the user
            where = "no such directory" if not Path(model).exists() and "/" in model else type(e).__name__
            raise SearchUnavailable(
                f"[search] retriever dense:{model}: the sentence-transformers model cannot be loaded ({where}: "
                f"{str(e).splitlines()[0][:160] if str(e) else ''}); give a local model directory (downloads "
                "are off) or a model name already in the Hugging Face cache"
            ) from None
        own = self._model.max_seq_length
        if own is None or settings.max_length < own:
            self._model.max_seq_length = settings.max_length
        self._lock = threading.Lock()

    @property
    def dim(self) -> int:
        """The model's embedding size."""
        getter = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        return int(getter())

    def embed(self, texts: list[str], *, prefix: str = "") -> np.ndarray:
        import numpy as np

        with self._lock:
            vectors = self._model.encode(
                [prefix + t for t in texts],
                batch_size=self.settings.batch_size,
                convert_to_numpy=True,
                normalize_embeddings=self.settings.normalize,
                show_progress_bar=False,
            )
        return np.ascontiguousarray(vectors, dtype=np.float32)

    def close(self) -> None:
        self._model = None  # type: ignore[assignment]


class EndpointEmbedder:
    """An OpenAI-compatible ``POST {base_url}/embeddings`` (vLLM, llama.cpp's server with ``--embedding``,
    text-embeddings-inference), over httpx; retries 429/5xx/timeouts/connection errors with backoff."""

    def __init__(self, model: str, settings: EmbeddingsConfig, *, backoff_s: float = 0.5) -> None:
        import httpx

        base = settings.base_url or os.environ.get("FTE_EMBEDDINGS_BASE_URL")
        if not base:
            raise SearchUnavailable(
                f"[search] retriever dense:openai:{model} needs an embeddings endpoint: set "
                "[search.embeddings] base_url (or FTE_EMBEDDINGS_BASE_URL), e.g. http://127.0.0.1:8000/v1"
            )
        key = (settings.api_key.get_secret_value() if settings.api_key
               else os.environ.get(secret_variable("search.embeddings", "api_key")))
        self.model = model
        self.settings = settings
        self.url = base.rstrip("/") + "/embeddings"
        self.label = f"the embeddings endpoint {self.url}"
        self.backoff_s = backoff_s
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.Client(timeout=settings.timeout_s, headers=headers, trust_env=False)

    def __repr__(self) -> str:  # never show the key
        return f"EndpointEmbedder(url={self.url!r}, model={self.model!r})"

    def embed(self, texts: list[str], *, prefix: str = "") -> np.ndarray:
        import numpy as np

        rows: list[np.ndarray] = []
        step = max(1, self.settings.batch_size)
        cut = self.settings.max_length * CHARS_PER_TOKEN
        for start in range(0, len(texts), step):
            batch = [(prefix + t)[:cut] for t in texts[start : start + step]]
            rows.append(self._request(batch))
        if not rows:
            return np.zeros((0, 0), dtype=np.float32)
        if len({r.shape[1] for r in rows}) > 1:
            raise SearchUnavailable(
                f"{self.label} returned vectors of sizes {sorted({r.shape[1] for r in rows})} for one model "
                f"({self.model!r})"
            )
        vectors = np.concatenate(rows) if len(rows) > 1 else rows[0]
        return _normalise(vectors).astype(np.float32) if self.settings.normalize else vectors

    def _request(self, batch: list[str]) -> np.ndarray:
        import numpy as np

        body = {"model": self.model, "input": batch, "encoding_format": "float"}
        resp = post_retrying(self._client, self.url, name="the embeddings endpoint", body=body,
                             retries=self.settings.max_retries, backoff_s=self.backoff_s,
                             gave_up=lambda last, attempts: f"{self.label} is not answering ({last}; gave up after "
                                                            f"{attempts} attempts): start it or fix [search.embeddings] base_url")
        if resp.status_code != 200:
            raise SearchUnavailable(
                f"{self.label} answered HTTP {resp.status_code} for model {self.model!r}: "
                f"{resp.text[:160]!r}; check [search.embeddings] base_url/api_key and the model name"
            )
        try:
            data = sorted(resp.json()["data"], key=lambda d: d.get("index", 0))
            vectors = np.asarray([d["embedding"] for d in data], dtype=np.float32)
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise SearchUnavailable(
                f"{self.label} answered something that is no embeddings response "
                f"({{data: [{{embedding, index}}]}}): {resp.text[:120]!r}"
            ) from e
        if vectors.ndim != 2 or vectors.shape[0] != len(batch) or vectors.shape[1] == 0:
            raise SearchUnavailable(
                f"{self.label} returned {vectors.shape[0] if vectors.ndim else 0} vectors of shape "
                f"{tuple(vectors.shape[1:])} for {len(batch)} inputs (model {self.model!r})"
            )
        return vectors

    def close(self) -> None:
        self._client.close()
