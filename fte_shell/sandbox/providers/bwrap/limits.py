"""What limits a bwrap box: a cgroup of its own where this user may make one, else rlimits.

bwrap sets no limits itself. With a cgroup — made by root under each controller's root, or under a
cgroup the admin delegated to the user (``[sandbox.bwrap] cgroup_parent``: a directory the user owns, in
every controller hierarchy of cgroup v1 or in the cgroup v2 tree) — memory, pids and CPU hold for the
whole box as with Docker, and the warden's fork-bomb breaker reads the box's ``pids.current``. Else
rlimits, set on the box's first processes (the warden, each shell; all else inherits them): pids by ``RLIMIT_NPROC`` (counted
per user namespace since Linux 5.14, so per box: each box has its own), memory by ``RLIMIT_AS`` (address
space *per process*, not the box's total), CPU not at all. :attr:`BoxLimits.enforced` says which.
"""

from __future__ import annotations

import contextlib
import os
import resource
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from ....config import SandboxConfig
from ...output import size_bytes
from ...ownership import _proc_start

CGROUP_ROOT = Path("/sys/fs/cgroup")
V1_CONTROLLERS = ("pids", "memory", "cpu")
BOX_PREFIX = "fte-box-"
"""Name of a box's cgroup: ``fte-box-<owner pid>-<owner start>-<random>`` (gc's key)."""


def is_v2() -> bool:
    """A pure cgroup v2 host (``/sys/fs/cgroup`` is the unified tree)."""
    return (CGROUP_ROOT / "cgroup.controllers").exists()


def parent_dirs(cfg: SandboxConfig) -> dict[str, Path]:
    """Controller -> the directory boxes' cgroups go under (``cgroup_parent``, else ``fte-shell`` for
    root); empty when no cgroup can be made (a plain user without a delegated cgroup)."""
    rel = cfg.bwrap.cgroup_parent
    if rel is None:
        if os.geteuid() != 0:
            return {}
        rel = "fte-shell"
    rel = rel.strip("/")
    if is_v2():
        return {"v2": CGROUP_ROOT / rel}
    return {c: CGROUP_ROOT / c / rel for c in V1_CONTROLLERS if (CGROUP_ROOT / c).is_dir()}


def usable_parents(cfg: SandboxConfig) -> tuple[dict[str, Path], str]:
    """(controller -> parent directory this process may make cgroups in, why the others are not)."""
    out: dict[str, Path] = {}
    why = []
    for ctl, d in parent_dirs(cfg).items():
        with contextlib.suppress(OSError):
            if os.geteuid() == 0:
                d.mkdir(exist_ok=True)
        if d.is_dir() and os.access(d, os.W_OK | os.X_OK):
            out[ctl] = d
        else:
            why.append(f"{d} is missing or not writable")
    if not parent_dirs(cfg):
        why.append("no delegated cgroup (sandbox.bwrap.cgroup_parent) and not root")
    return out, "; ".join(why)


@dataclass
class BoxLimits:
    """The limits of one box: its cgroup directories (possibly none) and its rlimits."""

    cgroups: dict[str, Path] = field(default_factory=dict)
    rlimits: list[tuple[int, int]] = field(default_factory=list)
    """(resource, value) set as soft and hard limit on the box's first processes (all others inherit)."""
    enforced: dict[str, str] = field(default_factory=dict)
    """Limit -> how it is enforced (or ``not enforced: why``), said plainly."""

    @property
    def procs_files(self) -> list[Path]:
        return [d / "cgroup.procs" for d in self.cgroups.values()]

    @property
    def pids_dir(self) -> Path | None:
        """The cgroup directory with ``pids.current`` / ``pids.max`` (for the warden)."""
        d = self.cgroups.get("v2") or self.cgroups.get("pids")
        return d if d is not None and (d / "pids.max").exists() else None

    def remove(self) -> None:
        """Kill what is left in the box's cgroups and remove them (best effort)."""
        for d in self.cgroups.values():
            remove_cgroup(d)


