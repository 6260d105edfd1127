"""Sandbox latency benchmark (issue 2, section 7): one interleaved run, medians and p95, ratios.

    python3 benchmarks/sandbox_latency.py [--iterations 50] [--starts 8] [--alive 32]

Measured in ONE run, the variants interleaved so that machine load hits them alike:

* trivial command (``echo hi``) through the persistent session vs one ``docker exec`` per command (what
  docker-exec harnesses do), and the ratio;
* a command printing 1 MB (observation capped) through the session;
* ``rg -i`` over 50 files of 200 KB in /work: through the session vs the same rg run with ``docker exec``,
  and vs rg's own time measured inside the container (what the session adds);
* start to first command (``Sandbox()`` + ``run("true")``), and from a warm ``SandboxPool``;
* the trivial command while ``--alive`` sandboxes are alive.

Targets (issue 2): trivial <= 2 ms and >= 50x faster than docker exec; 1 MB <= 50 ms; rg within 1.1x of
direct; cold start <= 0.5 s. The figures depend on the machine and its load (note it when it is shared).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import string
import subprocess
import sys
import time
from pathlib import Path

from fte_shell import Sandbox, SandboxConfig
from fte_shell.container import ensure_image
from fte_shell.sandbox import SandboxPool


def p95(xs: list[float]) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(0.95 * (len(s) - 1)))]


def fmt(xs: list[float]) -> str:
    return f"median {statistics.median(xs) * 1000:8.2f} ms   p95 {p95(xs) * 1000:8.2f} ms   (n={len(xs)})"


def make_corpus(root: Path, files: int = 50, size: int = 200_000, seed: int = 7) -> None:
    rng = random.Random(seed)
    words = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 9))) for _ in range(5000)]
    words += ["Needle", "haystack", "Fetch", "explore"]
    for i in range(files):
        out: list[str] = []
        n = 0
        while n < size:
            line = " ".join(rng.choices(words, k=12)) + "\n"
            out.append(line)
            n += len(line)
        (root / f"doc-{i:02d}.txt").write_text("".join(out)[:size])
    os.chmod(root, 0o755)


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iterations", type=int, default=50)
    ap.add_argument("--starts", type=int, default=8)
    ap.add_argument("--alive", type=int, default=32)
    args = ap.parse_args()
    docker = shutil.which("docker")
    if docker is None:
        print("docker CLI not found", file=sys.stderr)
        return 1
    cfg = SandboxConfig()
    ensure_image(cfg)
    results: dict[str, list[float]] = {
        k: [] for k in ("trivial", "exec", "mb", "rg", "rg_exec", "rg_inside", "start", "pool")
    }
    rg_cmd = "rg -i -c needle /work"
    with SandboxPool(cfg, size=1) as pool, Sandbox(cfg) as sb:
        make_corpus(sb.workspace)
        cid = sb.container_id
        exec_trivial = [docker, "exec", "-u", cfg.user, cid, "echo", "hi"]
        exec_rg = [docker, "exec", "-u", cfg.user, cid, "rg", "-i", "-c", "needle", "/work"]
        first = sb.run(rg_cmd)
        direct = subprocess.run(exec_rg, check=False, capture_output=True, text=True).stdout
        assert first.output == direct, (first.output[:200], direct[:200])
        for _ in range(3):  # warm-up
            sb.run("echo hi")
            subprocess.run(exec_trivial, check=False, capture_output=True)
        for i in range(args.iterations):
            results["trivial"].append(timed(lambda: sb.run("echo hi")))
            results["exec"].append(
                timed(lambda: subprocess.run(exec_trivial, check=False, capture_output=True))
            )
            results["mb"].append(timed(lambda: sb.run("head -c 1000000 /dev/zero | tr '\\0' x | fold -w 99")))
            results["rg"].append(timed(lambda: sb.run(rg_cmd)))
            results["rg_exec"].append(
                timed(lambda: subprocess.run(exec_rg, check=False, capture_output=True))
            )
            # rg's own time inside the container (no session, no docker exec), timed by bash itself
            inner = sb.run(
                f"t=$EPOCHREALTIME; {rg_cmd} >/dev/null; e=$EPOCHREALTIME; echo $t $e"
            ).output.split()
            results["rg_inside"].append(float(inner[1]) - float(inner[0]))
            if i < args.starts:  # a ready sandbox from a warm pool (refill waited out, not counted)
                pool.wait_ready()
                t = time.perf_counter()
                s3 = pool.acquire()
                s3.run("true")
                results["pool"].append(time.perf_counter() - t)
                s3.close()
            if i < args.starts:  # up to the first answer; removal is not counted
                t = time.perf_counter()
                s2 = Sandbox(cfg)
                s2.run("true")
                results["start"].append(time.perf_counter() - t)
                s2.close()

        alive: list[Sandbox] = []
        try:
            t = time.perf_counter()
            for _ in range(args.alive - 1):
                alive.append(Sandbox(cfg))
            bulk = time.perf_counter() - t
            many: list[float] = []
            for i in range(args.iterations):
                box = alive[i % len(alive)] if alive else sb
                many.append(timed(lambda b=box: b.run("echo hi")))
                results["trivial"].append(timed(lambda: sb.run("echo hi")))
        finally:
            t = time.perf_counter()
            for box in alive:
                box.close()
            teardown = time.perf_counter() - t

    med = {k: statistics.median(v) for k, v in results.items()}
    print(f"fte-shell sandbox latency (one interleaved run; {os.cpu_count()} CPUs, possibly shared)")
    print(f"  trivial via session         {fmt(results['trivial'])}")
    print(f"  trivial via docker exec     {fmt(results['exec'])}")
    print(f"    ratio exec/session        {med['exec'] / med['trivial']:8.1f}x   (target >= 50x, <= 2 ms)")
    print(f"  1 MB output via session     {fmt(results['mb'])}   (target <= 50 ms)")
    print(f"  rg -i 50x200 KB via session {fmt(results['rg'])}")
    print(f"  rg -i via docker exec       {fmt(results['rg_exec'])}")
    print(f"  rg -i run inside (no I/O)   {fmt(results['rg_inside'])}")
    print(f"    ratio session/exec        {med['rg'] / med['rg_exec']:8.2f}x   (target <= 1.1x)")
    print(f"    ratio session/inside      {med['rg'] / med['rg_inside']:8.2f}x   (session overhead on rg)")
    print(f"  start to first command      {fmt(results['start'])}   (target <= 0.5 s)")
    print(
        f"  ready sandbox from a pool   {fmt(results['pool'])}   (target <= 20 ms; acquire + first command)"
    )
    print(f"  trivial, {args.alive} sandboxes alive {fmt(many)}")
    print(f"  ({args.alive - 1} extra sandboxes started in {bulk:.1f} s, removed in {teardown:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
