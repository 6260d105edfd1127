"""Sandbox figures the way the field reports them, fte-shell beside its peers, in ONE interleaved run.

    python3 perf/sandbox_figures.py [--quick] [--cases docker,podman,bwrap,verifiers-docker,mini-swe-agent]
                                    [--json FILE]

Cases (columns): fte-shell's ``docker``, ``podman`` and ``bwrap`` providers driven through the public API
a trainer uses, the :class:`~fte_shell.episode.Episode` (``Episode.aopen`` → ``acall("bash", …)`` →
``afinish`` → ``aclose``: a run directory, the shell profile, its box; the loop's default executor);
``pool-<provider>`` (``fte_shell.rl.EpisodePool`` ``reset``/``step``/``finish``, when that package
exists); and the baselines on the same machine and the same image (``fte-shell-sandbox:latest``):
``verifiers-docker`` (verifiers 0.4's local ``DockerRuntime``: ``start`` → ``run(["bash", "-lc", cmd])``
→ ``stop``, asyncio subprocesses) and ``mini-swe-agent`` (its ``DockerEnvironment``: ``docker run -d``,
one ``docker exec`` per command, ``cleanup``; a thread per box, as its batch runner does).

Measures, each run for every case in turn (the order rotated per round, so load hits them alike):

* sequential: ``--sequential`` starts one after another, each created → first command (``echo
  benchmark``) → destroyed (destroy not timed): p50/p95/p99 and success rate (ComputeSDK's leaderboard);
* staggered: ``--stagger`` starts launched ``--stagger-interval`` s apart, all held until the last is
  ready; bursts: ``--bursts`` starts launched at once: answered / launched, p50 and p99 of each box's
  create → first command, and the time until all are ready;
* trajectory: one box through ``--actions`` scripted actions, start to close, end to end;
* episodes per second: ``--episodes`` scripted 10-action episodes (start, 10 actions, close) with
  ``--concurrency`` in flight (at least as many episodes as in flight).

Every action's output is checked (a marker it must print): a wrong answer is a failure. Goals (issue 27):
100 % of a 64-box burst answers; episodes/s ≥ 20× verifiers' docker runtime. The figures depend on the
machine and its load (printed at start and end).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import sandbox_boxes
from sandbox_boxes import CASES, Box, Starter, close_pools, make_cases, open_pools, settle
from sandbox_latency import pct

FIRST = "echo benchmark"
ACTIONS = (
    "echo ok-{i}",
    "ls / | head -n 5; echo ok-{i}",
    "printf 'line %s\\n' $(seq 1 200) > /tmp/f{i} && wc -l /tmp/f{i} && echo ok-{i}",
    "grep -c : /etc/passwd; echo ok-{i}",
    "seq 1 5000 | awk '{{s+=$1}} END {{print s}}'; echo ok-{i}",
    "head -n 2 /etc/os-release; echo ok-{i}",
)
"""The scripted actions, cycled; action i must print ``ok-i``."""


# --- the measures ------------------------------------------------------------------------------------------
async def first_command(start: Starter, timeout: float) -> tuple[float | None, Box | None, str | None]:
    """(seconds from create to the first command's answer, the box, None) or (None, None, the error)."""
    t = time.perf_counter()
    box: Box | None = None
    try:
        box = await asyncio.wait_for(start(), timeout)
        out = await asyncio.wait_for(box.run(FIRST), timeout)
        if "benchmark" not in out:
            raise RuntimeError(f"the first command answered {out[:80]!r}")
        return time.perf_counter() - t, box, None
    except Exception as e:  # noqa: BLE001 - a failed start is a figure
        if box is not None:
            with contextlib.suppress(Exception):
                await box.close()
        return None, None, f"{e.__class__.__name__}: {e}"[:300]


async def close_all(boxes: list[Box | None]) -> None:
    await asyncio.gather(*(b.close() for b in boxes if b is not None), return_exceptions=True)


def summary(times: list[float | None], errors: list[str]) -> dict[str, Any]:
    ok = [t for t in times if t is not None]
    return {"n": len(times), "ok": len(ok), "p50": pct(ok, 0.5), "p95": pct(ok, 0.95), "p99": pct(ok, 0.99),
            "errors": sorted(set(errors))[:3]}


async def sequential(start: Starter, timeout: float) -> tuple[float | None, str | None]:
    t, box, err = await first_command(start, timeout)
    if box is not None:
        await box.close()
    return t, err


async def launch(start: Starter, n: int, interval: float, timeout: float) -> dict[str, Any]:
    """n starts, ``interval`` s apart (0: a burst); all held until the last is ready, then closed."""
    async def one(i: int) -> tuple[float | None, Box | None, str | None]:
        await asyncio.sleep(i * interval)
        return await first_command(start, timeout)

    t0 = time.perf_counter()
    res = await asyncio.gather(*(one(i) for i in range(n)))
    all_ready = time.perf_counter() - t0
    await close_all([b for _, b, _ in res])
    s = summary([t for t, _, _ in res], [e for _, _, e in res if e])
    s["all_ready_s"] = all_ready
    return s


async def episode(start: Starter, actions: int, timeout: float) -> None:
    box = await asyncio.wait_for(start(), timeout)
    try:
        for i in range(actions):
            out = await asyncio.wait_for(box.run(ACTIONS[i % len(ACTIONS)].format(i=i)), timeout)
            if f"ok-{i}" not in out:
                raise RuntimeError(f"action {i} answered {out[:80]!r}")
    finally:
        await box.close()


async def trajectory(start: Starter, actions: int, timeout: float) -> tuple[float | None, str | None]:
    t = time.perf_counter()
    try:
        await episode(start, actions, timeout)
    except Exception as e:  # noqa: BLE001
        return None, f"{e.__class__.__name__}: {e}"[:300]
    return time.perf_counter() - t, None


async def throughput(start: Starter, concurrency: int, episodes: int, timeout: float) -> dict[str, Any]:
    """``episodes`` 10-action episodes, ``concurrency`` in flight: episodes per second (successful ones)."""
    sem = asyncio.Semaphore(concurrency)
    errors: list[str] = []

    async def one() -> bool:
        async with sem:
            try:
                await episode(start, 10, timeout)
                return True
            except Exception as e:  # noqa: BLE001
                errors.append(f"{e.__class__.__name__}: {e}"[:300])
                return False

    t0 = time.perf_counter()
    oks = await asyncio.gather(*(one() for _ in range(episodes)))
    wall = time.perf_counter() - t0
    return {"n": episodes, "ok": sum(oks), "wall_s": wall, "eps": sum(oks) / wall,
            "errors": sorted(set(errors))[:3]}


def rotated(names: list[str], k: int) -> list[str]:
    k %= max(1, len(names))
    return names[k:] + names[:k]


# --- the run -----------------------------------------------------------------------------------------------
async def measure(starters: dict[str, Starter], a: argparse.Namespace) -> dict[str, Any]:
    names = list(starters)
    seq: dict[str, tuple[list[float | None], list[str]]] = {n: ([], []) for n in names}
    for i in range(a.sequential):
        for n in rotated(names, i):
            t, err = await sequential(starters[n], a.timeout)
            seq[n][0].append(t)
            seq[n][1].extend([err] if err else [])
    out: dict[str, Any] = {"sequential": {n: summary(*seq[n]) for n in names}, "launch": {},
                           "trajectory": {}, "throughput": {}}
    await settle()
    launches = [(f"burst {b}", b, 0.0) for b in a.bursts]
    if a.stagger:
        gap = a.stagger_interval
        launches.insert(0, (f"staggered {a.stagger} @{gap:g} s", a.stagger, gap))
    for k, (label, n_boxes, gap) in enumerate(launches):
        out["launch"][label] = {}
        for n in rotated(names, k):
            out["launch"][label][n] = await launch(starters[n], n_boxes, gap, a.timeout)
            await settle()
    traj: dict[int, dict[str, list[float]]] = {x: {n: [] for n in names} for x in a.actions}
    for rep in range(a.traj_reps):
        for x in a.actions:
            for n in rotated(names, rep + x):
                t, err = await trajectory(starters[n], x, a.timeout)
                traj[x][n] += [t] if t is not None else []
                if err:
                    print(f"{n}: {x}-action trajectory failed: {err}", file=sys.stderr)
    out["trajectory"] = {str(x): {n: pct(v, 0.5) for n, v in d.items()} for x, d in traj.items()}
    await settle()
    for k, c in enumerate(a.concurrency):
        out["throughput"][str(c)] = {}
        for n in rotated(names, k):
            out["throughput"][str(c)][n] = await throughput(starters[n], c, max(c, a.episodes), a.timeout)
            await settle()
    return out


def _ms(x: float) -> str:
    return "–" if x != x else f"{x * 1000:,.0f} ms" if x < 10 else f"{x:,.1f} s"


def _ratio(base: float, x: float) -> str:
    return "–" if base != base or x != x or x == 0 else f"{base / x:.1f}×"


def report(res: dict[str, Any], names: list[str], base: str) -> list[str]:
    """The markdown table: one row per figure, one column per case, then ``base ÷ case`` per case (how many
    times faster the case is than the baseline; for episodes/s, case ÷ baseline)."""
    nan = {n: float("nan") for n in names}
    rows: list[tuple[str, dict[str, str], dict[str, float], bool]] = []
    s = res["sequential"]
    for q in ("p50", "p95", "p99"):
        vals = {n: s[n][q] for n in names}
        rows.append((f"create → first command, sequential, {q}", {n: _ms(v) for n, v in vals.items()}, vals,
                     False))
    rows.append(("sequential success", {n: f"{s[n]['ok']}/{s[n]['n']}" for n in names}, nan, False))
    for label, d in res["launch"].items():
        rows += [(f"{label}: answered", {n: f"{d[n]['ok']}/{d[n]['n']}" for n in names}, nan, False),
                 (f"{label}: p50 / p99", {n: f"{_ms(d[n]['p50'])} / {_ms(d[n]['p99'])}" for n in names},
                  {n: d[n]["p50"] for n in names}, False),
                 (f"{label}: all ready", {n: _ms(d[n]["all_ready_s"]) for n in names},
                  {n: d[n]["all_ready_s"] for n in names}, False)]
    for x, d in res["trajectory"].items():
        rows.append((f"{x}-action trajectory, end to end", {n: _ms(d[n]) for n in names}, d, False))
    for c, d in res["throughput"].items():
        rows.append((f"episodes/s, 10 actions, {c} in flight",
                     {n: f"{d[n]['eps']:.2f} ({d[n]['ok']}/{d[n]['n']})" for n in names},
                     {n: d[n]["eps"] for n in names}, True))
    others = [n for n in names if n != base] if base in names else []
    head = ["figure", *names, *(f"{base} ÷ {n}" for n in others)]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, cells, vals, inverse in rows:
        ratios = [_ratio(vals[n], vals[base]) if inverse else _ratio(vals[base], vals[n]) for n in others]
        out.append("| " + " | ".join([label, *(cells[n] for n in names), *ratios]) + " |")
    return out


def goals(res: dict[str, Any], names: list[str], base: str) -> list[str]:
    """The goals (issue 27), met or not, and every failure's first messages."""
    out = []
    for label, d in res["launch"].items():
        if label.startswith("burst"):
            out += [f"{label}: {n} {d[n]['ok']}/{d[n]['n']} answered"
                    + ("" if d[n]["ok"] == d[n]["n"] else " (goal 100 %: missed)") for n in names]
    for c, d in res["throughput"].items():
        b = d[base]["eps"] if base in names else 0.0
        out += [f"episodes/s at {c} in flight: {n} {d[n]['eps'] / b:.1f}× {base} (goal ≥ 20×)"
                for n in names if b and n not in (base, "mini-swe-agent")]
    for fig, by_case in [("sequential", res["sequential"]), *res["launch"].items(),
                         *((f"episodes at {c}", d) for c, d in res["throughput"].items())]:
        out += [f"{n}: {fig}: failed: {'; '.join(d['errors'])}" for n, d in by_case.items() if d["errors"]]
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ints = lambda s: [int(x) for x in s.split(",") if x]  # noqa: E731
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--baseline", default="verifiers-docker", help="the case the ratios are taken against")
    ap.add_argument("--sequential", type=int, default=100)
    ap.add_argument("--stagger", type=int, default=64, help="boxes in the staggered start (0: skip)")
    ap.add_argument("--stagger-interval", type=float, default=0.2)
    ap.add_argument("--bursts", type=ints, default=[32, 64])
    ap.add_argument("--actions", type=ints, default=[10, 50, 150])
    ap.add_argument("--traj-reps", type=int, default=3)
    ap.add_argument("--concurrency", type=ints, default=[8, 32, 128])
    ap.add_argument("--episodes", type=int, default=64,
                    help="episodes per concurrency level (at least the level)")
    ap.add_argument("--pool-size", type=int, default=None,
                    help="the pool cases' warm boxes (PoolConfig.size; default: the pool's own, 8): a trainer "
                         "sizes it to its episodes in flight")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds before a start or an action fails")
    ap.add_argument("--no-settle", dest="settle", action="store_false",
                    help="do not wait for the peers' containers to go between phases (mini-swe-agent "
                         "stops its own in the background, about 10 s each)")
    ap.add_argument("--quick", action="store_true", help="tiny counts, no settling: a smoke run, not figures")
    ap.add_argument("--json", type=Path, help="write every figure here")
    if ap.parse_known_args(argv)[0].quick:  # its counts are defaults: explicit flags still win
        ap.set_defaults(sequential=2, stagger=2, stagger_interval=0.05, bursts=[2], actions=[3], traj_reps=1,
                        concurrency=[2], episodes=2, settle=False)
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="fte-figures-"))
    os.chmod(root, 0o755)  # bwrap's uid 1000 enters the run directories
    threads = ThreadPoolExecutor(max_workers=max([*a.concurrency, *a.bursts, a.stagger, 8]) + 8,
                                 thread_name_prefix="mini")
    starters = make_cases([c for c in a.cases.split(",") if c], root, threads)
    if not starters:
        print("no case is usable here", file=sys.stderr)
        return 1
    names = list(starters)
    sandbox_boxes.SETTLE = a.settle
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    try:
        res = asyncio.run(_run(starters, a))
    finally:
        threads.shutdown(wait=True)
        shutil.rmtree(root, ignore_errors=True)
    load1 = os.getloadavg()
    others = subprocess.run(["docker", "ps", "-q"], capture_output=True, text=True,
                            check=False).stdout.split()
    print(f"sandbox figures, one interleaved run: {os.cpu_count()} CPUs, load average {load0[0]:.1f} at the "
          f"start, {load1[0]:.1f} at the end ({len(others)} other containers running at the end); "
          f"{time.perf_counter() - t0:.0f} s")
    print("\n".join(report(res, names, a.baseline)))
    print("\n".join(goals(res, names, a.baseline)))
    if a.json:
        res["meta"] = {"cases": names, "baseline": a.baseline, "cpus": os.cpu_count(),
                       "load": [load0[0], load1[0]],
                       "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(a).items()}}
        a.json.write_text(json.dumps(res, indent=1))
    return 0


async def _run(starters: dict[str, Starter], a: argparse.Namespace) -> dict[str, Any]:
    try:
        await open_pools(size=a.pool_size)
        return await measure(starters, a)
    finally:
        await close_pools()
        await settle()


if __name__ == "__main__":
    raise SystemExit(main())
