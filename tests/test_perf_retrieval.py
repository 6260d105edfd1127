"""perf/retrieval_bm25.py on a tiny synthetic corpus, so the script behind docs/search.md's speed table
cannot rot: the real Anserini and the real ``bm25`` retriever, every figure of the row present."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.lucene_fixture import require_lucene

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.slow]


def test_the_speed_table_has_every_figure(tmp_path: Path) -> None:
    require_lucene()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, str(ROOT / "perf" / "retrieval_bm25.py"), "--sizes", "300",
                           "--queries", "12", "--no-hotpotqa", "--vocab", "3000", "--rounds", "1"], env=env, capture_output=True, text=True,
                          timeout=900, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [ln for ln in proc.stdout.splitlines() if ln.startswith("| synthetic-")]
    assert len(rows) == 1, proc.stdout
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    assert len(cells) == 7 and cells[0] == "synthetic-300"
    build = cells[2].split("=")
    assert float(build[1]) > 0 and all(float(t) > 0 for t in build[0].split("/"))
    assert not list(tmp_path.glob("fte-perf-bm25-*"))  # the corpora and indexes are removed


def test_the_one_synthetic_corpus_is_shaped_like_browsecomp_plus() -> None:
    """perf/synthetic_corpus.py, what every retrieval and corpus-in-box figure is measured over: the same
    documents for a seed, lengths around the paper's mean of 5,179.2 words, at least 50, queries of its
    words."""
    from perf.synthetic_corpus import MEAN_WORDS, MIN_WORDS, synthetic_docs, synthetic_queries

    docs = list(synthetic_docs(400, vocab_size=3000))
    assert docs[:3] == list(synthetic_docs(3, vocab_size=3000)) and docs[0][0] == "doc0"
    words = [len(t.split()) for _, t in docs]
    assert min(words) >= MIN_WORDS and abs(sum(words) / len(words) - MEAN_WORDS) < 0.2 * MEAN_WORDS
    vocab = {w for _, t in docs for w in t.split()}
    queries = synthetic_queries(20, vocab_size=3000)
    assert len(queries) == 20 and all(3 <= len(q.split()) <= 8 and set(q.split()) <= vocab for q in queries)
