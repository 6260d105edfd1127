"""The one synthetic corpus of the perf scripts, shaped like BrowseComp-Plus's (no data to download).

    from perf.synthetic_corpus import synthetic_docs, synthetic_queries, write_collection
    for docid, text in synthetic_docs(100_000): ...   # a generator: deterministic for a seed
    write_collection(100_000, DIR)                      # DIR/docs.jsonl, Anserini's JsonCollection {id, contents}

Shape: BrowseComp-Plus's corpus is 100,195 web pages averaging 5,179.2 words (Table 1 of Chen et al. 2025,
arXiv 2508.06600); the paper gives no other moment, so lengths are drawn from a log-normal with that mean
and sigma 1.0, at least 50 words (median about 3,140, a long tail past 20,000), and words from a Zipf(1.1)
law over ``vocab_size`` pseudo-words of 3-10 letters drawn with English letter frequencies (a few very
common words, a long tail, as in text). Queries are 3-8 of the words ranked 50 to 2,050 (content words: not
the commonest, still in many documents).

Used by perf/retrieval_bm25.py, perf/retrieval_dense.py and perf/corpus_in_box.py: every retrieval and
corpus-in-box figure in the docs is over this one corpus (the same seed gives the same documents).
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterator
from pathlib import Path

import numpy as np

MEAN_WORDS = 5179.2
"""BrowseComp-Plus's mean words per document (the paper's Table 1)."""

SIGMA = 1.0
"""Sigma of the log-normal of document lengths (an assumption: the paper gives the mean only)."""

MIN_WORDS = 50
"""The shortest document."""

_LETTERS = list("etaoinshrdlcumwfgypbvkjxqz")
_LETTER_WEIGHTS = [12.7, 9.1, 8.2, 7.5, 7.0, 6.7, 6.3, 6.1, 6.0, 4.3, 4.0, 2.8, 2.8, 2.4, 2.4, 2.2, 2.0, 2.0, 1.9,
                   1.5, 1.0, 0.8, 0.2, 0.2, 0.1, 0.1]


def vocabulary(rng: np.random.Generator, size: int) -> np.ndarray:
    """``size`` pseudo-words (Zipf rank order: the first is the commonest)."""
    letters = np.array(_LETTERS)
    p = [w / sum(_LETTER_WEIGHTS) for w in _LETTER_WEIGHTS]
    return np.array(["".join(rng.choice(letters, size=rng.integers(3, 11), p=p)) for _ in range(size)])


def synthetic_docs(n: int, *, seed: int = 7, vocab_size: int = 200_000) -> Iterator[tuple[str, str]]:
    """``n`` documents ``(docid, text)``, docids ``doc0``, ``doc1``, …, generated one at a time."""
    rng = np.random.default_rng(seed)
    vocab = vocabulary(rng, vocab_size)
    mu = math.log(MEAN_WORDS) - SIGMA * SIGMA / 2  # the log-normal whose mean is MEAN_WORDS
    for i in range(n):
        length = max(MIN_WORDS, int(rng.lognormal(mu, SIGMA)))
        ranks = np.minimum(rng.zipf(1.1, size=length), len(vocab)) - 1
        yield f"doc{i}", " ".join(vocab[ranks])


def query_words(*, seed: int = 7, vocab_size: int = 200_000) -> list[str]:
    """The words queries are made of: ranks 50 to 2,050 of the corpus's vocabulary (of a small one, all but
    the ten commonest)."""
    vocab = vocabulary(np.random.default_rng(seed), vocab_size)
    return [str(w) for w in vocab[50:2050]] if len(vocab) > 2100 else [str(w) for w in vocab[10:]]


def synthetic_queries(n: int, *, query_seed: int = 0, seed: int = 7, vocab_size: int = 200_000) -> list[str]:
    """``n`` queries of 3-8 :func:`query_words` of the corpus of ``seed`` and ``vocab_size``."""
    words = query_words(seed=seed, vocab_size=vocab_size)
    rnd = random.Random(query_seed)
    return [" ".join(rnd.sample(words, rnd.randint(3, 8))) for _ in range(n)]


def write_collection(n: int, out: Path, *, seed: int = 7, vocab_size: int = 200_000) -> Path:
    """:func:`synthetic_docs` as ``out/docs.jsonl`` (Anserini's JsonCollection: ``{id, contents}``)."""
    path = Path(out) / "docs.jsonl"
    with path.open("w") as f:
        for docid, text in synthetic_docs(n, seed=seed, vocab_size=vocab_size):
            f.write(json.dumps({"id": docid, "contents": text}) + "\n")
    return path
