"""Sandbox latency and memory, every provider available here in ONE interleaved run, with ratios.

    python3 perf/sandbox_latency.py [--iterations 30] [--starts 8] [--alive 32] [--providers docker,bwrap]

Cases: ``docker`` (runc), ``docker-runsc`` (gVisor: docker with ``[sandbox] runtime = "runsc"``, when
the config has that field and dockerd has the runtime registered), ``podman`` (when that provider
exists and works) and ``bwrap``; and the baseline, a raw ``pexpect`` bash on the host (no sandbox: what a
harness that runs commands in a local shell pays). Each iteration runs every measure in every case in
turn (load hits them alike):

* trivial command (``echo hi``) through the session;
* ``rg -i -c`` over 10 MB in /work (50 files of 200 KB; the raw bash reads the same host directory);
* 1 MB of output (``head -c 1000000 … | fold``), uncapped (``output_cap_bytes`` 2 MB: all of it comes back);
* start to first command (``Sandbox()`` + ``run("true")``; removal not counted), ``--starts`` times;
* host memory per live sandbox with ``--alive`` sandboxes of the case alive: the PSS (proportional set
  size: a page shared by N processes counts 1/N) of every host process that exists for the box — its
  PID 1 (the warden; for gVisor the runsc sandbox), the processes of its pids cgroup (shell, gofer, …),
  PID 1's parent (containerd-shim, conmon, the outer bwrap), the host process of the session's shell
  when there is one (podman's ``exec -it`` client; bwrap's nsenter). Docker's daemons are not counted (a plain ``sleep`` container, measured in the
  same run, is the baseline: the docker-exec harnesses' box). Read from /proc (root).

Goals (issue 18): bwrap start -> first command <= 50 ms and <= 3 MiB per live sandbox; no provider's
trivial command over 2 ms; Docker's rg <= 1.1x the raw pexpect bash, 1 MB <= 1x (a plain read), memory
<= 1.1x a plain sleep container. Medians (p95 beside them). The figures depend on the machine and its
load (note it when it is shared).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import random
import secrets
import shutil
import statistics
import string
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pexpect

from fte_shell import Sandbox, SandboxConfig
from fte_shell.sandbox import base as sandbox_base
from fte_shell.sandbox import get_provider

MIB = 1024.0
"""KiB per MiB (smaps reports KiB)."""
TRIVIAL = "echo hi"
RG = "rg -i -c needle ."
MB = "head -c 1000000 /dev/zero | tr '\\0' x | fold -w 99"


def pct(xs: list[float], q: float) -> float:
    """The ``q`` quantile of ``xs`` (the nearest rank of the sorted values; NaN when empty)."""
    s = sorted(xs)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))] if s else float("nan")


def med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


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


def timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


# --- the cases -------------------------------------------------------------------------------------------
def cases(wanted: set[str] | None) -> list[tuple[str, SandboxConfig]]:
    """(name, config) of every provider case usable here (a missing one is named on stderr)."""
    fields = SandboxConfig.model_fields
    base = {"output_cap_bytes": 2_000_000, "command_timeout_s": 120}
    out: list[tuple[str, SandboxConfig]] = []
    todo = [("docker", {"provider": "docker"})]
    if "runtime" in fields:
        todo.append(("docker-runsc", {"provider": "docker", "runtime": "runsc"}))
    else:
        print("docker-runsc: this checkout has no [sandbox] runtime (gVisor) yet", file=sys.stderr)
    todo += [(p, {"provider": p}) for p in ("podman", "bwrap") if p in sandbox_base.PROVIDERS]
    for name, kw in todo:
        if wanted and name not in wanted:
            continue
        cfg = SandboxConfig(**base, **kw)
        why = get_provider(cfg.provider).probe(30.0)
        if why is None and name == "docker-runsc":
            import docker

            if "runsc" not in (docker.from_env(timeout=60).info().get("Runtimes") or {}):
                why = "runsc is not registered with dockerd (bash sandbox/setup-host.sh --runtime runsc)"
        if why is None:
            try:
                get_provider(cfg.provider).prepare(cfg)
            except Exception as e:  # noqa: BLE001 - skip the case, say why
                why = str(e)
        if why:
            print(f"{name}: not measured ({why})", file=sys.stderr)
            continue
        out.append((name, cfg))
    return out


class RawBash:
    """The baseline: a plain bash under pexpect on the host, a marker after each command."""

    def __init__(self, cwd: Path):
        self.child = pexpect.spawn("bash", ["--norc", "--noprofile"], cwd=str(cwd), echo=False,
                                   encoding=None, maxread=1 << 20, env={"PATH": os.environ["PATH"], "PS1": ""})
        self.child.delaybeforesend = None
        self.run("stty -echo")

    def run(self, cmd: str) -> bytes:
        mark = secrets.token_hex(6)
        self.child.send(f"{cmd}; echo __END_{mark}\n".encode())
        self.child.expect(f"__END_{mark}".encode(), timeout=60)
        return self.child.before

    def close(self) -> None:
        self.child.close(force=True)


# --- host memory ---------------------------------------------------------------------------------------
def _pss_kib(pid: int | str) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _ppid(pid: int) -> int:
    try:
        data = Path(f"/proc/{pid}/stat").read_text()
        return int(data[data.rfind(")") + 2 :].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def _pids_cgroup_procs(pid: int) -> list[int]:
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        _, ctl, path = line.split(":", 2)
        for base in ([f"/sys/fs/cgroup/pids{path}"] if "pids" in ctl.split(",") else []) + (
                [f"/sys/fs/cgroup{path}"] if ctl == "" and Path("/sys/fs/cgroup/cgroup.controllers").exists() else []):
            with contextlib.suppress(OSError, ValueError):
                return [int(p) for p in Path(base, "cgroup.procs").read_text().split()]
    return []


def pid1_of(sb: Sandbox) -> int:
    """The host pid of the box's main process."""
    box = sb.box
    if sb.config.provider == "bwrap":
        return box.warden_pid  # type: ignore[attr-defined]
    if sb.config.provider == "docker":
        from fte_shell.sandbox.providers.docker.api import client

        return int(client().api.inspect_container(box.id)["State"]["Pid"])
    podman = shutil.which("podman") or "podman"
    out = subprocess.run([podman, "inspect", "-f", "{{.State.Pid}}", box.id], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    return int(out.strip())


def box_processes(sb: Sandbox) -> set[int]:
    pid1 = pid1_of(sb)
    procs = {pid1, _ppid(pid1), *_pids_cgroup_procs(pid1)}
    for p in getattr(sb.box, "shells", []):  # bwrap: the host side of each entered shell
        procs.add(p.pid)
    child = getattr(sb._session, "_child", None)  # a client process per session (podman exec -it)
    if isinstance(getattr(child, "pid", None), int):
        procs.add(child.pid)
    procs.discard(0)
    procs.discard(1)
    return procs


def memory_per_box(boxes: list[Sandbox]) -> float:
    return sum(_pss_kib(p) for sb in boxes for p in box_processes(sb)) / max(1, len(boxes)) / MIB


def plain_containers(cfg: SandboxConfig, n: int) -> float:
    """MiB per plain ``docker run … sleep infinity`` container (shim + its processes), n alive."""
    from fte_shell.sandbox.providers.docker.api import client

    c = client()
    conts = [c.containers.run(cfg.image, ["sleep", "infinity"], detach=True, network_mode="none",
                              user=cfg.user, auto_remove=True) for _ in range(n)]
    try:
        time.sleep(2)
        total = 0
        for cont in conts:
            pid1 = int(c.api.inspect_container(cont.id)["State"]["Pid"])
            total += sum(_pss_kib(p) for p in {pid1, _ppid(pid1), *_pids_cgroup_procs(pid1)} - {0, 1})
        return total / n / MIB
    finally:
        for cont in conts:
            with contextlib.suppress(Exception):
                cont.remove(force=True)


# --- the run -------------------------------------------------------------------------------------------
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--starts", type=int, default=8)
    ap.add_argument("--alive", type=int, default=32, help="live sandboxes per case for the memory figure (0 = skip)")
    ap.add_argument("--providers", default="", help="comma-separated case names (default: all available)")
    args = ap.parse_args()
    todo = cases({s for s in args.providers.split(",") if s} or None)
    if not todo:
        print("no sandbox provider is usable here", file=sys.stderr)
        return 1
    names = [n for n, _ in todo]
    res: dict[str, dict[str, list[float]]] = {n: {k: [] for k in ("trivial", "rg", "mb", "start")} for n in
                                              [*names, "raw bash"]}
    boxes = {n: Sandbox(cfg) for n, cfg in todo}
    try:
        corpus = Path(next(iter(boxes.values())).workspace)
        make_corpus(corpus)
        for n, sb in boxes.items():
            if Path(sb.workspace) != corpus:
                for f in corpus.iterdir():
                    shutil.copy(f, sb.workspace)
        raw = RawBash(corpus)
        want = raw.run(RG).replace(b"\r\n", b"\n").decode().strip().splitlines()
        for n, sb in boxes.items():  # the same answer everywhere
            got = sb.run(f"cd /work && {RG}").output.strip().splitlines()
            assert sorted(got) == sorted(want), (n, got[:3], want[:3])
            assert len(sb.run(MB).output) == 1_000_000 + 1_000_000 // 99, n
            for _ in range(3):
                sb.run(TRIVIAL)
        for i in range(args.iterations):
            for n, sb in boxes.items():
                res[n]["trivial"].append(timed(lambda sb=sb: sb.run(TRIVIAL)))
                res[n]["rg"].append(timed(lambda sb=sb: sb.run(RG)))
                res[n]["mb"].append(timed(lambda sb=sb: sb.run(MB)))
            res["raw bash"]["trivial"].append(timed(lambda: raw.run(TRIVIAL)))
            res["raw bash"]["rg"].append(timed(lambda: raw.run(RG)))
            res["raw bash"]["mb"].append(timed(lambda: raw.run(MB)))
            if i < args.starts:
                for n, cfg in todo:
                    t = time.perf_counter()
                    s2 = Sandbox(cfg)
                    s2.run("true")
                    res[n]["start"].append(time.perf_counter() - t)
                    s2.close()
                t = time.perf_counter()
                r2 = RawBash(corpus)
                res["raw bash"]["start"].append(time.perf_counter() - t)
                r2.close()
        raw.close()
    finally:
        for sb in boxes.values():
            sb.close()

    memory: dict[str, float] = {}
    plain = float("nan")
    if args.alive:
        for n, cfg in todo:
            alive: list[Sandbox] = []
            try:
                for _ in range(args.alive):
                    alive.append(Sandbox(cfg))
                for sb in alive:
                    sb.run("true")
                time.sleep(2)
                memory[n] = memory_per_box(alive)
            finally:
                for sb in alive:
                    sb.close()
        if "docker" in names:
            plain = plain_containers(todo[names.index("docker")][1], args.alive)

    cols = [*names, "raw bash"]
    print(f"sandbox providers, one interleaved run ({os.cpu_count()} CPUs, possibly shared; "
          f"{args.iterations} iterations, {args.starts} starts, {args.alive} alive)")
    print("medians in ms (p95)           " + "".join(f"{c:>20}" for c in cols))
    for key, label in (("trivial", "trivial command"), ("rg", "rg -i over 10 MB"), ("mb", "1 MB output, uncapped"),
                       ("start", "start -> first command")):
        cells = "".join(f"{med(res[c][key]) * 1000:11.2f} ({pct(res[c][key], 0.95) * 1000:6.1f})" if res[c][key] else
                        f"{'-':>20}" for c in cols)
        print(f"  {label:28}{cells}")
    if memory:
        print(f"  {'MiB per live sandbox':28}" + "".join(f"{memory[c]:20.2f}" if c in memory else f"{'-':>20}" for c in cols))
        if not math.isnan(plain):
            print(f"  {'(plain sleep container)':28}{plain:20.2f}")
    for base in ("docker", "raw bash"):
        if base not in res or not res[base]["trivial"]:
            continue
        print(f"ratio to {base}")
        for key, label in (("trivial", "trivial"), ("rg", "rg"), ("mb", "1 MB"), ("start", "start")):
            b = med(res[base][key])
            print(f"  {label:28}" + "".join(f"{med(res[c][key]) / b:19.2f}x" for c in names))
        if base == "docker" and "docker" in memory:
            print(f"  {'memory':28}" + "".join(f"{memory.get(c, float('nan')) / memory['docker']:19.2f}x" for c in names))
    if "docker" in memory and not math.isnan(plain):
        print(f"docker memory / plain sleep container: {memory['docker'] / plain:.2f}x (goal <= 1.1x)")
    if "bwrap" in memory:
        print(f"bwrap: start {med(res['bwrap']['start']) * 1000:.1f} ms (goal <= 50), "
              f"{memory['bwrap']:.2f} MiB per sandbox (goal <= 3)")
    worst = max(names, key=lambda c: med(res[c]["trivial"]))
    print(f"slowest trivial command: {worst} {med(res[worst]['trivial']) * 1000:.2f} ms (goal <= 2 ms for every provider)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
