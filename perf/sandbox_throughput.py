"""Commands per second under threads and the cost of a large output, every provider against a raw pty
and SWE-ReX, in ONE interleaved run with ratios.

    python3 perf/sandbox_throughput.py [--threads 8] [--boxes 8] [--commands 150] [--rounds 5]
                                       [--mb-reps 3] [--providers docker,podman,bwrap] [--only-mb]
                                       [--swerex-python /work/venv-swerex/bin/python]

SWE-ReX (``swe-rex`` on PyPI, plus ``aiohttp``, which its ``RemoteRuntime`` imports without declaring
it) goes in a venv of its own: ``python3 -m venv V && V/bin/pip install swe-rex aiohttp``; its side runs
in ``perf/swerex_client.py`` under ``--swerex-python V/bin/python`` (or ``$FTE_SWEREX_PYTHON``).

Cases: ``docker``, ``podman``, ``bwrap`` (a :class:`fte_shell.Sandbox` per box) and the baselines:
``raw pty`` (a plain bash under pexpect on the host, a marker after each command: what a harness that
runs commands in a local shell pays) and, for the large output, SWE-ReX's ``execute`` (its
``swerex-remote`` server on 127.0.0.1, driven by its ``RemoteRuntime`` in a client process that times
each call: a subprocess per command, the whole output in one JSON answer).

Each round runs every measure in every case, in an order that rotates from round to round (load hits
them alike):

* **throughput**: ``--threads`` threads drive ``--boxes`` boxes (thread i takes boxes i, i+threads, …,
  in turn), each thread ``--commands`` trivial commands (``echo hi``; every answer checked); commands/s
  = all commands / wall time from a common start until the last thread ends;
* **1 MB output** (``head -c 1000000 … | fold``, uncapped: ``output_cap_bytes`` 2 MB), ``--mb-reps``
  times through one box of the case, and through SWE-ReX's ``execute``, one of each case in turn per
  rep (``--only-mb``: this alone, one box per case).

Where the time goes: the CPU seconds spent during each case's throughput bursts, per 1,000 commands:
this Python process (``os.times``), the case's own host processes (``/proc/<pid>/stat`` utime+stime
with waited-for children: the boxes' shells and wardens, containerd-shim or conmon, podman's exec
client; the raw shells) and the Docker daemons (dockerd, containerd: host-wide, so whatever else uses
them counts too). Unlike commands/s these barely depend on the host's load.

Goals (issue 27 item 3): every provider's commands/s within 1.1x of the raw pty's (ratio raw/case <= 1.1);
its 1 MB output at or below SWE-ReX ``execute``. The ratios are the medians of each round's ratio
(numerator and denominator measured in the same round). The figures depend on the machine and its
load (note it when it is shared).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sandbox_latency import MB, RawBash, box_processes, med, pct  # noqa: E402 - the same baseline, command, processes

from fte_shell import Sandbox, SandboxConfig  # noqa: E402
from fte_shell.sandbox import base as sandbox_base  # noqa: E402
from fte_shell.sandbox import get_provider  # noqa: E402

TRIVIAL = "echo hi"
MB_LEN = 1_000_000 + 1_000_000 // 99
"""Characters of the 1 MB output (x and newlines)."""
RAW = "raw pty"
REX = "SWE-ReX execute"
PY = "python (this process)"
DAEMONS = ("dockerd", "containerd")
"""Host-wide daemons whose CPU time is counted (shared: other users of the daemon count too)."""


def p95(xs: list[float]) -> float:
    return pct(xs, 0.95)


def cases(wanted: set[str] | None) -> list[tuple[str, SandboxConfig]]:
    """(name, config) of every provider usable here (a missing one is named on stderr)."""
    out = []
    for p in ("docker", "podman", "bwrap"):
        if p not in sandbox_base.PROVIDERS or (wanted and p not in wanted):
            continue
        cfg = SandboxConfig(provider=p, output_cap_bytes=2_000_000, command_timeout_s=120)
        why = get_provider(p).probe(30.0)
        if why is None:
            try:
                get_provider(p).prepare(cfg)
            except Exception as e:  # noqa: BLE001 - skip the case, say why
                why = str(e)
        if why:
            print(f"{p}: not measured ({why})", file=sys.stderr)
            continue
        out.append((p, cfg))
    return out


# --- CPU per process group ------------------------------------------------------------------------------
def _cpu_s(pid: int | str, children: bool = True) -> float:
    """CPU seconds of a process (with its waited-for children when ``children``); 0 when it is gone."""
    try:
        data = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    f = data[data.rfind(")") + 2 :].split()
    return sum(int(x) for x in f[11 : 15 if children else 13]) / os.sysconf("SC_CLK_TCK")


def cpu_snapshot(own: set[int]) -> dict[str, float]:
    """CPU seconds so far: this process, the case's own host processes (``own``: the boxes' shells,
    wardens, shims or conmons, exec clients; the raw shells), and the Docker daemons (host-wide)."""
    t = os.times()
    out = {PY: t.user + t.system, "the case's own processes": sum(_cpu_s(p) for p in own),
           "dockerd + containerd (host-wide)": 0.0}
    for d in os.listdir("/proc"):
        if d.isdigit():
            with contextlib.suppress(OSError):
                if Path(f"/proc/{d}/comm").read_text().strip() in DAEMONS:
                    out["dockerd + containerd (host-wide)"] += _cpu_s(d, children=False)
    return out


# --- the measures ---------------------------------------------------------------------------------------
def burst(runners: list[Callable[[str], str]], threads: int, commands: int) -> float:
    """commands/s of ``threads`` threads, thread i running ``commands`` trivial commands on runners i,
    i+threads, … in turn; every answer must be ``hi``."""
    start = threading.Barrier(threads + 1)
    errors: list[BaseException] = []

    def work(i: int) -> None:
        mine = runners[i::threads]
        start.wait()
        try:
            for k in range(commands):
                out = mine[k % len(mine)](TRIVIAL)
                if out.strip() != "hi":
                    raise AssertionError(f"unexpected answer {out[:80]!r}")
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in ts:
        t.join()
    wall = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return threads * commands / wall


class SweRex:
    """SWE-ReX's ``execute``: ``perf/swerex_client.py`` run by ``python`` (one with ``swe-rex``), which
    starts ``swerex-remote`` on 127.0.0.1 and times each ``execute`` itself."""

    def __init__(self, python: str, cwd: Path):
        client = Path(__file__).resolve().parent / "swerex_client.py"
        self.proc = subprocess.Popen([python, str(client), str(cwd)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        hello = self.proc.stdout.readline() if self.proc.stdout else ""
        if not hello:
            raise RuntimeError(f"{python} {client} did not start swerex-remote (is swe-rex installed for it?)")
        self.server_pid = int(json.loads(hello)["server_pid"])

    def times(self, cmd: str, reps: int) -> tuple[list[float], dict[str, int]]:
        """Seconds of each of ``reps`` runs of ``cmd``, and the last output's length and counts."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{reps} {json.dumps(cmd)}\n")
        self.proc.stdin.flush()
        answer = json.loads(self.proc.stdout.readline())
        return answer.pop("s"), answer

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def raw_run(raw: RawBash) -> Callable[[str], str]:
    return lambda cmd: raw.run(cmd).decode("utf-8", "replace")


