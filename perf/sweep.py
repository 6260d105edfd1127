"""Sweep throughput and harness memory with the scripted research policy.

For each concurrency level (default 1, 8, 32) a fresh sweep of N HotpotQA questions × the given profiles
(default shell,fte) runs through the real harness (containers for shell, the local corpus, the scripted
model on loopback, in this process). Printed per level: wall time, runs and questions per minute, the
speed-up over the first level (measured in the same invocation), peak live containers, and the peak RSS
of the harness process tree (this process + its children: pexpect/docker-exec clients, the conversion
pool), sampled every 50 ms, plus getrusage's high-water marks.

    python perf/sweep.py [--questions 32] [--levels 1,8,32] [--profiles shell,fte] [--ray]

``--ray`` (needs the ray extra) also runs each level on a 3-node local Ray cluster
(``ray.cluster_utils.Cluster`` on 127.0.0.1: a head and 2 workers sharing the level's slots, the local
Docker daemon) and prints its questions per minute against the local sweep of the same level measured in
the same invocation, and the overhead per task in slot-seconds ((ray wall - local wall) x slots / runs).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

from fte_shell.benchmarks.hotpotqa import default_hotpotqa_dir, ensure_hotpotqa_corpus
from fte_shell.config import ModelConfig, RunConfig
from fte_shell.standins.research import ResearchPolicy
from fte_shell.standins.server import ScriptedServer
from fte_shell.sweep import BenchConfig, run_sweep

PAGE = os.sysconf("SC_PAGE_SIZE")


def tree_rss(root: int) -> int:
    """Summed RSS (bytes) of ``root`` and all its descendants, from /proc."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            stat = Path(f"/proc/{d}/stat").read_text()
            fields = stat[stat.rfind(")") + 2 :].split()
            ppid = int(fields[1])
            rss[int(d)] = int(fields[21]) * PAGE
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(d))
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0)
        stack.extend(children.get(pid, []))
    return total


class Sampler(threading.Thread):
    """Samples the process tree's RSS and the number of live sandbox containers."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak_rss = 0
        self.peak_containers = 0
        self._halt = threading.Event()

    def run(self) -> None:
        from fte_shell.sandbox.providers.docker import container

        while not self._halt.is_set():
            self.peak_rss = max(self.peak_rss, tree_rss(os.getpid()))
            self.peak_containers = max(self.peak_containers, len(container._live))
            self._halt.wait(0.05)

    def stop(self) -> None:
        self._halt.set()
        self.join()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--questions", type=int, default=32)
    ap.add_argument("--levels", default="1,8,32")
    ap.add_argument("--profiles", default="shell,fte")
    ap.add_argument("--data", type=Path, default=default_hotpotqa_dir())
    ap.add_argument("--ray", action="store_true", help="also run each level on a 3-node local Ray cluster")
    args = ap.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    profiles = [p for p in args.profiles.split(",") if p]
    work = Path(tempfile.mkdtemp(prefix="fte-bench-sweep-"))
    try:
        corpus = ensure_hotpotqa_corpus(args.data, work / "corpus")
        rows = []
        with ScriptedServer(policy=ResearchPolicy()) as srv:
            cfg = RunConfig(model=ModelConfig(base_url=srv.base_url, model="scripted", api_key="x"))
            for level in levels:
                bench = BenchConfig(dataset=f"hotpotqa:{args.data}", limit=args.questions, profiles=profiles,
                                    concurrency=level, out=work / f"c{level}", corpus_dir=corpus)
                sampler = Sampler()
                sampler.start()
                t0 = time.monotonic()
                stats = run_sweep(bench, cfg)
                wall = time.monotonic() - t0
                sampler.stop()
                if stats.failed or stats.done != stats.total:
                    print(f"concurrency {level}: {stats.failed} failed of {stats.total}", file=sys.stderr)
                    failures = bench.out / "failures.jsonl"
                    for line in failures.read_text().splitlines()[:3] if failures.exists() else []:
                        print(f"  {line[:600]}", file=sys.stderr)
                rows.append((level, wall, stats.done, sampler.peak_rss, sampler.peak_containers))
            ray_rows = ray_levels(args, levels, profiles, cfg, corpus, work) if args.ray else []
        base_qpm = None
        print(f"\nsweep benchmark: {args.questions} HotpotQA questions x {','.join(profiles)}, scripted policy, "
              f"{os.cpu_count()} CPUs")
        print(f"{'concurrency':>11} {'wall s':>8} {'runs/min':>9} {'questions/min':>14} {'speed-up':>9} "
              f"{'peak containers':>16} {'peak tree RSS MiB':>18}")
        for level, wall, done, rss, live in rows:
            qpm = args.questions / wall * 60
            base_qpm = base_qpm or qpm
            print(f"{level:>11} {wall:>8.1f} {done / wall * 60:>9.1f} {qpm:>14.1f} {qpm / base_qpm:>8.2f}x "
                  f"{live:>16} {rss / 2**20:>18.0f}")
        if ray_rows:
            local_wall = {r[0]: r[1] for r in rows}
            print("\n3-node local Ray cluster (head + 2 workers, slots = concurrency), same sweep:")
            print(f"{'slots':>11} {'wall s':>8} {'questions/min':>14} {'vs local':>9} {'overhead/task slot-s':>21}")
            for level, wall, done in ray_rows:
                qpm = args.questions / wall * 60
                ratio = local_wall[level] / wall
                over = (wall - local_wall[level]) * level / max(1, done)
                print(f"{level:>11} {wall:>8.1f} {qpm:>14.1f} {ratio:>8.2f}x {over:>21.2f}")
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(f"getrusage high-water: harness process {own:.0f} MiB, largest waited-for child {kids:.0f} MiB")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def ray_levels(args: argparse.Namespace, levels: list[int], profiles: list[str], cfg: RunConfig, corpus: Path,
               work: Path) -> list[tuple[int, float, int]]:
    """Each level's sweep on a fresh 3-node local cluster whose fte_slots add up to the level."""
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # keep Ray on 127.0.0.1
    import ray
    from ray.cluster_utils import Cluster

    from fte_shell.distributed import RayExecutor

    out = []
    for level in levels:
        slots = [level // 3 + (1 if i < level % 3 else 0) for i in range(3)]
        c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "resources": {"fte_slot": slots[0]},
                                                          "include_dashboard": False, "node_ip_address": "127.0.0.1"})
        for k in slots[1:]:
            c.add_node(num_cpus=1, resources={"fte_slot": k}, node_ip_address="127.0.0.1")
        try:
            ray.init(address=c.address, log_to_driver=False)
            c.wait_for_nodes()
            bench = BenchConfig(dataset=f"hotpotqa:{args.data}", limit=args.questions, profiles=profiles,
                                out=work / f"ray{level}", corpus_dir=corpus)
            t0 = time.monotonic()
            stats = run_sweep(bench, cfg, remote=RayExecutor())
            wall = time.monotonic() - t0
            if stats.failed or stats.done != stats.total:
                print(f"ray {level}: {stats.failed} failed of {stats.total}", file=sys.stderr)
            out.append((level, wall, stats.done))
        finally:
            ray.shutdown()
            c.shutdown()
    return out


if __name__ == "__main__":
    raise SystemExit(main())
