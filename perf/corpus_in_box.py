"""The corpus in the box (``[sandbox] corpus``), measured: ``rg`` over a synthetic 100,000-document corpus
inside a box against the same ``rg`` on the host, and a box's start time with the /corpus mount against
without, per provider.

    python perf/corpus_in_box.py [--docs 100000 | --from-jsonl FILE] [--providers docker,podman,bwrap]
                                 [--repeats 7] [--starts 10] [--cold MEMORY] [--keep DIR]

The corpus is the perf scripts' one BrowseComp-Plus-shaped synthetic corpus (perf/synthetic_corpus.py: mean
5,179.2 words a document, log-normal lengths, Zipf words; the retrieval perf's too), or
any JSONL collection given; it is written as an export's tree by the exporter itself
(``fte_shell.sandbox.corpus_files.write_tree``: the same names, shards and modes as a real export). The
greps' patterns come from the collection's first documents (:func:`patterns_of`).

rg: the same command (``rg -c -i -j J PATTERN DIR``, output to /dev/null) timed the same way (bash's
``time``, wall clock) on the host and inside a box (``box.exec``) whose CPU quota is the host's cores (a box's
default is 1 core; a ratio against a host rg on more cores would measure the quota, not the mount); runs
interleaved host/box, the page cache warmed first; the figure is the median of each and their ratio.

Start: a box started by the provider (``start`` until the box runs, then ``stop``) with the tree bound at
/corpus against without, interleaved, median and p90 of each and the difference of the medians.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fte_shell.config import SandboxConfig  # noqa: E402
from fte_shell.sandbox import BoxSpec, get_provider  # noqa: E402
from fte_shell.sandbox import corpus_files as CF  # noqa: E402


def read_collection(path: Path) -> Iterator[tuple[str, bytes]]:
    """(docid, file content) of each row of a JSONL collection: ``{id, contents}`` (Anserini's
    JsonCollection, what perf/synthetic_corpus.py's ``write_collection`` writes) or ``{docid, text}``."""
    with path.open() as f:
        for line in f:
            if line.strip():
                row = json.loads(line)
                text = str(row.get("contents", row.get("text", "")))
                yield str(row.get("id", row.get("docid"))), (text if text.endswith("\n") else text + "\n").encode()


def patterns_of(path: Path) -> list[str]:
    """What the greps look for, taken from the collection's first documents: a long word (a literal that
    matches few files), an alternation of two words, and a regex over every 12-letter-or-longer word."""
    docs = iter(read_collection(path))
    first = next(docs)[1].decode().split()
    second = next(docs)[1].decode().split()
    literal = max(first, key=len)
    return [literal, f"{second[len(second) // 2]}|{second[-1]}", "[a-z]{12,}"]


def timed(argv: list[str]) -> float:
    """Wall seconds of ``argv`` by bash's ``time`` (the last line of its output)."""
    out = subprocess.run(argv, capture_output=True, text=True, check=False).stdout
    return float(out.strip().splitlines()[-1])


def rg_script(pattern: str, where: str, jobs: int) -> str:
    return f"TIMEFORMAT=%3R; {{ time rg -c -i -j {jobs} '{pattern}' {where} > /dev/null; }} 2>&1"


def measure_rg(provider: str, tree: Path, tmp: Path, repeats: int, jobs: int,
               patterns: list[str], memory: str = "2g") -> list[tuple[str, float, float]]:
    p = get_provider(provider)
    cfg = SandboxConfig(provider=provider, cpus=float(jobs), memory=memory)
    p.prepare(cfg)
    ws, gw = tmp / f"ws-{provider}", tmp / f"gw-{provider}"
    for d in (ws, gw):
        d.mkdir(exist_ok=True)
        os.chmod(d, 0o755)
    box = p.start(BoxSpec(cfg, ws, gw, f"perf-corpus-{provider}", corpus=tree))
    rows = []
    try:
        for pattern in patterns:
            host = ["bash", "-c", rg_script(pattern, str(tree), jobs)]
            inside = ["bash", "-c", rg_script(pattern, CF.CORPUS_MOUNT, jobs)]
            timed(host)
            box.exec(inside)  # warm both
            hs, bs = [], []
            for _ in range(repeats):
                hs.append(timed(host))
                status, out = box.exec(inside)
                bs.append(float(out.strip().splitlines()[-1]))
            rows.append((pattern, statistics.median(hs), statistics.median(bs)))
    finally:
        box.stop()
    return rows


def evict(tree: Path) -> None:
    """Drop the tree's pages from the page cache (``POSIX_FADV_DONTNEED`` per file: only these files)."""
    for path in tree.rglob("*"):
        if path.is_file():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def measure_cold(provider: str, tree: Path, tmp: Path, jobs: int, memory: str,
                 pattern: str) -> tuple[float, ...]:
    """(host cold, host again, box cold, box again) seconds of one rg, the page cache emptied of the tree
    before each cold run; the box has ``memory`` (its page cache is charged to it)."""
    p = get_provider(provider)
    cfg = SandboxConfig(provider=provider, cpus=float(jobs), memory=memory)
    ws, gw = tmp / f"ws-cold-{provider}", tmp / f"gw-cold-{provider}"
    for d in (ws, gw):
        d.mkdir(exist_ok=True)
        os.chmod(d, 0o755)
    host = ["bash", "-c", rg_script(pattern, str(tree), jobs)]
    inside = ["bash", "-c", rg_script(pattern, CF.CORPUS_MOUNT, jobs)]
    evict(tree)
    h1, h2 = timed(host), timed(host)
    box = p.start(BoxSpec(cfg, ws, gw, f"perf-cold-{provider}", corpus=tree))
    try:
        evict(tree)
        b1, b2 = (float(box.exec(inside)[1].strip().splitlines()[-1]) for _ in range(2))
    finally:
        box.stop()
    return h1, h2, b1, b2


def measure_start(provider: str, tree: Path, tmp: Path, starts: int) -> tuple[list[float], list[float]]:
    p = get_provider(provider)
    cfg = SandboxConfig(provider=provider)
    p.prepare(cfg)
    ws, gw = tmp / f"ws-start-{provider}", tmp / f"gw-start-{provider}"
    for d in (ws, gw):
        d.mkdir(exist_ok=True)
        os.chmod(d, 0o755)
    with_, without = [], []
    for i in range(starts * 2 + 2):
        corpus = tree if i % 2 else None
        t0 = time.perf_counter()
        box = p.start(BoxSpec(cfg, ws, gw, f"perf-start-{provider}-{i}", corpus=corpus))
        dt = time.perf_counter() - t0
        box.stop()
        if i >= 2:  # the first pair warms the engine
            (with_ if corpus else without).append(dt)
    return with_, without


def p90(xs: list[float]) -> float:
    return sorted(xs)[max(0, math.ceil(0.9 * len(xs)) - 1)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=100_000, help="documents to generate (perf/retrieval_bm25.py)")
    ap.add_argument("--from-jsonl", type=Path, default=None,
                    help="the collection to use instead ({id, contents} or {docid, text} rows)")
    ap.add_argument("--providers", default="docker,podman,bwrap")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--starts", type=int, default=10)
    ap.add_argument("--memory", default="2g", help="the box's memory limit for the warm greps (the pages it "
                    "reads into the page cache are charged to it)")
    ap.add_argument("--patterns", default=None, help="which of the three patterns to run (e.g. 0,1)")
    ap.add_argument("--cold", default=None, metavar="MEMORY",
                    help="instead: rg with the tree out of the page cache, the box with this memory limit (1g)")
    ap.add_argument("--keep", type=Path, default=None, help="write the tree here and keep it (reused if there)")
    args = ap.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # rows as they are measured
    if shutil.which("rg") is None:
        sys.exit("rg is not on the host's PATH (apt-get install ripgrep)")
    tmp = Path(tempfile.mkdtemp(prefix="fte-perf-corpus-", dir="/var/tmp"))
    os.chmod(tmp, 0o755)
    tree = args.keep or tmp / "tree"
    try:
        collection = args.from_jsonl
        if collection is None:  # the perf scripts' one BrowseComp-Plus-shaped generator
            from perf.synthetic_corpus import write_collection

            t0 = time.perf_counter()
            collection = write_collection(args.docs, tmp)
            print(f"generated {args.docs:,} documents in {time.perf_counter() - t0:.1f} s")
        docs = sum(1 for line in collection.open() if line.strip())
        if not tree.is_dir():
            tree.mkdir(parents=True)
            t0 = time.perf_counter()
            width, written = CF.write_tree(tree, read_collection(collection), docs)
            os.chmod(tree, 0o555)
            print(f"tree: {docs:,} documents, {written / 1e6:,.0f} MB, shard width {width}, "
                  f"written in {time.perf_counter() - t0:.1f} s ({tree})")
        patterns = patterns_of(collection)
        if args.patterns:
            patterns = [patterns[int(i)] for i in args.patterns.split(",")]
        jobs = os.cpu_count() or 1
        if args.cold:
            print(f"\nrg -c -i -j {jobs} {patterns[0]}, the tree evicted first; box memory {args.cold}")
            print(f"{'provider':10} {'host cold':>10} {'again':>7} {'box cold':>9} {'again':>7} {'cold box/host':>14}")
            for provider in args.providers.split(","):
                h1, h2, b1, b2 = measure_cold(provider, tree, tmp, jobs, args.cold, patterns[0])
                print(f"{provider:10} {h1:10.3f} {h2:7.3f} {b1:9.3f} {b2:7.3f} {b1 / h1:14.3f}")
            return
        print(f"\nrg -c -i -j {jobs} (median of {args.repeats}; the box's CPU quota {jobs} cores, memory {args.memory})")
        print(f"{'provider':10} {'pattern':24} {'host s':>8} {'box s':>8} {'box/host':>9}")
        for provider in args.providers.split(","):
            for pattern, h, b in measure_rg(provider, tree, tmp, args.repeats, jobs, patterns, args.memory):
                print(f"{provider:10} {pattern:24} {h:8.3f} {b:8.3f} {b / h:9.3f}")
        if args.starts <= 0:
            return
        print(f"\nbox start (provider.start, {args.starts} each, interleaved)")
        print(f"{'provider':10} {'without ms':>11} {'p90':>7} {'with ms':>9} {'p90':>7} {'diff ms':>8}")
        for provider in args.providers.split(","):
            w, wo = measure_start(provider, tree, tmp, args.starts)
            mw, mwo = statistics.median(w) * 1e3, statistics.median(wo) * 1e3
            print(f"{provider:10} {mwo:11.1f} {p90(wo) * 1e3:7.1f} {mw:9.1f} {p90(w) * 1e3:7.1f} {mw - mwo:8.1f}")
    finally:
        CF.remove_tree(tmp)


if __name__ == "__main__":
    main()
