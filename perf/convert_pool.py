"""Conversion workers: fte_shell.fetch.pool (our own worker program over pipes) against the former pool
(a ProcessPoolExecutor with multiprocessing's spawn), in one run, on the same Python-docs pages.

    python3 perf/convert_pool.py [--pages 60] [--rounds 3]

1. cold start: from no worker to the first page converted (worker start, crawl4ai import), alternating;
2. one page at a time, interleaved page by page (the order swapped every page), each page ``--rounds``
   times: the best time per page, the median and sum over pages, the median of the per-page ratios;
3. round trip of a tiny page: what each pool itself costs per conversion;
4. throughput: every page converted by as many threads as there are workers, rounds alternating (best).
Each figure is printed with the ratio new / old (< 1: the new pool is faster).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from multiprocessing import get_context
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from fte_shell.fetch import pool
from fte_shell.fetch.convert import convert_bytes, prepare_crawl4ai_env

PYDOCS = Path("/usr/share/doc/python3.11/html")
Convert = Callable[[bytes, str], tuple[str, str]]


class SpawnPool:
    """The pool as it was: ProcessPoolExecutor, spawn context, crawl4ai's environment set at start."""

    def __init__(self) -> None:
        self.ex = ProcessPoolExecutor(
            pool.pool_size(), mp_context=get_context("spawn"), initializer=prepare_crawl4ai_env
        )

    def convert(self, body: bytes, url: str) -> tuple[str, str]:
        return self.ex.submit(convert_bytes, "html", body, "utf-8", url, None, None).result(timeout=120)

    def close(self) -> None:
        self.ex.shutdown(wait=True)


class WorkerPool:
    """fte_shell.fetch.pool as the fetch service uses it."""

    def convert(self, body: bytes, url: str) -> tuple[str, str]:
        return pool.convert("html", body, "utf-8", url, timeout_s=120)

    def close(self) -> None:
        pool.shutdown_pool()


def _ratio(new: float, old: float) -> str:
    return f"new/old x{new / old:.3f}"


def cold_start(pages: list[tuple[bytes, str]], rounds: int) -> None:
    times: dict[str, list[float]] = {"old": [], "new": []}
    for r in range(rounds):
        for name in ("old", "new") if r % 2 == 0 else ("new", "old"):
            t = time.perf_counter()
            p = SpawnPool() if name == "old" else WorkerPool()
            p.convert(*pages[0])
            times[name].append(time.perf_counter() - t)
            p.close()
    old, new = statistics.median(times["old"]), statistics.median(times["new"])
    print("\n1. cold start to the first page converted (median of", rounds, "each)")
    print(f"  old (spawn ProcessPoolExecutor): {old * 1e3:8.1f} ms")
    print(f"  new (fte_shell.fetch.worker):    {new * 1e3:8.1f} ms   {_ratio(new, old)}")


def one_at_a_time(old: SpawnPool, new: WorkerPool, pages: list[tuple[bytes, str]], rounds: int) -> None:
    """Every page converted ``rounds`` times by each pool, interleaved; per page the best time of each
    (the least disturbed by other load), then the median over pages and the ratio of the sums."""
    best: dict[str, list[float]] = {"old": [float("inf")] * len(pages), "new": [float("inf")] * len(pages)}
    for r in range(rounds):
        for i, (body, url) in enumerate(pages):
            order: list[tuple[str, Convert]] = [("old", old.convert), ("new", new.convert)]
            results = []
            for name, fn in order if (i + r) % 2 == 0 else order[::-1]:
                t = time.perf_counter()
                results.append(fn(body, url))
                best[name][i] = min(best[name][i], time.perf_counter() - t)
            assert results[0] == results[1], url  # the same converter in both: the same text
    o, n = statistics.median(best["old"]), statistics.median(best["new"])
    so, sn = sum(best["old"]), sum(best["new"])
    paired = statistics.median(b / a for a, b in zip(best["old"], best["new"], strict=True))
    print(f"\n2. one page at a time, {len(pages)} pages x {rounds} rounds interleaved, best of each per page")
    print(f"  old: median {o * 1e3:7.2f} ms per page, sum {so:.3f} s")
    print(f"  new: median {n * 1e3:7.2f} ms per page, sum {sn:.3f} s   {_ratio(sn, so)} (sums)")
    print(f"  median over pages of new/old: x{paired:.3f}")


def round_trip(old: SpawnPool, new: WorkerPool, n: int) -> None:
    """The pools' own cost: a tiny page (conversion ~0.2 ms) ``n`` times each, interleaved."""
    tiny = (b"<html><title>t</title><body><p>one line</p></body></html>", "https://example.com/")
    times: dict[str, list[float]] = {"old": [], "new": []}
    pair: list[tuple[str, Convert]] = [("old", old.convert), ("new", new.convert)]
    for i in range(n):
        for name, fn in pair if i % 2 == 0 else pair[::-1]:
            t = time.perf_counter()
            fn(*tiny)
            times[name].append(time.perf_counter() - t)
    o, nw = statistics.median(times["old"]), statistics.median(times["new"])
    print(f"\n3. round trip of a tiny page (the pool's own overhead), median of {n} each")
    print(f"  old: {o * 1e3:7.3f} ms")
    print(f"  new: {nw * 1e3:7.3f} ms   {_ratio(nw, o)}")


def throughput(old: SpawnPool, new: WorkerPool, pages: list[tuple[bytes, str]], rounds: int) -> None:
    rates: dict[str, list[float]] = {"old": [], "new": []}
    with ThreadPoolExecutor(pool.pool_size()) as threads:
        for r in range(rounds):
            pair: list[tuple[str, Convert]] = [("old", old.convert), ("new", new.convert)]
            for name, fn in pair if r % 2 == 0 else pair[::-1]:
                t = time.perf_counter()
                list(threads.map(lambda p, fn=fn: fn(*p), pages))
                rates[name].append(len(pages) / (time.perf_counter() - t))
    o, n = max(rates["old"]), max(rates["new"])
    print(
        f"\n4. throughput, {pool.pool_size()} threads over {pool.pool_size()} workers, best of {rounds} rounds"
    )
    print(f"  old: {o:7.1f} pages/s")
    print(f"  new: {n:7.1f} pages/s   {_ratio(n, o)} (pages/s)")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", type=int, default=60, help="Python-docs pages to convert (sampled evenly)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the cold-start and throughput figures")
    args = ap.parse_args(argv)
    if not (PYDOCS / "library" / "re.html").exists():
        raise SystemExit("python3.11-doc is not installed (apt-get install python3.11-doc)")
    every = sorted(PYDOCS.glob("library/*.html"))
    step = max(1, len(every) // max(1, args.pages))
    pages = [(p.read_bytes(), f"https://docs.python.org/3/{p.relative_to(PYDOCS)}") for p in every[::step]]
    pages = pages[: args.pages]
    print(
        f"{len(pages)} pages, {sum(len(b) for b, _ in pages) / 1e6:.1f} MB, {pool.pool_size()} workers each"
    )
    cold_start(pages, args.rounds)
    old, new = SpawnPool(), WorkerPool()
    with ThreadPoolExecutor(pool.pool_size()) as threads:  # every worker started and warm before timing
        for p in (old, new):
            list(threads.map(lambda b, p=p: p.convert(*b), pages[: pool.pool_size()] * 2))
    one_at_a_time(old, new, pages, args.rounds)
    round_trip(old, new, 500)
    throughput(old, new, pages, args.rounds)
    old.close()
    new.close()


if __name__ == "__main__":
    main()
