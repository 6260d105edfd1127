"""The ``dense`` retriever kind: ``dense:MODEL`` / ``dense:openai:MODEL`` over an exact FAISS index.

MODEL embeds the corpus once (no document prefix) into a flat inner-product index (``IndexFlatIP``, what
Tevatron's ``FaissFlatSearcher`` and BrowseComp-Plus search), cached in the index directory with the docid
of every row; queries get the model's instruction (:func:`~.dense_embed.query_prefix`) and, like the
documents, are L2-normalised when ``[search.embeddings] normalize``. With ``[search.embeddings] prebuilt``
the vectors come from Tevatron pickle shards instead (BrowseComp-Plus's ``qwen3-embedding-*/corpus.shard*.pkl``,
each ``(reps, lookup)``), loaded as they are; MODEL then only embeds queries.

Index directory::

    index.faiss   the FAISS index (row i = docids[i])
    docids.json   the docid of every row
    dense.json    {"format", "model", "dim", "count", "normalize", "source", "dropped"}
"""

from __future__ import annotations

import glob
import hashlib
import json
import pickle
import re
import threading
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from ...errors import ConfigError, SearchUnavailable
from .base import CorpusTexts, Hit, RetrieverSpec
from .dense_embed import Embedder, EndpointEmbedder, LocalEmbedder, open_embedder, query_prefix

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from ...config import SearchConfig

FORMAT = 1
INDEX_FILE = "index.faiss"
DOCIDS_FILE = "docids.json"
META_FILE = "dense.json"
CHUNK_DOCS = 2048
"""Documents read from the corpus per embedding call (the embedder batches them further)."""


def _faiss():
    try:
        import faiss
    except ImportError as e:
        raise SearchUnavailable("the dense retriever needs faiss-cpu: pip install 'fte-shell[dense]'") from e
    # one OpenMP thread per search: a sweep's episodes search from many threads at once, and an OpenMP team
    # per call oversubscribes the cores (perf/retrieval_dense.py, 10k documents on a loaded 2-core machine:
    # p50 80 ms with the default team, 19 ms with one thread)
    faiss.omp_set_num_threads(1)
    return faiss


def _model_of(spec: RetrieverSpec) -> str:
    model = spec.arg.strip()
    if not model or model == "openai:":
        raise ConfigError(
            f"[search] retriever {spec.text!r}: name the model (dense:MODEL, a sentence-transformers name or "
            "path; or dense:openai:MODEL for [search.embeddings] base_url)"
        )
    return model


def prebuilt_files(pattern: str) -> list[Path]:
    """The shard files ``[search.embeddings] prebuilt`` names: a glob (``…/corpus.shard*.pkl``) or a directory
    (its ``*.pkl``), sorted; :class:`ConfigError` when it names none."""
    path = Path(pattern).expanduser()
    files = sorted(path.glob("*.pkl")) if path.is_dir() else sorted(Path(p) for p in glob.glob(str(path)))
    if not files:
        raise ConfigError(
            f"[search.embeddings] prebuilt = {pattern!r} names no shard file (a directory of *.pkl or a glob "
            "such as …/qwen3-embedding-8b/corpus.shard*.pkl)"
        )
    return files


class _ShardUnpickler(pickle.Unpickler):
    """Unpickles a Tevatron shard (a tuple of a numpy array and a list of docids) and nothing else: a pickle
    that asks for any other class is refused instead of run."""

    _ALLOWED: ClassVar[frozenset[tuple[str, str]]] = frozenset({
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "scalar"),
        ("numpy.core.numeric", "_frombuffer"),
        ("numpy._core.numeric", "_frombuffer"),
    })

    def find_class(self, module: str, name: str):
        if (module, name) not in self._ALLOWED:
            raise pickle.UnpicklingError(f"refused to load {module}.{name} (a shard holds an array and docids)")
        return super().find_class(module, name)


