"""How a bwrap box is launched: the bwrap command line, the one launcher thread, and the adoption of
the box's first processes into its cgroups and rlimits."""

from __future__ import annotations

import os
import queue
import resource
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ....config import SandboxConfig
from ....errors import SandboxError
from ...base import GATEWAY_MOUNT, GATEWAY_SOCKET, RUN_MOUNT, WARDEN, BoxSpec
from ...corpus_files import CORPUS_MOUNT
from ...output import size_bytes
from . import limits as L
from .rootfs import Rootfs

PIDS_MOUNT = "/sys/fs/cgroup/pids"
"""Where the box sees its pids cgroup (read-only) when it has one: the warden's fork-bomb breaker."""
READY_S = 10.0
"""How long a box and an entered process get to come up."""
RLIMIT_NAMES = {resource.RLIMIT_NPROC: "nproc", resource.RLIMIT_AS: "as", resource.RLIMIT_CORE: "core"}


def box_ids(cfg: SandboxConfig) -> tuple[int, int]:
    u, _, g = cfg.user.partition(":")
    try:
        return int(u), int(g or u)
    except ValueError as e:
        raise SandboxError(f"sandbox.user must be numeric uid:gid for bwrap, got {cfg.user!r}") from e


def host_prefix(cfg: SandboxConfig) -> list[str]:
    """For a command line run by someone else (``fte-shell shell``): root drops to the uid of
    ``config.user`` before anything touches the box; a plain user is itself."""
    if os.geteuid() == 0:
        uid, gid = box_ids(cfg)
        return ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups"]
    return []


def as_box_user(cfg: SandboxConfig) -> dict[str, Any]:
    """``subprocess`` arguments that make root's child the uid of ``config.user`` (a plain user's child
    stays itself): what :func:`host_prefix` does, without a process of its own."""
    if os.geteuid() == 0:
        uid, gid = box_ids(cfg)
        return {"user": uid, "group": gid, "extra_groups": []}
    return {}


# --- the launcher thread ---------------------------------------------------------------------------
_jobs: queue.SimpleQueue[tuple[Callable[[], Any], queue.SimpleQueue]] = queue.SimpleQueue()
_launcher: threading.Thread | None = None
_launcher_lock = threading.Lock()


def _launch_loop() -> None:
    while True:
        fn, reply = _jobs.get()
        try:
            reply.put((True, fn()))
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            reply.put((False, e))


def on_launcher(fn: Callable[[], Any]) -> Any:
    """Run ``fn`` on the process's one launcher thread (it lives as long as the process)."""
    global _launcher
    with _launcher_lock:
        if _launcher is None or not _launcher.is_alive():
            _launcher = threading.Thread(target=_launch_loop, name="fte-bwrap-launcher", daemon=True)
            _launcher.start()
    reply: queue.SimpleQueue = queue.SimpleQueue()
    _jobs.put((fn, reply))
    ok, value = reply.get()
    if not ok:
        raise value
    return value


os.register_at_fork(after_in_child=lambda: globals().__setitem__("_launcher", None))


# --- the box command -------------------------------------------------------------------------------
def box_env(cfg: SandboxConfig, rootfs: Rootfs) -> dict[str, str]:
    env = dict(rootfs.env)
    env.update(cfg.env)
    env["FTE_GATEWAY"] = GATEWAY_SOCKET
    return env


def corpus_mount_point(rootfs: Rootfs) -> None:
    """Make the empty directory ``/corpus`` is bound over in the box's root file system (read-only in the
    box, so bwrap cannot make it there): once per tree, on the host."""
    point = rootfs.path / CORPUS_MOUNT.lstrip("/")
    if point.is_dir():
        return
    mode = rootfs.path.stat().st_mode & 0o7777
    try:
        if rootfs.path.stat().st_uid == os.geteuid() and not mode & 0o200:
            os.chmod(rootfs.path, mode | 0o200)
        try:
            point.mkdir(mode=0o755, exist_ok=True)
        finally:
            os.chmod(rootfs.path, mode)
    except OSError as e:
        raise SandboxError(f"the box's root file system {rootfs.path} has no {CORPUS_MOUNT} for sandbox.corpus "
                           f"and it cannot be made ({e}): create the empty directory there once "
                           f"(mkdir {point}), or export the tree again") from None


def bwrap_argv(cfg: SandboxConfig, spec: BoxSpec, rootfs: Rootfs, lim: L.BoxLimits, info_fd: int,
               ttl: int) -> list[str]:
    uid, gid = box_ids(cfg)
    argv = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session"]
    if cfg.protect_warden:
        argv.append("--as-pid-1")
    argv += ["--ro-bind", str(rootfs.path), "/", "--proc", "/proc", "--dev", "/dev",
             "--size", str(size_bytes(cfg.tmpfs_size)), "--tmpfs", "/tmp",
             "--size", str(size_bytes(cfg.output_buffer_size)), "--tmpfs", RUN_MOUNT,
             "--ro-bind", str(spec.workspace), "/work", "--ro-bind", str(spec.gateway_dir), GATEWAY_MOUNT]
    if spec.corpus is not None:
        argv += ["--ro-bind", str(spec.corpus), CORPUS_MOUNT]
    if lim.pids_dir is not None:  # a read-only /sys that holds only the box's pids cgroup
        argv += ["--tmpfs", "/sys", "--ro-bind", str(lim.pids_dir), PIDS_MOUNT, "--remount-ro", "/sys"]
    argv += ["--uid", str(uid), "--gid", str(gid), "--hostname", "sandbox", "--chdir", "/work",
             "--clearenv"]
    for k, v in box_env(cfg, rootfs).items():
        argv += ["--setenv", k, v]
    return argv + ["--info-fd", str(info_fd), "--", "bash", WARDEN, str(ttl)]


def adopt(lim: L.BoxLimits, pids: list[int]) -> None:
    """Put host processes of the box into its cgroups and under its rlimits (before the box runs
    anything of the agent's: what they start inherits both). No process of ours has to start for it."""
    for f in lim.procs_files:
        for pid in pids:
            try:
                f.write_text(str(pid))
            except OSError as e:
                raise SandboxError(f"could not put a process of the box into its cgroup {f.parent}: {e}") from e
    for res, value in lim.rlimits:
        for pid in pids:
            try:
                resource.prlimit(pid, res, (value, value))
            except OSError as e:
                raise SandboxError(f"could not set the box's rlimit {res} on process {pid}: {e}") from e


def children_of(pid: int, wait_s: float = READY_S) -> list[int]:
    """The children of ``pid`` once it has one (nsenter forks into the box's pid namespace)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            return []
        if kids or time.monotonic() > deadline:
            return [int(k) for k in kids]
        time.sleep(0.0002)