def remove_cgroup(d: Path) -> None:
    for _ in range(50):
        try:
            d.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            with contextlib.suppress(OSError, ValueError):
                for pid in (d / "cgroup.procs").read_text().split():
                    with contextlib.suppress(OSError):
                        os.kill(int(pid), 9)
            import time

            time.sleep(0.01)


def _write(d: Path, name: str, value: str) -> bool:
    try:
        (d / name).write_text(value)
        return True
    except OSError:
        return False


def make(cfg: SandboxConfig) -> BoxLimits:
    """A box's cgroups with ``cfg``'s limits written (where possible), else rlimits."""
    lim = BoxLimits()
    parents, why = usable_parents(cfg)
    mem = size_bytes(cfg.memory)
    name = f"{BOX_PREFIX}{os.getpid()}-{_proc_start(os.getpid()) or 0}-{secrets.token_hex(4)}"
    for ctl, parent in parents.items():
        d = parent / name
        try:
            d.mkdir()
        except OSError:
            continue
        lim.cgroups[ctl] = d
    v2 = lim.cgroups.get("v2")
    if v2 is not None:
        with contextlib.suppress(OSError):
            (v2.parent / "cgroup.subtree_control").write_text("+pids +memory +cpu")
        if _write(v2, "pids.max", str(cfg.pids_limit)):
            lim.enforced["pids"] = f"cgroup v2 pids.max {cfg.pids_limit} (whole box)"
        if _write(v2, "memory.max", str(mem)):
            _write(v2, "memory.swap.max", "0")
            lim.enforced["memory"] = f"cgroup v2 memory.max {cfg.memory} (whole box, /tmp included)"
        if _write(v2, "cpu.max", f"{int(cfg.cpus * 100000)} 100000"):
            lim.enforced["cpus"] = f"cgroup v2 cpu.max {cfg.cpus:g} cores"
    else:
        if "pids" in lim.cgroups and _write(lim.cgroups["pids"], "pids.max", str(cfg.pids_limit)):
            lim.enforced["pids"] = f"cgroup v1 pids.max {cfg.pids_limit} (whole box)"
        m = lim.cgroups.get("memory")
        if m is not None and _write(m, "memory.limit_in_bytes", str(mem)):
            _write(m, "memory.memsw.limit_in_bytes", str(mem))
            lim.enforced["memory"] = f"cgroup v1 memory.limit_in_bytes {cfg.memory} (whole box, /tmp included)"
        c = lim.cgroups.get("cpu")
        if c is not None and _write(c, "cpu.cfs_period_us", "100000") and _write(
            c, "cpu.cfs_quota_us", str(int(cfg.cpus * 100000))
        ):
            lim.enforced["cpus"] = f"cgroup v1 cpu.cfs_quota_us {cfg.cpus:g} cores"
    lacking = f" ({why})" if why else ""
    if "pids" not in lim.enforced:
        lim.rlimits.append((resource.RLIMIT_NPROC, cfg.pids_limit))
        lim.enforced["pids"] = f"rlimit RLIMIT_NPROC {cfg.pids_limit} (per box: its own user namespace)"
    if "memory" not in lim.enforced:
        lim.rlimits.append((resource.RLIMIT_AS, mem))
        lim.enforced["memory"] = (f"rlimit RLIMIT_AS {cfg.memory} per process, not the box's total; /tmp "
                                  f"bounded by its size {cfg.tmpfs_size}{lacking}")
    if "cpus" not in lim.enforced:
        lim.enforced["cpus"] = f"not enforced: no cpu cgroup{lacking}"
    return lim


def gc_cgroups(cfg: SandboxConfig, owner_alive) -> int:
    """Remove box cgroups whose owner process is gone (their processes killed first); returns how many."""
    removed = 0
    for parent in parent_dirs(cfg).values():
        if not parent.is_dir():
            continue
        for d in parent.glob(f"{BOX_PREFIX}*"):
            try:
                pid, start = d.name[len(BOX_PREFIX):].split("-")[:2]
            except ValueError:
                continue
            if owner_alive(pid, start):
                continue
            remove_cgroup(d)
            removed += not d.exists()
    return removed