def load_shard(path: Path) -> tuple[np.ndarray, list[str]]:
    """One Tevatron shard ``(reps, lookup)``: a 2-D float array and the docid of each row."""
    import numpy as np

    try:
        with path.open("rb") as fh:
            reps, lookup = _ShardUnpickler(fh).load()
        reps = np.asarray(reps, dtype=np.float32)
        lookup = [str(d) for d in lookup]
    except Exception as e:  # noqa: BLE001 - any damage is the same message
        raise SearchUnavailable(f"{path}: not a Tevatron embedding shard (reps, lookup): {e}") from None
    if reps.ndim != 2 or reps.shape[0] != len(lookup):
        raise SearchUnavailable(
            f"{path}: its reps have shape {reps.shape} for {len(lookup)} docids (expected one row per docid)"
        )
    return reps, lookup


class DenseKind:
    """``dense:MODEL``: see the module docstring."""

    def index_name(self, spec: RetrieverSpec, settings: SearchConfig) -> str:
        model = _model_of(spec)
        emb = settings.embeddings
        what = {"model": model, "normalize": emb.normalize, "max_length": emb.max_length, "prebuilt": emb.prebuilt}
        digest = hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:10]
        shown = "-".join(Path(model).parts[-2:]) if Path(model).is_absolute() else model  # a path: its tail
        slug = re.sub(r"[^a-z0-9.]+", "-", shown.lower()).strip("-.")[:60].strip("-.") or "model"
        return f"dense-{slug}-{digest}"

    def build(self, spec: RetrieverSpec, corpus: CorpusTexts, out_dir: Path, settings: SearchConfig) -> None:
        model = _model_of(spec)
        faiss = _faiss()
        emb = settings.embeddings
        if emb.prebuilt:
            index, docids, source, dropped = _from_shards(emb.prebuilt, corpus, faiss)
        else:
            embedder = open_embedder(model, emb)
            try:
                index, docids = _embed_corpus(corpus, embedder, faiss)
            finally:
                embedder.close()
            source, dropped = "embedded", 0
        if not docids:
            raise SearchUnavailable("the corpus is empty: no documents to embed")
        faiss.write_index(index, str(out_dir / INDEX_FILE))
        (out_dir / DOCIDS_FILE).write_text(json.dumps(docids))
        meta = {"format": FORMAT, "model": model, "dim": int(index.d), "count": len(docids),
                "normalize": emb.normalize, "source": source, "dropped": dropped}
        (out_dir / META_FILE).write_text(json.dumps(meta, indent=2) + "\n")

    def open(self, spec: RetrieverSpec, index_dir: Path, settings: SearchConfig) -> DenseRetriever:
        model = _model_of(spec)
        faiss = _faiss()
        index_dir = Path(index_dir)
        try:
            meta = json.loads((index_dir / META_FILE).read_text())
            docids = json.loads((index_dir / DOCIDS_FILE).read_text())
            index = faiss.read_index(str(index_dir / INDEX_FILE))
        except (OSError, ValueError, RuntimeError) as e:
            first = (str(e).strip().splitlines() or [""])[0][:120]
            raise SearchUnavailable(
                f"the dense index {index_dir} cannot be opened ({type(e).__name__}: {first}); delete the "
                "directory to rebuild it"
            ) from None
        if meta.get("format") != FORMAT or index.ntotal != len(docids):
            raise SearchUnavailable(f"the dense index {index_dir} is damaged or of another version; delete it to rebuild")
        embedder = open_embedder(model, settings.embeddings)
        try:
            dim = _dim_of(embedder)
        except BaseException:
            embedder.close()
            raise
        if dim != index.d:
            embedder.close()
            raise SearchUnavailable(
                f"the dense index {index_dir} holds {index.d}-dimensional vectors ({meta.get('source')}) but "
                f"{embedder.label} gives {dim}-dimensional ones: use the model the index was built with"
            )
        return DenseRetriever(spec, index, docids, embedder, query_prefix(model, settings.embeddings))


def _dim_of(embedder: Embedder) -> int:
    if isinstance(embedder, LocalEmbedder):
        return embedder.dim
    vectors = embedder.embed(["dimension probe"])  # an endpoint tells its size by answering
    return int(vectors.shape[1])


