"""A third-party retriever kind for the tests, loaded as ``tests.retriever_kinds:OVERLAP`` (``module:attr``).

``overlap``: a document's score is how many distinct query words (lower-cased ``\\w+``) its contents hold;
ties go to the earlier document. A real (if plain) retriever over real data: the index is a JSON file of each
document's word set. ``module:attr:ARG`` passes ARG as the minimum word length. Every ``build`` call appends a
line to ``$FTE_TEST_BUILD_LOG`` (when set), so a test counts how many builders ran.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from pathlib import Path

from fte_shell.search.retrievers.base import CorpusTexts, Hit, RetrieverSpec

_WORD = re.compile(r"\w+")


def _words(text: str, min_len: int) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) >= min_len}


class OverlapRetriever:
    def __init__(self, index_dir: Path, min_len: int, name: str):
        self.name = name
        self.min_len = min_len
        rows = json.loads((index_dir / "words.json").read_text())
        self._docs = [(d, set(ws)) for d, ws in rows]
        self._lock = threading.Lock()

    def search(self, query: str, k: int) -> list[Hit]:
        q = _words(query, self.min_len)
        with self._lock:
            scored = [(len(q & ws), i, d) for i, (d, ws) in enumerate(self._docs)]
        scored = [s for s in scored if s[0] > 0]
        scored.sort(key=lambda s: (-s[0], s[1]))
        return [Hit(d, float(n)) for n, _, d in scored[:k]]

    def search_many(self, queries: list[str], k: int) -> list[list[Hit]]:
        return [self.search(q, k) for q in queries]

    def close(self) -> None:
        self._docs = []


class OverlapKind:
    def _min_len(self, spec: RetrieverSpec) -> int:
        return int(spec.arg) if spec.arg else 1

    def index_name(self, spec: RetrieverSpec, settings: object) -> str:
        return f"overlap-{self._min_len(spec)}"

    def build(self, spec: RetrieverSpec, corpus: CorpusTexts, out_dir: Path, settings: object) -> None:
        log = os.environ.get("FTE_TEST_BUILD_LOG")
        if log:
            with open(log, "a") as fh:
                fh.write(f"{os.getpid()}\n")
        rows = [(d, sorted(_words(t, self._min_len(spec)))) for d, t in corpus.texts()]
        if os.environ.get("FTE_TEST_BUILD_SLOW"):
            time.sleep(float(os.environ["FTE_TEST_BUILD_SLOW"]))  # widen the race the lock must close
        if os.environ.get("FTE_TEST_BUILD_FAIL"):
            (out_dir / "words.json").write_text("[")  # half-written, then the build fails
            raise RuntimeError("the embedder went away")
        (out_dir / "words.json").write_text(json.dumps(rows))

    def open(self, spec: RetrieverSpec, index_dir: Path, settings: object) -> OverlapRetriever:
        return OverlapRetriever(index_dir, self._min_len(spec), spec.text)


OVERLAP = OverlapKind()
