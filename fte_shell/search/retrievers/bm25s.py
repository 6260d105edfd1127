"""``bm25s``: the ranking of fte-shell's earlier versions, kept so their sweeps resume unchanged.

bm25s with its defaults (Lucene-style idf, k1 1.5, b 0.75), its tokenizer (lower-cased words of two or more
word characters) and its English stop words; no stemming. A corpus built by an earlier version holds this
index in its ``bm25/`` directory (row ``i`` of ``docs.sqlite`` = bm25s document ``i``), read as it is; a
new one is built into ``indexes/bm25s/`` with its docids beside it (``docids.json``).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from ...errors import ConfigError, SearchUnavailable
from .base import CorpusTexts, Hit, RetrieverSpec

if TYPE_CHECKING:  # pragma: no cover
    from ...config import SearchConfig

DOCIDS = "docids.json"


def _tokenize(texts: list[str]) -> list[list[str]]:
    import bm25s

    return bm25s.tokenize(texts, stopwords="en", return_ids=False, show_progress=False)  # type: ignore[no-any-return]


class Bm25sRetriever:
    """An opened bm25s index. Thread-safe (one search at a time)."""

    name = "bm25s"

    def __init__(self, index_dir: Path) -> None:
        import bm25s

        self._lock = threading.Lock()
        try:
            self._bm25 = bm25s.BM25.load(str(index_dir), show_progress=False)
            self._docids = _docids(index_dir)
        except (OSError, ValueError, sqlite3.Error, json.JSONDecodeError) as e:
            raise SearchUnavailable(f"bm25s index {index_dir} cannot be opened ({e}); delete it to rebuild") from e
        self._n = len(self._docids)

    def search(self, query: str, k: int) -> list[Hit]:
        """The top ``k`` documents by BM25; documents sharing no term with the query are left out."""
        return self.search_many([query], k)[0]

    def search_many(self, queries: list[str], k: int) -> list[list[Hit]]:
        """:meth:`search` for each query (one bm25s call for all)."""
        out: list[list[Hit]] = [[] for _ in queries]
        tokens = _tokenize(queries) if queries else []
        todo = [i for i, t in enumerate(tokens) if t]
        k = min(max(1, int(k)), self._n)
        if not todo or k <= 0:
            return out
        with self._lock:
            rows, scores = self._bm25.retrieve([tokens[i] for i in todo], k=k, show_progress=False, n_threads=1)
        for j, i in enumerate(todo):
            out[i] = [Hit(self._docids[int(r)], float(s)) for r, s in zip(rows[j], scores[j], strict=True) if s > 0]
        return out

    def close(self) -> None:
        """Nothing to release (the index lives in memory)."""


def _docids(index_dir: Path) -> list[str]:
    """The docids in index order: ``docids.json``, or (the legacy ``bm25/`` layout) ``docs.sqlite`` beside."""
    listed = index_dir / DOCIDS
    if listed.is_file():
        return [str(d) for d in json.loads(listed.read_text())]
    from ..corpus import DOCS_DB

    db = sqlite3.connect(f"file:{index_dir.parent / DOCS_DB}?mode=ro", uri=True)
    try:
        return [r[0] for r in db.execute("SELECT docid FROM docs ORDER BY i")]
    finally:
        db.close()


class Bm25sKind:
    """The ``bm25s`` retriever kind (takes no argument)."""

    legacy_dirs = ("bm25",)
    """An earlier version's index of the corpus (relative to the corpus directory), read as it is."""

    def index_name(self, spec: RetrieverSpec, settings: SearchConfig) -> str:
        """``bm25s`` (one index per corpus)."""
        if spec.arg:
            raise ConfigError(f"[search] retriever {spec.text!r}: bm25s takes no argument; write bm25s")
        return "bm25s"

    def build(self, spec: RetrieverSpec, corpus: CorpusTexts, out_dir: Path, settings: SearchConfig) -> None:
        """Index every document's contents with bm25s."""
        import bm25s

        docids: list[str] = []
        texts: list[str] = []
        for docid, text in corpus.texts():
            docids.append(docid)
            texts.append(text)
        tokens = _tokenize(texts)
        if not any(tokens):
            raise SearchUnavailable("the corpus has no indexable words for bm25s (texts are empty or stopwords)")
        index = bm25s.BM25()
        index.index(tokens, show_progress=False)
        index.save(str(out_dir), show_progress=False)
        (out_dir / DOCIDS).write_text(json.dumps(docids))

    def open(self, spec: RetrieverSpec, index_dir: Path, settings: SearchConfig) -> Bm25sRetriever:
        """The index of ``index_dir`` (built by :meth:`build`, or a legacy ``bm25/`` directory)."""
        return Bm25sRetriever(index_dir)


KIND = Bm25sKind()
