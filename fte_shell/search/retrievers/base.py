"""The retriever seam: what ranks a local corpus's documents for a query.

A *retriever kind* (a plugin of :data:`fte_shell.search.retrievers.RETRIEVERS`) builds its index of a corpus
once, into its own directory beside the corpus, and opens it as a :class:`Retriever`. A *retriever spec* is
what a user writes (``[search] retriever``, ``--retriever``): ``bm25``, ``bm25s``, ``dense:MODEL``,
``dense:openai:MODEL``, or a third-party kind as ``module:attr`` (``module:attr:ARG`` passes an argument).

Every hit names its docid: the same document has the same docid in every retriever.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:  # pragma: no cover
    from ...config import SearchConfig


@dataclass(frozen=True, slots=True)
class Hit:
    """One ranked document: its docid and the retriever's score (higher is better)."""

    docid: str
    """The document's docid (as in the corpus JSONL)."""
    score: float
    """The retriever's score (BM25, inner product, …)."""


@dataclass(frozen=True, slots=True)
class RetrieverSpec:
    """A parsed retriever spec: ``kind`` (a registry name or a ``module:attr`` reference) and ``arg``
    (what follows ``kind:``; ``""`` for none). ``text`` is the spec as written."""

    kind: str
    arg: str
    text: str


@runtime_checkable
class CorpusTexts(Protocol):
    """What a retriever indexes: the corpus's documents in corpus order, as (docid, contents)."""

    fingerprint: str
    """A digest of the corpus's content (changes when any document changes)."""

    def __len__(self) -> int: ...

    def texts(self) -> Iterator[tuple[str, str]]:
        """(docid, the text to index) for every document, in corpus order."""
        ...


@runtime_checkable
class Retriever(Protocol):
    """An opened index: ranks the corpus's documents for a query. Thread-safe."""

    name: str
    """The spec it was opened for, normalised (``bm25``, ``dense:all-MiniLM-L6-v2``): recorded with every
    search and part of the result-cache and snapshot keys."""

    def search(self, query: str, k: int) -> list[Hit]:
        """The top ``k`` documents, best first (fewer when fewer match)."""
        ...

    def search_many(self, queries: list[str], k: int) -> list[list[Hit]]:
        """:meth:`search` for many queries at once (as fast as the retriever can batch them)."""
        ...

    def close(self) -> None:
        """Release what the index holds (a JVM, a FAISS index, a model)."""
        ...


@runtime_checkable
class RetrieverKind(Protocol):
    """A retriever plugin: builds an index of a corpus once and opens it."""

    def index_name(self, spec: RetrieverSpec, settings: SearchConfig) -> str:
        """The directory name (one path component, ``[a-z0-9._-]``) of the index this spec needs: two specs
        with the same name share one index (e.g. the Lucene index of ``bm25`` whatever its k)."""
        ...

    def build(self, spec: RetrieverSpec, corpus: CorpusTexts, out_dir: Path, settings: SearchConfig) -> None:
        """Write the index of ``corpus`` into the empty directory ``out_dir`` (the caller moves it into
        place when this returns; a failure leaves nothing behind)."""
        ...

    def open(self, spec: RetrieverSpec, index_dir: Path, settings: SearchConfig) -> Retriever:
        """Open a built index. Raises :class:`fte_shell.errors.SearchUnavailable` naming the fix when it
        cannot (a missing dependency, an index of other dimensions, an endpoint that is down)."""
        ...
