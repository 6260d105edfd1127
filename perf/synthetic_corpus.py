"""A synthetic corpus shaped like BrowseComp-Plus's, for the retrieval perf scripts (no data to download).

    from perf.synthetic_corpus import synthetic_docs, synthetic_queries
    docs = synthetic_docs(100_000)        # [(docid, text)], deterministic for a seed

Documents like BrowseComp-Plus's corpus rows: a numeric-string docid and a web page's text whose first line
is its title. Words are drawn from a Zipf-distributed vocabulary of pronounceable pseudo-words (so term
statistics look like text's: a few very common words, a long tail); lengths are log-normal (``median_words``
and ``sigma`` set it: the defaults give a median of 600 words and a long tail past 10,000 — set them to the
distribution you want to mimic). Queries are 4-12 words of the same vocabulary.
"""

from __future__ import annotations

import numpy as np

_SYLLABLES = [c + v for c in "bcdfghklmnprstvz" for v in "aeiou"] + ["qu", "th", "sh", "ch", "st", "tr"]


def vocabulary(size: int = 50_000, seed: int = 7) -> np.ndarray:
    """``size`` distinct pseudo-words of 1-4 syllables, most common first."""
    rng = np.random.default_rng(seed)
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < size:
        n = int(rng.integers(1, 5))
        w = "".join(_SYLLABLES[int(i)] for i in rng.integers(0, len(_SYLLABLES), n))
        if w not in seen:
            seen.add(w)
            words.append(w)
    words.sort(key=len)  # short words are the common ones, as in text
    return np.array(words, dtype=object)


def _zipf_ids(rng: np.random.Generator, count: int, vocab: int, s: float = 1.07) -> np.ndarray:
    weights = 1.0 / np.arange(1, vocab + 1) ** s
    cdf = np.cumsum(weights / weights.sum())
    return np.minimum(np.searchsorted(cdf, rng.random(count)), vocab - 1)


def synthetic_docs(n: int, *, seed: int = 1, median_words: int = 600, sigma: float = 1.0,
                   max_words: int = 20_000, vocab_size: int = 50_000) -> list[tuple[str, str]]:
    """``n`` documents ``(docid, text)``: docids ``"0"``, ``"1"``, … and a title line then the body."""
    rng = np.random.default_rng(seed)
    vocab = vocabulary(vocab_size)
    lengths = np.clip(rng.lognormal(np.log(median_words), sigma, n).astype(int), 20, max_words)
    ids = _zipf_ids(rng, int(lengths.sum()), vocab_size)
    words = vocab[ids]
    out: list[tuple[str, str]] = []
    start = 0
    for i, length in enumerate(lengths):
        body = words[start : start + length]
        start += length
        title = " ".join(body[:6]).title()
        out.append((str(i), title + "\n" + " ".join(body)))
    return out


def synthetic_queries(n: int, *, seed: int = 2, vocab_size: int = 50_000) -> list[str]:
    """``n`` queries of 4-12 words (drawn from the rarer half of the Zipf head, as questions' content words)."""
    rng = np.random.default_rng(seed)
    vocab = vocabulary(vocab_size)
    out = []
    for _ in range(n):
        k = int(rng.integers(4, 13))
        out.append(" ".join(vocab[100 + _zipf_ids(rng, k, vocab_size - 100)]))
    return out
