"""What MCP adds to a tool call, and how fast HTTP opens workspaces: ONE interleaved run, with ratios.

    python3 perf/mcp_overhead.py [--iterations 200] [--opens 4] [--provider docker]

Arms of the per-call measure, run in turn every iteration (load hits them alike), each timing the same
command (``true``) in a box of its own:

* ``sandbox``: ``Sandbox.run("true")`` — the baseline;
* ``episode``: ``Episode.call("bash", {"command": "true"})`` in process (the profile, the trajectory record);
* ``stdio``: ``tools/call bash`` through the SDK's client to ``fte-shell mcp`` over a stdio subprocess;
* ``http``: the same to ``fte-shell mcp --transport http`` (one open workspace, its handle);
* ``floor-stdio``, ``floor-http``: the SDK's own floor — ``tools/call bash`` to a minimal server of the
  same SDK and settings answering a constant (``perf/mcp_floor.py``: no box, no profile, no token check).

Reported: median and p95 per arm, and the median added over ``sandbox`` (goal: ≤ 2 ms on stdio); then,
per transport, what fte-shell adds beyond its floor: (arm − ``sandbox``) − floor (goal: ≤ 0.5 ms). Then
workspaces opened per second over HTTP, ``cold`` (a server with ``--warm 0``: each opens a fresh box)
against ``warm`` (``--warm OPENS``: boxes started ahead), in turn for ``--rounds`` rounds: ``--opens``
``open_workspace`` calls at once, timed to the last handle, closed after; the warm server is given time to
refill (its boxes counted by their owner label) before its round. The figures depend on the machine and
its load (note it when it is shared).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared._httpx_utils import create_mcp_http_client  # noqa: E402

from fte_shell import Episode, load_config  # noqa: E402
from fte_shell.sandbox import Sandbox  # noqa: E402

CMD = {"command": "true"}


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


def start_http(args: list[str], env: dict[str, str]) -> tuple[subprocess.Popen[str], str, str]:
    proc = subprocess.Popen([sys.executable, "-m", "fte_shell", "mcp", "--transport", "http", "--port", "0", *args],
                            stderr=subprocess.PIPE, text=True, env=env)
    url = token = ""
    assert proc.stderr is not None
    for line in proc.stderr:
        if m := re.search(r"Streamable HTTP at (http://\S+)", line):
            url = m.group(1)
        if m := re.match(r"token: (\S+)", line):
            token = m.group(1)
            break
    return proc, url, token


async def measure(ns: argparse.Namespace, out: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    common = ["--search", "none", "--sandbox-provider", ns.provider]
    cfg = load_config(None, {"search": {"backend": "none"}, "sandbox": {"provider": ns.provider}}, environ={})
    times: dict[str, list[float]] = {k: [] for k in ("sandbox", "episode", "stdio", "http", "floor-stdio",
                                                     "floor-http")}
    proc, url, token = start_http([*common, "--out", str(out / "http"), "--max-workspaces", "2", "--warm", "0"], env)
    floor_proc, floor_url = start_floor(env)
    try:
        stdio = StdioServerParameters(command=sys.executable, args=["-m", "fte_shell", "mcp", *common, "--out",
                                                                     str(out / "stdio")], env=env)
        floor_stdio = StdioServerParameters(command=sys.executable, args=[str(FLOOR), "stdio"], env=env)
        http = streamable_http_client(url, http_client=create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}))
        floor_http = streamable_http_client(floor_url, http_client=create_mcp_http_client())
        with Sandbox(cfg.sandbox) as sb, Episode.open(cfg, "perf", out / "episode") as ep:
            async with Client(stdio_client(stdio)) as cs, Client(http) as ch, \
                    Client(stdio_client(floor_stdio)) as fs, Client(floor_http) as fh:
                handle = (await ch.call_tool("open_workspace", {})).structured_content["handle"]
                arms = {
                    "sandbox": lambda: anyio.to_thread.run_sync(sb.run, "true"),
                    "episode": lambda: anyio.to_thread.run_sync(ep.call, "bash", CMD),
                    "stdio": lambda: cs.call_tool("bash", CMD),
                    "http": lambda: ch.call_tool("bash", {"handle": handle, **CMD}),
                    "floor-stdio": lambda: fs.call_tool("bash", CMD),
                    "floor-http": lambda: fh.call_tool("bash", {"handle": "h", **CMD}),
                }
                for arm in arms.values():  # warm up
                    await arm()
                for _ in range(ns.iterations):
                    for name, arm in arms.items():
                        t = time.perf_counter()
                        await arm()
                        times[name].append(time.perf_counter() - t)
                await ch.call_tool("close_workspace", {"handle": handle})
    finally:
        for p in (proc, floor_proc):
            p.terminate()
            p.wait(timeout=60)
    return {"times": times, "open": await measure_opens(ns, out, env, common)}


FLOOR = REPO / "perf" / "mcp_floor.py"


def start_floor(env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    """The SDK's floor server over HTTP (perf/mcp_floor.py) and its URL."""
    proc = subprocess.Popen([sys.executable, str(FLOOR), "http"], stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stderr is not None
    for line in proc.stderr:
        if m := re.search(r"floor at (http://\S+)", line):
            return proc, m.group(1)
    raise RuntimeError(f"{FLOOR} did not start")


def owned_by(pid: int) -> int:
    out = subprocess.run(["docker", "ps", "-q", "--filter", f"label=fte-shell.owner-pid={pid}"],
                         capture_output=True, text=True, timeout=60).stdout
    return len(out.split())


async def open_burst(url: str, token: str, n: int) -> float:
    """``n`` open_workspace calls at once: seconds to the last handle (all closed after)."""
    http = streamable_http_client(url, http_client=create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}))
    opened: list[str] = []
    async with Client(http) as c:
        async def open_one() -> None:
            opened.append((await c.call_tool("open_workspace", {})).structured_content["handle"])

        t = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(n):
                tg.start_soon(open_one)
        took = time.perf_counter() - t
        for h in opened:
            await c.call_tool("close_workspace", {"handle": h})
    return took


