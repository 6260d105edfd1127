"""A local corpus as a search backend AND a page source (fetch without HTTP).

``LocalCorpus(corpus_dir, retriever)`` opens a directory made by :func:`fte_shell.search.corpus.build_corpus`
(``fte-shell corpus build``). ``search`` ranks with the retriever the spec names (its index built on first
use, :func:`fte_shell.search.retrievers.open_retriever`); ``lookup`` serves a document by docid or by its url
from SQLite (one indexed row read), so ``fetch`` of either writes a ``Docid:`` file with no network.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config.search import LEGACY_RETRIEVER
from ..errors import SearchUnavailable
from .base import SNIPPET_CHARS, SearchResult, Secret
from .corpus import DOCS_DB, META, CorpusDoc, CorpusError, read_meta, url_key
from .retrievers import Retriever, RetrieverSpec, kind_of, open_retriever, parse_spec

if TYPE_CHECKING:  # pragma: no cover
    from ..config import SearchConfig
    from ..workspace import Document

_WORD = re.compile(r"(?u)\b\w\w+\b")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")

def corpus_backend_name(corpus_name: str, fingerprint: str, spec: RetrieverSpec) -> str:
    """The backend name of a corpus searched with ``spec``: ``local:NAME:FP8`` for ``bm25s`` (the name
    earlier versions recorded, so their result caches and snapshots stay valid), ``local:NAME:FP8@SPEC``
    for any other retriever (each ranks differently, so each has its own cache and snapshot entries)."""
    base = f"local:{corpus_name}:{fingerprint[:8]}"
    return base if spec.text == LEGACY_RETRIEVER else f"{base}@{spec.text}"


class LocalCorpus:
    """Search (with one retriever) and docid/url lookup over one corpus directory. Thread-safe."""

    def __init__(self, index_dir: Path, retriever: str = LEGACY_RETRIEVER,
                 settings: SearchConfig | None = None) -> None:
        from bm25s.stopwords import STOPWORDS_EN

        from ..config import SearchConfig

        self.index_dir = Path(index_dir).expanduser().resolve()
        try:
            self.meta = read_meta(self.index_dir)
        except CorpusError as e:
            raise SearchUnavailable(str(e)) from e
        self.spec = parse_spec(retriever)
        kind_of(self.spec)  # an unknown or broken kind fails here, not at the first search
        self.settings = settings if settings is not None else SearchConfig(retriever=self.spec.text)
        self.name = corpus_backend_name(
            str(self.meta.get("name", self.index_dir.name)), str(self.meta.get("fingerprint", "")), self.spec
        )
        self._stop = frozenset(STOPWORDS_EN)
        self._lock = threading.Lock()
        self._retriever: Retriever | None = None
        try:
            self._db = sqlite3.connect(
                f"file:{self.index_dir / DOCS_DB}?mode=ro", uri=True, check_same_thread=False
            )
            self._n = int(self._db.execute("SELECT COUNT(*) FROM docs").fetchone()[0])
        except Exception as e:
            raise SearchUnavailable(f"corpus {self.index_dir} cannot be opened ({e}); rebuild it") from e

    def __repr__(self) -> str:
        return f"LocalCorpus({str(self.index_dir)!r}, {self.spec.text!r}, docs={self._n})"

    def __len__(self) -> int:
        return self._n

    def close(self) -> None:
        """Close the document store (the retriever is shared by the process and stays open)."""
        with self._lock:
            self._db.close()

    @property
    def retriever(self) -> Retriever:
        """The opened retriever (its index built on first use)."""
        r = self._retriever
        if r is None:
            r = self._retriever = open_retriever(self.index_dir, self.spec, self.settings)
        return r

    # --- SearchBackend ---------------------------------------------------------------------------------
    def search(self, query: str, n: int) -> list[SearchResult]:
        """Top ``n`` documents by the retriever. A result's ``url`` is the document's url when it has one,
        else its docid (either works with ``fetch``); ``docid`` and ``score`` are the retriever's."""
        hits = self.retriever.search(query, max(1, int(n)))
        with self._lock:
            docs = [(self._row("docid = ?", (h.docid,)), h.score) for h in hits]
        terms = {t for t in _WORD.findall(query.lower()) if t not in self._stop}
        out: list[SearchResult] = []
        for doc, score in docs:
            if doc is None:  # pragma: no cover - an index is built from the store
                continue
            out.append(
                SearchResult(
                    rank=len(out) + 1,
                    title=doc.title,
                    url=doc.url or doc.docid,
                    snippet=snippet(doc.text, terms),
                    docid=doc.docid,
                    score=score,
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


_corpora: dict[tuple[Path, str, str], tuple[int, LocalCorpus]] = {}
_corpora_lock = threading.Lock()


def open_corpus(index_dir: Path, retriever: str = "bm25s", settings: SearchConfig | None = None) -> LocalCorpus:
    """The :class:`LocalCorpus` of ``index_dir`` searched with ``retriever``, opened once per process and
    shared (it is thread-safe); reopened when the corpus was rebuilt since (its ``meta.json`` changed)."""
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


class LocalPlugin:
    """The ``local`` search backend plugin (:mod:`fte_shell.search.registry`): ``[search] corpus`` ranked by
    ``[search] retriever``."""

    name = "local"
    config_keys = ("corpus", "retriever", "embeddings", "num_results", "cache_dir", "open_web")
    secrets: tuple[Secret, ...] = ()  # [search.embeddings] api_key: the dense retriever's own
    remote = False

    def usable(self, cfg: SearchConfig) -> bool:
        return cfg.corpus is not None

    def recorded_name(self, cfg: SearchConfig) -> str:
        """:func:`corpus_backend_name` of the corpus (read from its ``meta.json``; nothing is built)."""
        if cfg.corpus is None:
            return "local"
        return open_corpus(cfg.corpus, cfg.retriever, cfg).name

    def search_params(self, query: str, n: int) -> dict[str, Any]:
        return {"n": int(n), "q": query}

    def probe(self, cfg: SearchConfig, timeout_s: float) -> str | None:
        """The corpus opens and its retriever's kind loads (its index is built at the first search)."""
        try:
            self.build(cfg)
        except Exception as e:  # noqa: BLE001 - the backend cannot be opened
            return f"{e.__class__.__name__}: {e}"
        return None

    def build(self, cfg: SearchConfig) -> LocalCorpus:
        """The corpus, shared by every run of this process (:func:`fte_shell.search.open_corpus`)."""
        if cfg.corpus is None:
            raise SearchUnavailable(
                "search backend 'local' needs a corpus: set [search] corpus = DIR (an index made by "
                "`fte-shell corpus build`)"
            )
        return open_corpus(cfg.corpus, cfg.retriever, cfg)

    def describe(self, cfg: SearchConfig) -> str:
        if cfg.corpus is None:
            return "search: a local corpus was asked for, but none is configured (--corpus DIR)"
        why = "" if cfg.backend == "local" else " — no SERPER_API_KEY is set, so the configured local corpus is used"
        return f"search: local corpus {cfg.corpus} ranked by {cfg.retriever}{why}"


PLUGIN = LocalPlugin()
