"""The boxes the sandbox figures start (``perf/sandbox_figures.py``): fte-shell's, through the API a trainer
uses, and its peers', each as a trainer of that library would drive it. A case is an async starter of a
ready :class:`Box` (``run(cmd) -> output``, ``close()``)."""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from sandbox_latency import cases as provider_cases

IMAGE = "fte-shell-sandbox:latest"
"""One image for every case: the image is not a variable."""
QUIET = logging.getLogger("fte-figures.mini")
"""mini-swe-agent's logger otherwise prints every container it starts."""
QUIET.setLevel(logging.WARNING)
CASES = ("docker", "podman", "bwrap", "pool-docker", "pool-bwrap", "verifiers-docker", "mini-swe-agent")
"""Every case, in the order of the columns."""
PEER_NAMES = ("minisweagent-", "vf-")
"""Name prefixes of the peers' containers (waited for between phases)."""
SETTLE = True
"""Wait for the peers' containers to go between phases (``--no-settle``)."""




class Box(Protocol):
    async def run(self, cmd: str) -> str: ...

    async def close(self) -> None: ...


Starter = Callable[[], Awaitable[Box]]


# --- the cases ---------------------------------------------------------------------------------------------
class EpisodeBox:
    """fte-shell through its Episode (the shell profile's ``bash`` tool)."""

    def __init__(self, ep: Any):
        self.ep = ep

    async def run(self, cmd: str) -> str:
        res = await self.ep.acall("bash", {"command": cmd})
        if res.error:
            raise RuntimeError(res.output[:200])
        return str(res.output)

    async def close(self) -> None:
        try:
            await self.ep.afinish("done")
        finally:
            await self.ep.aclose()


class PoolBox:
    """fte-shell through ``fte_shell.rl.EpisodePool`` (reset → step → finish: graded, box closed); its
    defaults (8 warm boxes, paced starts, its own worker threads) but ``record=False``."""

    def __init__(self, ep: Any):
        self.ep = ep

    async def run(self, cmd: str) -> str:
        res = await self.ep.step("bash", {"command": cmd})
        if res.error:
            raise RuntimeError(res.output[:200])
        return str(res.output)

    async def close(self) -> None:
        await self.ep.finish("done")


class VerifiersBox:
    """verifiers' local DockerRuntime: every command a ``docker exec`` from an asyncio subprocess."""

    def __init__(self, rt: Any):
        self.rt = rt

    async def run(self, cmd: str) -> str:
        r = await self.rt.run(["bash", "-lc", cmd], {})
        if r.exit_code != 0:
            raise RuntimeError(f"exit {r.exit_code}: {r.stderr[:200]}")
        return str(r.stdout)

    async def close(self) -> None:
        await self.rt.stop()


class MiniBox:
    """mini-swe-agent's DockerEnvironment (synchronous; one thread per box, as its batch runner)."""

    def __init__(self, env: Any, pool: ThreadPoolExecutor):
        self.env, self.pool = env, pool

    async def run(self, cmd: str) -> str:
        out = await asyncio.get_running_loop().run_in_executor(self.pool, self.env.execute, {"command": cmd})
        if out["returncode"] != 0:
            raise RuntimeError(f"exit {out['returncode']}: {out['output'][:200]} {out['exception_info']}")
        return str(out["output"])

    async def close(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self.pool, self.env.cleanup)


