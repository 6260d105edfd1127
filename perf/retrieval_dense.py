"""Dense retriever speed and scale: the FAISS index's build through a loopback embeddings endpoint, and query
latency, at 10k, 30k and 100k synthetic documents shaped like BrowseComp-Plus's (perf/synthetic_corpus.py).

    python3 perf/retrieval_dense.py [--sizes 10000,30000,100000] [--dim 1024] [--queries 200]

The endpoint (tests/embed_server.py, in this process) answers ``/v1/embeddings`` with pooled random vectors of
``--dim`` (1024: Qwen3-Embedding-0.6B's size) and counts its own busy time; each size is built in a child
process (its own peak memory) with ``dense:openai:synthetic`` and the default ``[search.embeddings]``
(batches of 64, texts cut at 512 * 8 characters). Printed per size:

* build: wall time of ``KIND.build`` (read the corpus, embed over HTTP, add to FAISS, write the index), the
  part of it the endpoint itself was busy (a real model's time would replace that part), and the peak
  resident memory the build added to the process (sampled every 20 ms from /proc/self/statm);
* query: p50/p99 of FAISS alone (query vectors computed beforehand) at k = 5 and k = 1,000, against a numpy
  brute force (``vectors @ q`` + ``argpartition``) over the same vectors in the same run (the ratio), and
  p50 of a whole ``search()`` at k = 5 (one loopback embedding request + FAISS).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Self

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * PAGE


class PeakRss:
    """The highest resident set size seen while the block runs."""

    def __enter__(self) -> Self:
        self.start = self.peak = rss()
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._watch, daemon=True)
        self._t.start()
        return self

    def _watch(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, rss())

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, rss())


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p / 100 * (len(xs) - 1)))]


def child(n: int, base_url: str, queries: int) -> dict:
    import numpy as np

    from fte_shell.config import SearchConfig
    from fte_shell.search.retrievers.base import RetrieverSpec
    from fte_shell.search.retrievers.dense import KIND
    from perf.synthetic_corpus import synthetic_docs, synthetic_queries

    class Texts:  # the documents generated as the build reads them (the corpus is not held in memory)
        fingerprint = "synthetic"

        def __init__(self, n: int) -> None:
            self.n, self.words = n, []

        def __len__(self) -> int:
            return self.n

        def texts(self):
            for docid, text in synthetic_docs(self.n):
                self.words.append(text.count(" ") + 1)
                yield docid, text

    docs = Texts(n)
    spec = RetrieverSpec("dense", "openai:synthetic", "dense:openai:synthetic")
    cfg = SearchConfig.model_validate({"embeddings": {"base_url": base_url}})
    out_dir = Path(tempfile.mkdtemp(prefix="fte-dense-perf-"))
    with PeakRss() as mem:
        t0 = time.perf_counter()
        KIND.build(spec, docs, out_dir, cfg)
        build_s = time.perf_counter() - t0
    retriever = KIND.open(spec, out_dir, cfg)
    qs = synthetic_queries(queries)
    qvec = retriever._embedder.embed(qs, prefix=retriever.prefix)
    index = retriever._index
    vectors = index.reconstruct_n(0, index.ntotal)
    res: dict[str, float | int] = {"docs": n, "median_words": statistics.median(docs.words), "build_s": build_s,
                                   "peak_mb": (mem.peak - mem.start) / 2**20,
                                   "index_mb": (out_dir / "index.faiss").stat().st_size / 2**20}
    for k in (5, 1000):
        faiss_t, numpy_t = [], []
        for i in range(len(qs)):  # interleaved, one query at a time (an agent's search)
            q = qvec[i : i + 1]
            t = time.perf_counter()
            index.search(q, k)
            faiss_t.append(time.perf_counter() - t)
            t = time.perf_counter()
            scores = vectors @ q[0]
            top = np.argpartition(-scores, k)[:k]
            top[np.argsort(-scores[top])]
            numpy_t.append(time.perf_counter() - t)
        res[f"faiss_p50_ms_k{k}"] = statistics.median(faiss_t) * 1e3
        res[f"faiss_p99_ms_k{k}"] = pct(faiss_t, 99) * 1e3
        res[f"numpy_p50_ms_k{k}"] = statistics.median(numpy_t) * 1e3
    e2e = []
    for q in qs[:50]:
        t = time.perf_counter()
        retriever.search(q, 5)
        e2e.append(time.perf_counter() - t)
    res["search_p50_ms_k5"] = statistics.median(e2e) * 1e3
    retriever.close()
    import shutil

    shutil.rmtree(out_dir, ignore_errors=True)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,30000,100000")
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--base-url", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.base_url, args.queries)))
        return

    from tests.embed_server import FakeEmbeddings, pooled_vector

    rows = []
    with FakeEmbeddings(dim=args.dim, vector=pooled_vector) as srv:
        srv.keep_log = False
        for n in (int(s) for s in args.sizes.split(",")):
            srv.busy_s = 0.0
            proc = subprocess.run(
                [sys.executable, __file__, "--child", str(n), "--base-url", srv.base_url, "--queries",
                 str(args.queries)], capture_output=True, text=True, check=False, env={**os.environ, "PYTHONPATH": str(REPO)},
            )
            if proc.returncode:
                sys.exit(f"size {n}: {proc.stderr[-2000:]}")
            row = json.loads(proc.stdout.strip().splitlines()[-1])
            row["endpoint_s"] = srv.busy_s
            rows.append(row)
            print(f"{n:,} documents done in {row['build_s']:.1f} s", file=sys.stderr, flush=True)
    print(f"dense:openai (loopback endpoint, dim {args.dim}), {args.queries} queries, one run:\n")
    print("| docs | median words | build s | endpoint busy s | peak MB | index MB | FAISS p50 / p99 ms k=5 "
          "| numpy p50 ms k=5 | FAISS p50 / p99 ms k=1000 | numpy p50 ms k=1000 | search() p50 ms k=5 |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['docs']:,} | {r['median_words']:.0f} | {r['build_s']:.1f} | {r['endpoint_s']:.1f} | "
              f"{r['peak_mb']:.0f} | {r['index_mb']:.0f} | {r['faiss_p50_ms_k5']:.2f} / {r['faiss_p99_ms_k5']:.2f} | "
              f"{r['numpy_p50_ms_k5']:.2f} | {r['faiss_p50_ms_k1000']:.2f} / {r['faiss_p99_ms_k1000']:.2f} | "
              f"{r['numpy_p50_ms_k1000']:.2f} | {r['search_p50_ms_k5']:.2f} |")
    base = rows[0]
    print("\ngrowth against the smallest size (docs ratio: build, FAISS p50 k=5; FAISS/numpy p50 k=5):")
    for r in rows:
        print(f"  x{r['docs'] / base['docs']:.0f} docs: build x{r['build_s'] / base['build_s']:.1f}, FAISS p50 "
              f"x{r['faiss_p50_ms_k5'] / base['faiss_p50_ms_k5']:.1f}; FAISS/numpy "
              f"{r['faiss_p50_ms_k5'] / r['numpy_p50_ms_k5']:.2f}")


if __name__ == "__main__":
    main()
