"""A local corpus as a search backend AND a page source (fetch without HTTP).

``LocalCorpus(index_dir)`` opens a directory made by :func:`fte_shell.search.corpus.build_corpus`
(``fte-shell corpus build``). ``search`` ranks with bm25s; ``lookup`` serves a document by docid or by its
url from SQLite (one indexed row read), so ``fetch`` of either writes a ``Docid:`` file with no network.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import SearchUnavailable
from .base import SNIPPET_CHARS, SearchResult
from .corpus import BM25_DIR, DOCS_DB, FORMAT, META, CorpusDoc, url_key

if TYPE_CHECKING:  # pragma: no cover
    from ..workspace import Document

_WORD = re.compile(r"(?u)\b\w\w+\b")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


class LocalCorpus:
    """bm25s search and docid/url lookup over one corpus directory. Thread-safe."""

    def __init__(self, index_dir: Path) -> None:
        import bm25s
        from bm25s.stopwords import STOPWORDS_EN

        self.index_dir = Path(index_dir).expanduser().resolve()
        meta_path = self.index_dir / META
        if not meta_path.is_file():
            raise SearchUnavailable(
                f"no local corpus index at {self.index_dir}: build one with "
                "`fte-shell corpus build DOCS.jsonl --out DIR` (or `fte-shell corpus hotpotqa --out DIR`)"
            )
        try:
            self.meta = json.loads(meta_path.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise SearchUnavailable(f"corpus index {self.index_dir} is damaged ({META}: {e}); rebuild it") from e
        if self.meta.get("format") != FORMAT:
            raise SearchUnavailable(
                f"corpus index {self.index_dir} has format {self.meta.get('format')!r}, this version reads "
                f"{FORMAT}; rebuild it with `fte-shell corpus build`"
            )
        self.name = f"local:{self.meta.get('name', self.index_dir.name)}:{str(self.meta.get('fingerprint', ''))[:8]}"
        self._stop = frozenset(STOPWORDS_EN)
        self._lock = threading.Lock()
        try:
            self._bm25 = bm25s.BM25.load(str(self.index_dir / BM25_DIR), show_progress=False)
            self._db = sqlite3.connect(
                f"file:{self.index_dir / DOCS_DB}?mode=ro", uri=True, check_same_thread=False
            )
            self._n = int(self._db.execute("SELECT COUNT(*) FROM docs").fetchone()[0])
        except Exception as e:
            raise SearchUnavailable(f"corpus index {self.index_dir} cannot be opened ({e}); rebuild it") from e

    def __repr__(self) -> str:
        return f"LocalCorpus({str(self.index_dir)!r}, docs={self._n})"

    def __len__(self) -> int:
        return self._n

    def close(self) -> None:
        """Close the document store."""
        with self._lock:
            self._db.close()

    # --- SearchBackend ---------------------------------------------------------------------------------
    def search(self, query: str, n: int) -> list[SearchResult]:
        """Top ``n`` documents by BM25 (documents sharing no term with the query are left out). A result's
        ``url`` is the document's url when it has one, else its docid: either works with ``fetch``."""
        import bm25s

        n = max(1, int(n))
        tokens = bm25s.tokenize([query], stopwords="en", return_ids=False, show_progress=False)
        if not tokens or not tokens[0]:
            return []
        k = min(n, self._n)
        with self._lock:
            rows, scores = self._bm25.retrieve(tokens, k=k, show_progress=False, n_threads=1)
            hits = [(int(i), float(s)) for i, s in zip(rows[0], scores[0], strict=True) if s > 0]
            docs = [self._row("i = ?", (i,)) for i, _ in hits]
        terms = {t for t in _WORD.findall(query.lower()) if t not in self._stop}
        out: list[SearchResult] = []
        for doc in docs:
            if doc is None:  # pragma: no cover - index and store are built together
                continue
            out.append(
                SearchResult(
                    rank=len(out) + 1,
                    title=doc.title,
                    url=doc.url or doc.docid,
                    snippet=snippet(doc.text, terms),
                )
            )
        return out

    # --- PageSource ------------------------------------------------------------------------------------
    def get(self, ref: str) -> CorpusDoc | None:
        """The document whose docid, or whose url (compared by :func:`url_key`), is ``ref``."""
        ref = ref.strip()
        if not ref:
            return None
        with self._lock:
            doc = self._row("docid = ?", (ref,))
            if doc is None and "://" in ref:
                doc = self._row("url_key = ?", (url_key(ref),))
        return doc

    def lookup(self, ref: str) -> Document | None:
        """:class:`fte_shell.workspace.Document` (kind ``docid``) for a docid or a document url; None when
        the corpus has no such document (the caller may then go to the web)."""
        doc = self.get(ref)
        if doc is None:
            return None
        from ..workspace import Document

        return Document(
            source=doc.docid,
            kind="docid",
            title=doc.title,
            text=doc.text,
            retrieved_at=datetime.now(UTC),
        )

    def _row(self, where: str, args: tuple[object, ...]) -> CorpusDoc | None:
        row = self._db.execute(f"SELECT docid, title, text, url FROM docs WHERE {where}", args).fetchone()
        if row is None:
            return None
        return CorpusDoc(docid=row[0], title=row[1], text=row[2], url=row[3])


def snippet(text: str, terms: set[str], limit: int = SNIPPET_CHARS) -> str:
    """The passage of ``text`` most about ``terms``: the sentence containing the most distinct query terms
    (earliest on ties) and what follows it, up to about ``limit`` characters; the opening when none match."""
    sentences = [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]
    if not sentences:
        return ""
    best, best_score = 0, 0
    if terms:
        for i, s in enumerate(sentences):
            score = len(terms & set(_WORD.findall(s.lower())))
            if score > best_score:
                best, best_score = i, score
    out: list[str] = []
    size = 0
    for s in sentences[best:]:
        if size and size + len(s) > limit:
            break
        out.append(s)
        size += len(s) + 1
    lead = "… " if best else ""
    return lead + " ".join(out)