def make_cases(wanted: list[str], root: Path, threads: ThreadPoolExecutor) -> dict[str, Starter]:
    """name -> an async starter of a ready box; a case that cannot run here is named on stderr."""
    from fte_shell import Episode, load_config

    out: dict[str, Starter] = {}
    own = {n.removeprefix("pool-") for n in wanted} & {"docker", "podman", "bwrap"}
    providers = dict(provider_cases(own))
    base = load_config(None, {"agent": {"profile": "shell"}, "search": {"backend": "none"}})
    for name in wanted:
        prov = name.removeprefix("pool-")
        if prov in providers:
            cfg = base.model_copy(update={"sandbox": providers[prov]})
            if name.startswith("pool-"):
                if importlib.util.find_spec("fte_shell.rl") is None:
                    print(f"{name}: not measured (no fte_shell.rl in this checkout)", file=sys.stderr)
                    continue
                out[name] = _pool_starter(cfg)
            else:
                async def start(cfg: Any = cfg) -> Box:
                    return EpisodeBox(await Episode.aopen(cfg, "figures", root / uuid.uuid4().hex[:12]))
                out[name] = start
        elif name == "verifiers-docker":
            out[name] = _verifiers_starter()
        elif name == "mini-swe-agent":
            from minisweagent.environments.docker import DockerEnvironment

            async def start_mini() -> Box:
                env = await asyncio.get_running_loop().run_in_executor(
                    threads, lambda: DockerEnvironment(image=IMAGE, logger=QUIET))
                return MiniBox(env, threads)
            out[name] = start_mini
        else:
            print(f"{name}: not measured (unknown case or provider unusable here)", file=sys.stderr)
    return out


def _verifiers_starter() -> Starter:
    from verifiers.v1.runtimes import DockerConfig, make_runtime

    async def start() -> Box:
        rt = make_runtime(DockerConfig(image=IMAGE))
        try:
            await rt.start()
        except BaseException:
            await rt.stop()
            raise
        return VerifiersBox(rt)
    return start


_POOLS: dict[str, Any] = {}
"""Each pool case's EpisodePool (opened, untimed, by :func:`open_pools`; closed by :func:`close_pools`)."""
_POOL_CONFIGS: dict[str, Any] = {}


def _pool_starter(cfg: Any) -> Starter:
    key = uuid.uuid4().hex
    _POOL_CONFIGS[key] = cfg

    async def start() -> Box:
        return PoolBox(await _POOLS[key].reset("figures", answer="done"))
    return start


async def open_pools(limit: float = 300.0, size: int | None = None) -> None:
    """Open the pool cases' EpisodePools (``size`` warm boxes; None: the pool's default) and wait for their
    warm boxes, as a trainer does once at start."""
    if not _POOL_CONFIGS:
        return
    from fte_shell.rl import EpisodePool  # type: ignore[import-not-found,unused-ignore]

    for key, cfg in _POOL_CONFIGS.items():
        _POOLS[key] = await EpisodePool(cfg, size, record=False).__aenter__()
    deadline = time.monotonic() + limit
    while any(p.ready < p.settings.size for p in _POOLS.values()) and time.monotonic() < deadline:
        await asyncio.sleep(0.2)


async def settle(limit: float = 60.0) -> None:
    """Wait (untimed) until the peers' containers are gone (mini-swe-agent stops its own in the
    background)."""
    if not SETTLE:
        return
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        args = ["docker", "ps", "-aq", *(a for p in PEER_NAMES for a in ("--filter", f"name=^{p}"))]
        proc = await asyncio.create_subprocess_exec(*args, stdout=asyncio.subprocess.PIPE,
                                                    stderr=asyncio.subprocess.DEVNULL)
        out, _ = await proc.communicate()
        if not out.strip():
            return
        await asyncio.sleep(0.5)


async def close_pools() -> None:
    """Close the EpisodePools the pool cases opened (saying, on stderr, how many of their episodes ran in
    a box given back and reset: ``PoolConfig.reuse_boxes``)."""
    for key in list(_POOLS):
        pool = _POOLS.pop(key)
        boxes = pool._boxes
        if boxes is not None:
            print(f"{_POOL_CONFIGS[key].sandbox.provider} pool: {boxes.reused} episodes in a reused box "
                  f"(reuse_boxes={pool.settings.reuse_boxes})", file=sys.stderr)
        await pool.__aexit__(None, None, None)
