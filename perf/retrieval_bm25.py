"""The ``bm25`` retriever against Anserini's own command-line tools, in one run, on the same corpora.

    python3 perf/retrieval_bm25.py [--sizes 10000,30000,100000] [--queries 200] [--no-hotpotqa]

Corpora: the perf scripts' synthetic documents shaped like BrowseComp-Plus's (perf/synthetic_corpus.py:
log-normal lengths with the paper's mean of 5,179.2 words, Zipf(1.1) words over ``--vocab`` pseudo-words),
at each ``--sizes``; and the 5,895 HotpotQA pages. Per corpus:

1. **build**: Anserini's ``IndexCollection`` over the corpus as a JsonCollection (written beforehand,
   not timed) against fte-shell's build (the ``bm25`` kind writing that JSONL from the corpus texts, then
   the same indexer): wall time and peak resident memory of the largest process (``wait4``);
2. **query**: Anserini's ``SearchCollection -bm25 -threads 1`` has no per-query clock, so its cost per query
   is the marginal one: (time of Q queries − time of 1 query) / (Q − 1), JVM start excluded. fte-shell's
   ``bm25`` (``search`` through its worker, one query at a time, after 20 warm-up queries): p50 and p99 of
   the caller's wall time; and the worker's floor (a query matching nothing). ``--rounds`` passes per side,
   alternating who goes first; means are the median over rounds, p50/p99 over every query of every round.

Each figure is printed with the ratio fte-shell / Anserini (< 1: fte-shell is faster).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from fte_shell.search.retrievers.base import RetrieverSpec  # noqa: E402
from fte_shell.search.retrievers.lucene import KIND, index_command  # noqa: E402
from fte_shell.search.retrievers.lucene_jar import find_jar, java  # noqa: E402
from perf.synthetic_corpus import synthetic_queries, write_collection  # noqa: E402

SPEC = RetrieverSpec("bm25", "", "bm25")


def run_measured(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, int, str]:
    """(wall seconds, peak RSS in MB of the largest process of the command's tree, its stdout)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"{cmd[:4]} failed: {err.read().decode(errors='replace')[-1500:]}")
        return elapsed, usage.ru_maxrss // 1024, out.read().decode(errors="replace")


def hotpotqa(out: Path) -> list[str]:
    from fte_shell.benchmarks.hotpotqa import default_hotpotqa_dir, load_hotpotqa
    from fte_shell.search.corpus import hotpotqa_docs, index_text

    data = default_hotpotqa_dir()
    with (out / "docs.jsonl").open("w") as f:
        for d in hotpotqa_docs(data):
            f.write(json.dumps({"id": d.docid, "contents": index_text(d)}) + "\n")
    return [" ".join(q.question.split()) for s in ("dev", "test") for q in load_hotpotqa(data, s)]


BUILD_CHILD = """
import json, sys, time
from pathlib import Path
from fte_shell.search.retrievers.base import RetrieverSpec
from fte_shell.search.retrievers.lucene import KIND
class Texts:
    fingerprint = "perf"
    def __init__(self, path): self.path = path
    def __len__(self): return sum(1 for _ in open(self.path))
    def texts(self):
        with open(self.path) as f:
            for line in f:
                row = json.loads(line)
                yield row["id"], row["contents"]
t0 = time.perf_counter()
KIND.build(RetrieverSpec("bm25", "", "bm25"), Texts(sys.argv[1]), Path(sys.argv[2]), None)
print(time.perf_counter() - t0)
"""


def measure(coll: Path, queries: list[str], work: Path, rounds: int) -> dict[str, float]:
    jar = find_jar()
    out: dict[str, float] = {}
    theirs_idx, ours_idx = work / "anserini-index", work / "ours" / "lucene"
    ours_idx.mkdir(parents=True)
    # 1. build: one each (Anserini first)
    out["build_anserini_s"], out["build_anserini_mb"], _ = run_measured(index_command(jar, coll, theirs_idx))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    # fte-shell's build runs in a child only for its peak memory; its time is the build call's (the child's
    # interpreter start and imports are not part of a build)
    _, out["build_ours_mb"], said = run_measured(
        [sys.executable, "-c", BUILD_CHILD, str(coll / "docs.jsonl"), str(ours_idx)], env)
    out["build_ours_s"] = float(said.split()[-1])
    # 2. queries
    topics = work / "topics.tsv"
    topics.write_text("".join(f"q{i}\t{q}\n" for i, q in enumerate(queries)))
    one = work / "one.tsv"
    one.write_text(f"q0\t{queries[0]}\n")
    retriever = KIND.open(SPEC, ours_idx, None)  # type: ignore[arg-type]
    try:
        for q in queries[:20]:
            retriever.search(q, 1000)
        for k in (5, 1000):
            spans: list[float] = []
            ours_means: list[float] = []
            theirs_means: list[float] = []
            for r in range(rounds):  # alternating who goes first
                for turn in ((0, 1) if r % 2 == 0 else (1, 0)):
                    if turn == 0:
                        got = []
                        for q in queries:
                            t0 = time.perf_counter()
                            retriever.search(q, k)
                            got.append(time.perf_counter() - t0)
                        spans += got
                        ours_means.append(sum(got) / len(got) * 1e3)
                    else:
                        times = {}
                        for name, topic_file in (("all", topics), ("one", one)):
                            times[name], _, _ = run_measured([
                                str(java()), "-cp", str(jar), "io.anserini.search.SearchCollection", "-index",
                                str(theirs_idx), "-topics", str(topic_file), "-topicReader", "TsvString",
                                "-output", str(work / f"run-{name}"), "-bm25", "-hits", str(k), "-threads", "1"])
                        theirs_means.append((times["all"] - times["one"]) / (len(queries) - 1) * 1e3)
            spans.sort()
            out[f"ours_k{k}_p50_ms"] = spans[len(spans) // 2] * 1e3
            out[f"ours_k{k}_p99_ms"] = spans[min(len(spans) - 1, int(len(spans) * 0.99))] * 1e3
            out[f"ours_k{k}_mean_ms"] = statistics.median(ours_means)
            out[f"anserini_k{k}_mean_ms"] = statistics.median(theirs_means)
        floor = []
        for _ in range(50):
            t0 = time.perf_counter()
            retriever.search("qqqqzzzzxxxx", 5)
            floor.append(time.perf_counter() - t0)
        floor.sort()
        out["ours_floor_p50_ms"] = floor[len(floor) // 2] * 1e3
    finally:
        retriever.close()
    return out


def _size(n: int) -> str:
    return f"{n // 1000}k" if n % 1000 == 0 else str(n)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="10000,30000,100000")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--no-hotpotqa", action="store_true")
    ap.add_argument("--rounds", type=int, default=3, help="query passes per side, alternating who goes first")
    ap.add_argument("--vocab", type=int, default=200_000, help="pseudo-words of the synthetic corpora")
    args = ap.parse_args()
    rows: list[tuple[str, dict[str, float]]] = []
    corpora: list[tuple[str, int]] = [] if args.no_hotpotqa else [("hotpotqa", 0)]
    corpora += [(f"synthetic-{_size(int(n))}", int(n)) for n in args.sizes.split(",") if n]
    for label, n in corpora:
        with tempfile.TemporaryDirectory(prefix="fte-perf-bm25-") as tmp:
            work = Path(tmp)
            coll = work / "collection"
            coll.mkdir()
            t0 = time.perf_counter()
            if n == 0:
                queries = hotpotqa(coll)[: args.queries]
            else:
                write_collection(n, coll, vocab_size=args.vocab)
                queries = synthetic_queries(args.queries, query_seed=n, vocab_size=args.vocab)
            size_mb = (coll / "docs.jsonl").stat().st_size / 1e6
            print(f"[{label}] corpus written ({size_mb:.0f} MB, {time.perf_counter() - t0:.0f} s); measuring",
                  file=sys.stderr, flush=True)
            figures = measure(coll, queries, work, args.rounds)
            figures["corpus_mb"] = size_mb
            rows.append((label, figures))
            print(f"[{label}] {json.dumps({k: round(v, 2) for k, v in figures.items()})}", file=sys.stderr, flush=True)
    print("| corpus | text MB | build s (Anserini / ours = ratio) | build peak MB (Anserini / ours) | "
          "query k=5 ms: Anserini mean / ours p50, p99 (ratio of means) | k=1000 likewise | worker floor ms |")
    print("|---|---|---|---|---|---|---|")
    for label, f in rows:
        cells = [label, f"{f['corpus_mb']:.0f}",
                 f"{f['build_anserini_s']:.1f} / {f['build_ours_s']:.1f} = {f['build_ours_s'] / f['build_anserini_s']:.2f}",
                 f"{f['build_anserini_mb']:.0f} / {f['build_ours_mb']:.0f}"]
        for k in (5, 1000):
            cells.append(f"{f[f'anserini_k{k}_mean_ms']:.2f} / {f[f'ours_k{k}_p50_ms']:.2f}, "
                         f"{f[f'ours_k{k}_p99_ms']:.2f} ({f[f'ours_k{k}_mean_ms'] / max(f[f'anserini_k{k}_mean_ms'], 1e-9):.2f})")
        cells.append(f"{f['ours_floor_p50_ms']:.2f}")
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