def sandbox_run(sb: Sandbox) -> Callable[[str], str]:
    return lambda cmd: sb.run(cmd).output


# --- the run --------------------------------------------------------------------------------------------
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--boxes", type=int, default=8, help="boxes (or raw shells) per case")
    ap.add_argument("--commands", type=int, default=150, help="trivial commands per thread per round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--mb-reps", type=int, default=3, help="1 MB outputs per case per round")
    ap.add_argument("--providers", default="", help="comma-separated providers (default: every usable one)")
    ap.add_argument("--only-mb", action="store_true", help="only the 1 MB output (one box per case, no bursts)")
    ap.add_argument("--swerex-python", default=os.environ.get("FTE_SWEREX_PYTHON", sys.executable),
                    help="a Python with swe-rex installed (its own venv), which runs SWE-ReX's side "
                         "(default: $FTE_SWEREX_PYTHON, else this one)")
    args = ap.parse_args()
    if args.only_mb:
        args.boxes, args.commands = 1, 0
    todo = cases({s for s in args.providers.split(",") if s} or None)
    names = [n for n, _ in todo]
    cols = [*names, RAW]
    rate: dict[str, list[float]] = {c: [] for c in cols}
    mb: dict[str, list[float]] = {c: [] for c in [*cols, REX]}
    ratio_rate: dict[str, list[float]] = {c: [] for c in names}
    ratio_mb: dict[str, list[float]] = {c: [] for c in [*names, RAW]}
    cpu: dict[str, dict[str, float]] = {c: defaultdict(float) for c in cols}
    cpu_mb: dict[str, dict[str, float]] = {c: defaultdict(float) for c in [*cols, REX]}
    boxes: dict[str, list[Sandbox]] = {}
    raws: list[RawBash] = []
    rex: SweRex | None = None
    try:
        for n, cfg in todo:
            boxes[n] = [Sandbox(cfg) for _ in range(args.boxes)]
        cwd = Path(boxes[names[0]][0].workspace) if names else Path.cwd()
        raws = [RawBash(cwd) for _ in range(args.boxes)]
        rex = SweRex(args.swerex_python, cwd)
        runners = {n: [sandbox_run(sb) for sb in boxes[n]] for n in names} | {RAW: [raw_run(r) for r in raws]}
        own = {n: {p for sb in boxes[n] for p in box_processes(sb)} for n in names} | {
            RAW: {r.child.pid for r in raws}, REX: {rex.server_pid}}

        def mb_times(c: str, reps: int) -> tuple[list[float], float]:
            """Seconds of ``reps`` 1 MB outputs through case ``c``, each answer checked, and the CPU seconds
            of the Python side around the calls alone (this process; SWE-ReX: its client)."""
            if c == REX:
                assert rex is not None
                xs, got = rex.times(MB, reps)
                py, counts = got["cpu"], (got["x"], got["nl"], got["out"])
            else:
                xs, out, py = [], "", 0.0
                for _ in range(reps):
                    t, p = time.perf_counter(), time.process_time()
                    out = runners[c][0](MB)
                    xs.append(time.perf_counter() - t)
                    py += time.process_time() - p
                counts = (out.count("x"), out.count("\n"), len(out))
            assert counts[0] == 1_000_000 and counts[1] >= MB_LEN - 1_000_000, (c, counts)
            return xs, py

        for c in [*cols, REX]:  # the same answer everywhere; warm every runner
            mb_times(c, 1)
        if not args.only_mb:
            for c in cols:
                burst(runners[c], len(runners[c]), 3)
        for r in range(args.rounds):
            order = cols[r % len(cols):] + cols[: r % len(cols)]
            this_rate: dict[str, float] = {}
            this_mb: dict[str, float] = {}
            for c in order if not args.only_mb else []:
                before = cpu_snapshot(own[c])
                this_rate[c] = burst(runners[c], args.threads, args.commands)
                after = cpu_snapshot(own[c])
                for g in after:
                    cpu[c][g] += max(0.0, after[g] - before.get(g, 0.0))
                rate[c].append(this_rate[c])
            xs: dict[str, list[float]] = defaultdict(list)
            for _ in range(args.mb_reps):  # case by case within each rep: a burst of load hits them alike
                for c in [*order, REX]:
                    before = cpu_snapshot(own[c])
                    x, py = mb_times(c, 1)
                    xs[c] += x
                    after = {**cpu_snapshot(own[c]), PY: before[PY] + py}  # not the snapshots' own CPU
                    for g in after:
                        cpu_mb[c][g] += max(0.0, after[g] - before.get(g, 0.0))
            for c in xs:
                mb[c] += xs[c]
                this_mb[c] = statistics.median(xs[c])
            for c in names if not args.only_mb else []:
                ratio_rate[c].append(this_rate[RAW] / this_rate[c])
            for c in [*names, RAW]:
                ratio_mb[c].append(this_mb[c] / this_mb[REX])
            print(f"round {r + 1}/{args.rounds}: " + ", ".join(
                [f"{c} {this_rate[c]:.0f}/s" for c in this_rate] + [f"1 MB {c} {this_mb[c] * 1000:.1f} ms"
                                                                      for c in this_mb]), file=sys.stderr)
    finally:
        for bs in boxes.values():
            for sb in bs:
                with contextlib.suppress(Exception):
                    sb.close()
        for raw in raws:
            raw.close()
        if rex is not None:
            rex.close()
    report(args, names, cols, rate, mb, ratio_rate, ratio_mb, cpu, cpu_mb)
    return 0


