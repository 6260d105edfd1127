"""The corpus in the box (``[sandbox] corpus``), measured: ``rg`` over a synthetic 100,000-document corpus
inside a box against the same ``rg`` on the host, and a box's start time with the /corpus mount against
without, per provider.

    python perf/corpus_in_box.py [--docs 100000] [--providers docker,podman,bwrap] [--repeats 7] [--starts 10]

The corpus is shaped like BrowseComp-Plus's (numeric docids, web-page-like documents: a title line, then
paragraphs; lengths log-normal, median ~700 words) and written as an export's tree by the exporter itself
(``fte_shell.sandbox.corpus_files.write_tree``: the same names, shards and modes as a real export). A few
rare words are planted in a known number of documents so the greps find something.

rg: the same command (``rg -c -i -j J PATTERN DIR``, output to /dev/null) timed the same way (bash's
``time``, wall clock) on the host and inside a box (``box.exec``) whose CPU quota is the host's cores (a box's
default is 1 core; a ratio against a host rg on more cores would measure the quota, not the mount); runs
interleaved host/box, the page cache warmed first; the figure is the median of each and their ratio.

Start: a box started by the provider (``start`` until the box runs, then ``stop``) with the tree bound at
/corpus against without, interleaved, median and p90 of each and the difference of the medians.
"""

from __future__ import annotations

import argparse
import math
import os
import random
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

PLANTED = {"zephyrine": 37, "quillonite": 400, "marrowgate": 5}
"""Rare words and the number of documents each is planted in (at most every document; once a document, at
a random place)."""
PATTERNS = ["zephyrine", "quillonite|marrowgate", "harbour [a-z]+ museum"]
"""What the greps look for: a rare word, an alternation, and a regex over common words."""


def synthetic_docs(n: int, seed: int = 11) -> Iterator[tuple[str, bytes]]:
    """``n`` (docid, content) pairs: numeric docids, a title line and paragraphs of sentences drawn from a
    Zipf-like vocabulary, log-normal lengths (median ~700 words, mean ~1,050)."""
    rng = random.Random(seed)
    syll = ["ar", "bel", "cor", "den", "el", "fa", "gor", "hal", "in", "jor", "ka", "lu", "mar", "nor", "o",
            "pel", "qua", "ri", "sen", "tor", "u", "ven", "wil", "xa", "yor", "zen"]
    common = ("the of and a to in is was for on as with by at from that his her it an were which are "
              "this be also has had first one their its new after who they two years city harbour museum "
              "river school war state national county university team season film album").split()
    vocab = common + ["".join(rng.choice(syll) for _ in range(rng.randint(2, 4))) for _ in range(30_000)]
    weights = [1 / (i + 1) for i in range(len(vocab))]
    words = rng.choices(vocab, weights, k=400_000)
    sentences = []
    for _ in range(40_000):
        k = rng.randint(6, 24)
        start = rng.randrange(len(words) - k)
        sentences.append(" ".join(words[start:start + k]).capitalize() + ".")
    planted: dict[int, list[str]] = {}
    for word, count in PLANTED.items():
        for i in rng.sample(range(n), min(count, n)):
            planted.setdefault(i, []).append(word)
    for i in range(n):
        length = int(math.exp(rng.gauss(math.log(700), 0.9)))
        title = " ".join(rng.choices(vocab[:3000], k=rng.randint(2, 7))).title()
        parts, count = [], 0
        while count < length:
            para = " ".join(rng.choices(sentences, k=rng.randint(2, 8)))
            parts.append(para)
            count += para.count(" ") + 1
        for word in planted.get(i, []):
            j = rng.randrange(len(parts))
            parts[j] = f"{parts[j]} The {word} was noted."
        docid = str(rng.randrange(10**6)) + f"{i:06d}"  # unique, numeric, unordered like BrowseComp-Plus's
        yield docid, (title + "\n" + "\n\n".join(parts) + "\n").encode()


def timed(argv: list[str]) -> float:
    """Wall seconds of ``argv`` by bash's ``time`` (the last line of its output)."""
    out = subprocess.run(argv, capture_output=True, text=True, check=False).stdout
    return float(out.strip().splitlines()[-1])


def rg_script(pattern: str, where: str, jobs: int) -> str:
    return f"TIMEFORMAT=%3R; {{ time rg -c -i -j {jobs} '{pattern}' {where} > /dev/null; }} 2>&1"


def measure_rg(provider: str, tree: Path, tmp: Path, repeats: int, jobs: int) -> list[tuple[str, float, float]]:
    p = get_provider(provider)
    cfg = SandboxConfig(provider=provider, cpus=float(jobs), memory="2g")
    p.prepare(cfg)
    ws, gw = tmp / f"ws-{provider}", tmp / f"gw-{provider}"
    for d in (ws, gw):
        d.mkdir(exist_ok=True)
        os.chmod(d, 0o755)
    box = p.start(BoxSpec(cfg, ws, gw, f"perf-corpus-{provider}", corpus=tree))
    rows = []
    try:
        for pattern in PATTERNS:
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


def measure_cold(provider: str, tree: Path, tmp: Path, jobs: int, memory: str) -> tuple[float, ...]:
    """(host cold, host again, box cold, box again) seconds of one rg, the page cache emptied of the tree
    before each cold run; the box has ``memory`` (its page cache is charged to it)."""
    p = get_provider(provider)
    cfg = SandboxConfig(provider=provider, cpus=float(jobs), memory=memory)
    ws, gw = tmp / f"ws-cold-{provider}", tmp / f"gw-cold-{provider}"
    for d in (ws, gw):
        d.mkdir(exist_ok=True)
        os.chmod(d, 0o755)
    host = ["bash", "-c", rg_script(PATTERNS[0], str(tree), jobs)]
    inside = ["bash", "-c", rg_script(PATTERNS[0], CF.CORPUS_MOUNT, jobs)]
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
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--providers", default="docker,podman,bwrap")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--starts", type=int, default=10)
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
        if not tree.is_dir():
            tree.mkdir(parents=True)
            t0 = time.perf_counter()
            width, written = CF.write_tree(tree, synthetic_docs(args.docs), args.docs)
            os.chmod(tree, 0o555)
            print(f"tree: {args.docs:,} documents, {written / 1e6:,.0f} MB, shard width {width}, "
                  f"written in {time.perf_counter() - t0:.1f} s ({tree})")
        jobs = os.cpu_count() or 1
        if args.cold:
            print(f"\nrg -c -i -j {jobs} {PATTERNS[0]}, the tree evicted first; box memory {args.cold}")
            print(f"{'provider':10} {'host cold':>10} {'again':>7} {'box cold':>9} {'again':>7} {'cold box/host':>14}")
            for provider in args.providers.split(","):
                h1, h2, b1, b2 = measure_cold(provider, tree, tmp, jobs, args.cold)
                print(f"{provider:10} {h1:10.3f} {h2:7.3f} {b1:9.3f} {b2:7.3f} {b1 / h1:14.3f}")
            return
        print(f"\nrg -c -i -j {jobs} (median of {args.repeats}; the box's CPU quota {jobs} cores)")
        print(f"{'provider':10} {'pattern':24} {'host s':>8} {'box s':>8} {'box/host':>9}")
        for provider in args.providers.split(","):
            for pattern, h, b in measure_rg(provider, tree, tmp, args.repeats, jobs):
                print(f"{provider:10} {pattern:24} {h:8.3f} {b:8.3f} {b / h:9.3f}")
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