def _embed_corpus(corpus: CorpusTexts, embedder: Embedder, faiss) -> tuple[object, list[str]]:
    index = None
    docids: list[str] = []
    chunk: list[tuple[str, str]] = []

    def flush() -> None:
        nonlocal index
        vectors = embedder.embed([t for _, t in chunk])
        if vectors.shape[0] != len(chunk):
            raise SearchUnavailable(f"{embedder.label} returned {vectors.shape[0]} vectors for {len(chunk)} documents")
        if index is None:
            index = faiss.IndexFlatIP(int(vectors.shape[1]))
        elif vectors.shape[1] != index.d:
            raise SearchUnavailable(
                f"{embedder.label} returned {vectors.shape[1]}-dimensional vectors after {index.d}-dimensional ones"
            )
        index.add(vectors)
        docids.extend(d for d, _ in chunk)
        chunk.clear()

    for item in corpus.texts():
        chunk.append(item)
        if len(chunk) >= CHUNK_DOCS:
            flush()
    if chunk:
        flush()
    return index, docids


def _from_shards(pattern: str, corpus: CorpusTexts, faiss) -> tuple[object, list[str], str, int]:
    import numpy as np

    wanted = {docid for docid, _ in corpus.texts()}
    index = None
    docids: list[str] = []
    dropped = 0
    for path in prebuilt_files(pattern):
        reps, lookup = load_shard(path)
        if index is None:
            index = faiss.IndexFlatIP(int(reps.shape[1]))
        elif reps.shape[1] != index.d:
            raise SearchUnavailable(
                f"{path}: {reps.shape[1]}-dimensional vectors, the shards before it hold {index.d}-dimensional "
                "ones: the shards are of different models"
            )
        keep = np.fromiter((d in wanted for d in lookup), dtype=bool, count=len(lookup))
        dropped += int((~keep).sum())
        index.add(np.ascontiguousarray(reps[keep]))
        docids.extend(d for d, k in zip(lookup, keep, strict=True) if k)
    missing = wanted.difference(docids)
    if missing:
        raise SearchUnavailable(
            f"[search.embeddings] prebuilt = {pattern!r}: {len(missing)} documents of the corpus have no vector "
            f"in the shards (e.g. docid {min(missing)!r}): the shards are of another corpus"
        )
    if len(set(docids)) != len(docids):
        raise SearchUnavailable(f"[search.embeddings] prebuilt = {pattern!r}: a docid has vectors in two shards")
    return index, docids, f"prebuilt:{pattern}", dropped


class DenseRetriever:
    """An opened dense index: embeds the query (with the instruction) and searches FAISS. Thread-safe."""

    def __init__(self, spec: RetrieverSpec, index: object, docids: list[str], embedder: Embedder,
                 prefix: str) -> None:
        self.name = f"dense:{_model_of(spec)}"
        self._index = index
        self._docids = docids
        self._embedder = embedder
        self.prefix = prefix
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._docids)

    def search(self, query: str, k: int) -> list[Hit]:
        return self.search_many([query], k)[0]

    def search_many(self, queries: list[str], k: int) -> list[list[Hit]]:
        if not queries:
            return []
        k = min(max(1, int(k)), len(self._docids))
        vectors = self._embedder.embed(list(queries), prefix=self.prefix)
        if vectors.shape != (len(queries), self._index.d):  # type: ignore[attr-defined]
            raise SearchUnavailable(
                f"{self._embedder.label} returned query vectors of shape {vectors.shape}, the index holds "
                f"{self._index.d}-dimensional ones"  # type: ignore[attr-defined]
            )
        scores, rows = self._index.search(vectors, k)  # type: ignore[attr-defined]
        return [
            [Hit(self._docids[int(i)], float(s)) for s, i in zip(srow, irow, strict=True) if i >= 0]
            for srow, irow in zip(scores, rows, strict=True)
        ]

    def close(self) -> None:
        with self._lock:
            self._embedder.close()


KIND = DenseKind()
"""The ``dense`` retriever kind (``RETRIEVERS["dense"]``)."""

__all__ = ["KIND", "DenseKind", "DenseRetriever", "EndpointEmbedder", "LocalEmbedder", "load_shard", "prebuilt_files"]