def report(args: argparse.Namespace, names: list[str], cols: list[str], rate: dict[str, list[float]],
           mb: dict[str, list[float]], ratio_rate: dict[str, list[float]], ratio_mb: dict[str, list[float]],
           cpu: dict[str, dict[str, float]], cpu_mb: dict[str, dict[str, float]]) -> None:
    load = os.getloadavg()[0]
    bursts = not args.only_mb
    print(f"sandbox throughput, one interleaved run ({os.cpu_count()} CPUs, load {load:.1f} at the end; "
          f"{args.rounds} rounds, " + (f"{args.threads} threads x {args.boxes} boxes, {args.commands} commands "
                                       "per thread per round, " if bursts else "1 MB only, ")
          + f"{args.mb_reps} x 1 MB per round)")
    print(f"{'':34}" + "".join(f"{c:>18}" for c in [*cols, REX]))
    if bursts:
        print(f"  {'commands/s (median, min)':32}" + "".join(
            f"{med(rate[c]):>10.0f} ({min(rate[c]):5.0f})" for c in cols) + f"{'-':>18}")
    print(f"  {'1 MB output ms (median, p95)':32}" + "".join(
        f"{med(mb[c]) * 1000:>10.1f} ({p95(mb[c]) * 1000:5.1f})" for c in [*cols, REX]))
    print("ratios (medians of each round's ratio; the rounds' range)")
    if bursts:
        print(f"  {'raw pty commands/s / case':32}" + "".join(f"{med(ratio_rate[c]):>17.2f}x" for c in names)
              + "   (goal <= 1.10x)")
    print(f"  {'1 MB: case / SWE-ReX execute':32}" + "".join(f"{med(ratio_mb[c]):>17.2f}x" for c in [*names, RAW])
          + "   (goal <= 1.00x)")
    print(f"  {'':32}" + "".join(f"{min(ratio_mb[c]):>11.2f}-{max(ratio_mb[c]):.2f}x" for c in [*names, RAW]))
    groups = [PY, "the case's own processes", "dockerd + containerd (host-wide)"]
    if bursts:
        print("CPU ms per 1,000 commands during the bursts")
        print(f"{'':34}" + "".join(f"{c:>18}" for c in cols))
        total_cmds = args.rounds * args.threads * args.commands / 1000
        for g in groups:
            print(f"  {g:32}" + "".join(f"{cpu[c].get(g, 0.0) * 1000 / total_cmds:>18.0f}" for c in cols))
        print(f"  {'total':32}" + "".join(f"{sum(cpu[c].values()) * 1000 / total_cmds:>18.0f}" for c in cols))
    mbs = args.rounds * args.mb_reps
    print(f"CPU ms per 1 MB output ({REX}: its client's Python in the first row, swerex-remote in the second)")
    print(f"{'':34}" + "".join(f"{c:>18}" for c in [*cols, REX]))
    for g in [*groups, "total"]:
        print(f"  {g:32}" + "".join(f"{(sum(cpu_mb[c].values()) if g == 'total' else cpu_mb[c].get(g, 0.0)) * 1000 / mbs:>18.1f}"
                                    for c in [*cols, REX]))
    bad = [c for c in names if bursts and med(ratio_rate[c]) > 1.1] + [c for c in names if med(ratio_mb[c]) > 1.0]
    print("goals met" if not bad else f"goals missed by: {', '.join(sorted(set(bad)))}")

if __name__ == "__main__":
    raise SystemExit(main())