async def measure_opens(ns: argparse.Namespace, out: Path, env: dict[str, str], common: list[str]) -> dict[str, list[float]]:
    """Workspaces opened per second, cold and warm servers in turn (module docstring)."""
    servers = {arm: start_http([*common, "--out", str(out / arm), "--max-workspaces", str(ns.opens),
                                "--warm", "0" if arm == "cold" else str(ns.opens)], env) for arm in ("cold", "warm")}
    rates: dict[str, list[float]] = {arm: [] for arm in servers}
    try:
        for _ in range(ns.rounds):
            for arm, (proc, url, token) in servers.items():
                deadline = time.monotonic() + 120
                while arm == "warm" and ns.provider == "docker" and owned_by(proc.pid) < ns.opens and time.monotonic() < deadline:
                    await anyio.sleep(0.2)
                rates[arm].append(ns.opens / await open_burst(url, token, ns.opens))
    finally:
        for proc, _, _ in servers.values():
            proc.terminate()
            proc.wait(timeout=60)
    return rates


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--opens", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--provider", default="docker")
    ns = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="fte-mcp-perf-") as tmp:
        got = anyio.run(measure, ns, Path(tmp))
    times = got["times"]
    base = statistics.median(times["sandbox"])
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; {ns.iterations} interleaved iterations, "
          f"provider {ns.provider}")
    print(f"{'arm':8} {'median ms':>10} {'p95 ms':>8} {'added ms':>9} {'ratio':>6}")
    for name, xs in times.items():
        med = statistics.median(xs)
        print(f"{name:8} {med * 1e3:10.2f} {pct(xs, 0.95) * 1e3:8.2f} {(med - base) * 1e3:9.2f} {med / base:6.2f}")
    added = (statistics.median(times["stdio"]) - base) * 1e3
    print(f"stdio adds {added:.2f} ms per call (goal <= 2 ms): {'met' if added <= 2 else 'NOT met'}")
    for transport in ("stdio", "http"):
        floor = statistics.median(times[f"floor-{transport}"]) * 1e3
        over = (statistics.median(times[transport]) - base) * 1e3 - floor
        print(f"{transport}: the SDK's floor {floor:.2f} ms; fte-shell adds {over:.2f} ms beyond it "
              f"(goal <= 0.5 ms): {'met' if over <= 0.5 else 'NOT met'}")
    rates = got["open"]
    cold, warm = statistics.median(rates["cold"]), statistics.median(rates["warm"])
    print(f"HTTP open_workspace, {ns.opens} at once, {ns.rounds} rounds in turn: cold {cold:.2f} workspaces/s, "
          f"warm {warm:.2f} workspaces/s (median), warm/cold {warm / cold:.1f}x")

if __name__ == "__main__":
    main()
