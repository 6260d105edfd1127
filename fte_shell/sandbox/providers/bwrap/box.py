"""A bwrap box: its PID 1 (the warden), the shells entered into it, and its removal.

The box is ``bwrap --unshare-all --as-pid-1 --die-with-parent`` over the cached root file system
(read-only), with ``/work`` and the gateway directory read-only, size-capped tmpfs at ``/tmp`` and at
the session's output directory, a fresh ``/dev`` (devpts of its own) and ``/proc``, no ``/sys``, and the
warden as PID 1. bwrap needs two user namespaces here (the outer one maps uid 0 to mount devpts, the
inner one is the sandbox's ``user``); a shell is entered into the box with ``nsenter`` (outer user
namespace, got by ``NS_GET_PARENT``, then ipc/uts/net/pid/mount), then :func:`inner_argv` (the inner user
namespace: the uid of ``config.user``, an empty bounding set, no capabilities; no-new-privileges) on a terminal allocated from the box's own devpts
(so the warden, inside, can write the session's ``SWEPT`` line to it). Started by root, the box runs
as the uid of ``config.user`` on the host (as a Docker container does), never as root.

bwrap is started from one long-lived thread of this process: ``--die-with-parent`` (PR_SET_PDEATHSIG)
fires when the *thread* that started it ends, so a box started from a short-lived thread would die
with that thread. When this process dies (even by SIGKILL) every box dies with it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import platform
import secrets
import signal
import struct
import subprocess
import termios
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ....config import SandboxConfig
from ....errors import SandboxError
from ...base import BoxFields, BoxSpec
from ...host_signals import signal_defaults
from ...output import PtySpawn
from ...ownership import name_part
from . import limits as L
from .launch import (
    READY_S,
    RLIMIT_NAMES,
    adopt,
    as_box_user,
    box_env,
    box_ids,
    bwrap_argv,
    children_of,
    corpus_mount_point,
    host_prefix,
    on_launcher,
)
from .rootfs import Rootfs

SYSCALLS = {"x86_64": (308, 157, 112), "aarch64": (268, 167, 157)}
"""(setns, prctl, setsid) syscall numbers by machine."""
TIOCSCTTY = 0x540E


def inner_argv() -> list[str]:
    """Inside the box (as root of its outer user namespace): a session of its own with the terminal on
    stdin as its controlling terminal (when there is one), no-new-privileges, the inner user namespace (the sandbox's uid),
    an empty capability bounding set — entering a user namespace fills it again, and only a process that
    has capabilities *after* that step can empty it (util-linux's nsenter cannot) — then exec the command.
    perl from the image (perl-base is in every Debian image): setsid + ioctl + setns + prctl + exec."""
    try:
        setns, prctl, setsid = SYSCALLS[platform.machine()]
    except KeyError:
        raise SandboxError(f"the bwrap provider knows the syscalls of {', '.join(SYSCALLS)}, "
                           f"not {platform.machine()}") from None
    return ["/usr/bin/perl", "-e",
            (f"syscall({setsid}); ioctl(STDIN, {TIOCSCTTY}, 0); syscall({prctl}, 38, 1, 0, 0, 0); "
             'open(my $u, "<", "/proc/1/ns/user") or die "box user namespace: $!\n"; '
             f'syscall({setns}, fileno($u), 0x10000000) == 0 or die "setns: $!\n"; close($u); '
             f"for my $c (0..63) {{ syscall({prctl}, 24, $c) }} "
             'exec {$ARGV[0]} @ARGV or die "exec $ARGV[0]: $!\n"')]


NS_GET_PARENT = 0xB702
TIOCSPTLCK = 0x40045431
TIOCGPTPEER = 0x5441


@dataclass
class BwrapSpawn:
    """A shell entered into the box on a terminal of the box's devpts."""

    proc: subprocess.Popen
    child: Any

    def exit_code(self, wait_s: float = 5.0) -> int | None:
        try:
            code = self.proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            return None
        return 128 - code if code < 0 else code


@dataclass
class BwrapBox(BoxFields):
    """A started bwrap box."""

    cfg: SandboxConfig
    rootfs: Rootfs
    limits: L.BoxLimits
    proc: subprocess.Popen
    warden_pid: int
    userns_fd: int
    """The box's outer user namespace (the inner one's parent), held open for ``nsenter``."""
    shells: list[subprocess.Popen] = field(default_factory=list)
    direct_channel: bool = True
    """The gateway directory is bind-mounted: a FIFO made there is the shell's too (the terminal has no
    relay, but a pty costs more per command than two FIFOs)."""

    def _enter(self, argv: list[str], fd: str, prefix: bool = False) -> list[str]:
        """The host command that runs ``argv`` inside the box (``fd``: the outer user namespace); run
        with :func:`as_box_user` (``prefix``: with :func:`host_prefix`, for a command line)."""
        return [*(host_prefix(self.cfg) if prefix else []), "nsenter", "-t", str(self.warden_pid), f"--user={fd}", "-i", "-u", "-n", "-p", "-m",
                "--preserve-credentials", "-r", "-w", *inner_argv(), *argv]

    def _env(self) -> dict[str, str]:
        return box_env(self.cfg, self.rootfs)

    def spawn(self, argv: list[str], *, timeout: float) -> BwrapSpawn:
        if not self.is_running():
            raise SandboxError(f"the bwrap box {self.name} is gone")
        try:
            master = os.open(f"/proc/{self.warden_pid}/root/dev/pts/ptmx", os.O_RDWR | os.O_NOCTTY)
        except OSError as e:
            raise SandboxError(f"could not open the box's terminal: {e}") from e
        try:
            fcntl.ioctl(master, TIOCSPTLCK, struct.pack("i", 0))
            slave = fcntl.ioctl(master, TIOCGPTPEER, os.O_RDWR | os.O_NOCTTY)
            with contextlib.suppress(OSError):
                fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
            if os.geteuid() == 0:  # the warden (the box's uid) writes SWEPT to it
                os.fchown(slave, *box_ids(self.cfg))
            try:
                proc = subprocess.Popen(
                    self._enter(argv, f"/proc/self/fd/{self.userns_fd}"), stdin=slave, stdout=slave,
                    stderr=slave, pass_fds=(self.userns_fd,), env=self._env(), start_new_session=True,
                    **as_box_user(self.cfg), **signal_defaults())
            finally:
                os.close(slave)
            if self.limits.cgroups or self.limits.rlimits:
                try:
                    adopt(self.limits, [proc.pid, *children_of(proc.pid)])
                except SandboxError:
                    proc.kill()
                    proc.wait()
                    raise
        except BaseException:
            os.close(master)
            raise
        self.shells = [p for p in self.shells if p.poll() is None] + [proc]
        return BwrapSpawn(proc, PtySpawn(master, proc, timeout=timeout))

    def root_pid(self) -> int | None:
        return self.warden_pid

    def is_running(self) -> bool:
        return self.proc.poll() is None

    def exec(self, argv: list[str]) -> tuple[int, str]:
        """A check (not the agent's): outside the box's cgroup, under its rlimits when it has no cgroup."""
        rl = [f"--{RLIMIT_NAMES[res]}={v}" for res, v in self.limits.rlimits]
        inner = ["/usr/bin/prlimit", *rl, "--", *argv] if rl else argv
        r = subprocess.run(self._enter(inner, f"/proc/self/fd/{self.userns_fd}"), pass_fds=(self.userns_fd,),
                           **as_box_user(self.cfg),
                           env=self._env(), stdin=subprocess.DEVNULL, capture_output=True, timeout=120,
                           check=False)
        return r.returncode, (r.stdout + r.stderr).decode("utf-8", "replace")

    def signal_warden(self) -> None:
        try:
            os.kill(self.warden_pid, signal.SIGUSR1)
        except OSError as e:
            raise SandboxError(f"could not signal the bwrap box's warden: {e}") from e

    def terminal_argv(self, env: dict[str, str]) -> list[str]:
        # a fresh process: the namespace is reopened through this process's descriptor (as root,
        # before dropping to the box's uid)
        fd = f"/proc/{os.getpid()}/fd/{self.userns_fd}"
        rl = [f"--{RLIMIT_NAMES[res]}={v}" for res, v in self.limits.rlimits]
        inner = self._enter([*(["/usr/bin/prlimit", *rl, "--"] if rl else []), "env",
                             *(f"{k}={v}" for k, v in env.items()), "bash", "--norc", "-i"], "/proc/self/fd/9",
                             prefix=True)
        return ["/bin/sh", "-c", 'exec 9<"$0" && exec "$@"', fd, *inner]

    def stop(self) -> None:
        _live.pop(self.id, None)
        # The warden first (PID 1: its whole namespace goes with it), then bwrap and each shell's nsenter
        # are waited for: each reaps its child and ends. Killed first, they left that child a zombie of
        # the host's init.
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                os.kill(self.warden_pid, signal.SIGKILL)
        for p in [self.proc, *self.shells]:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                    p.kill()
                    p.wait(timeout=5)
        self.shells = []
        if self.userns_fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.userns_fd)
            self.userns_fd = -1
        self.limits.remove()

    def describe(self) -> dict[str, Any]:
        return {"provider": "bwrap", "id": self.id, "name": self.name, "run_id": self.run_id,
                "rootfs": str(self.rootfs.path), "rootfs_key": self.rootfs.key,
                "limits": dict(self.limits.enforced)}


_live: dict[str, BwrapBox] = {}
"""Box id -> every box this process started and has not removed (the cleanup handlers read it)."""
os.register_at_fork(after_in_child=_live.clear)


def start(spec: BoxSpec, rootfs: Rootfs) -> BwrapBox:
    cfg = spec.config
    if box_ids(cfg)[0] == 0:
        raise SandboxError("sandbox.user must not be root (uid 0)")
    ttl = int(cfg.ttl_s if spec.ttl_s is None else spec.ttl_s)
    if os.geteuid() == 0:
        for path in (rootfs.path, spec.workspace, spec.gateway_dir, *([spec.corpus] if spec.corpus else [])):
            reachable(path, *box_ids(cfg))
    if spec.corpus is not None:
        corpus_mount_point(rootfs)
    lim = L.make(cfg)
    name = f"fte-{name_part(spec.run_id)}-{secrets.token_hex(3)}"
    err_path = spec.gateway_dir.parent / f".{name}.bwrap-err"
    try:
        r, w = os.pipe()
        argv = bwrap_argv(cfg, spec, rootfs, lim, w, ttl)
        as_box = as_box_user(cfg)
        with err_path.open("wb") as err:
            def launch() -> subprocess.Popen:
                return subprocess.Popen(argv, pass_fds=(w,), stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                                        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                                        start_new_session=True, **as_box, **signal_defaults())

            try:
                proc = on_launcher(launch)
            finally:
                os.close(w)
        data = b""
        while chunk := os.read(r, 65536):
            data += chunk
        os.close(r)
        try:
            warden = int(json.loads(data)["child-pid"])
        except (ValueError, KeyError):
            proc.wait(timeout=10)
            raise SandboxError(f"bwrap did not start the box: {_err_text(err_path)}") from None
        try:  # bwrap's child does not fork before it is the warden: nothing escapes
            adopt(lim, [proc.pid, warden])
        except SandboxError as e:
            proc.kill()
            proc.wait()
            raise SandboxError(f"{e} (bwrap: {_err_text(err_path)})") from e
        box = BwrapBox(f"bwrap-{warden}-{secrets.token_hex(4)}", name, spec.run_id, spec.workspace,
                       spec.gateway_dir, cfg, rootfs, lim, proc, warden, -1)
        _live[box.id] = box
        deadline = time.monotonic() + READY_S
        while True:  # set up once PID 1 is the warden (its /proc/<pid>/root is the box's then)
            try:
                comm = Path(f"/proc/{warden}/comm").read_text().strip()
            except OSError:
                comm = ""
            if comm and comm != "bwrap":
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                box.stop()
                raise SandboxError(f"the bwrap box did not come up: {_err_text(err_path)}")
            time.sleep(0.0005)
        try:
            ufd = os.open(f"/proc/{warden}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
            try:
                box.userns_fd = fcntl.ioctl(ufd, NS_GET_PARENT)
            finally:
                os.close(ufd)
        except OSError as e:
            box.stop()
            raise SandboxError(f"could not reach the bwrap box's user namespace: {e}") from e
        return box
    except BaseException:
        lim.remove()
        raise
    finally:
        with contextlib.suppress(OSError):
            err_path.unlink()


def reachable(path: Path, uid: int, gid: int) -> None:
    """Started by root, the box runs as ``uid``, whose bwrap must walk to each bound directory."""
    p = Path(path).resolve()
    for d in [*reversed(p.parents), p]:
        st = d.stat()
        bit = 0o100 if st.st_uid == uid else 0o010 if st.st_gid == gid else 0o001
        if not st.st_mode & bit:
            raise SandboxError(f"the bwrap box runs as uid {uid} (sandbox.user), which cannot enter {d} on the way "
                               f"to {p}: make it searchable (chmod o+x) or keep the run elsewhere; or, as root, "
                               "use the docker or podman provider")


def _err_text(path: Path) -> str:
    with contextlib.suppress(OSError):
        return path.read_text(errors="replace").strip()[-500:] or "no message"
    return "no message"


def stop_all() -> None:
    for box in list(_live.values()):
        with contextlib.suppress(Exception):
            box.stop()


