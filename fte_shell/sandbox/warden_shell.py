"""A session shell the box's warden starts, not the engine: the reset of a reused box without an exec.

Docker's ``docker exec`` costs about 80 ms of dockerd's, containerd's and runc's CPU (podman's is a
client process; bwrap's a fork of this process and its uid switch). When this process can reach into
the box (root, runc or bwrap: :meth:`~.base.Box.root_pid`), :func:`spawn_by_warden` instead

1. makes a terminal in the box's own devpts (``/proc/PID/root/dev/pts/ptmx``), keeps its master and
   gives its slave to the box's user;
2. writes the request to the gateway directory (read-only in the box, so only this process can ask):
   a token, the terminal's name in the box, the command's words (:data:`~.base.SPAWN_REQUEST`);
3. signals the warden (PID 1), which ends every other process of the box, waits until none is left,
   and only then starts the command as a new session on that terminal, with the environment it was
   started with (the box's) and every signal at its default (``sandbox/lib/warden.sh``, "Shell
   starter").

No process of the last user runs when the shell's first process starts, so none can race it; one that
wrote to the terminal before the warden ended it is undone: its output is ignored (the host waits for
the wipe's end marker), its input drained by the wipe (:data:`.reset.RESET_SCRIPT`), the terminal's
settings restored before the first byte this process sends (:class:`WardenTerminal`). The shell is
the terminal's session leader: this process finds it with ``TIOCGSID`` (in its own pid namespace) and
watches it through a pidfd, as :class:`~.output.PtySpawn` watches an entered shell.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import select
import signal
import struct
import subprocess
import termios
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import SandboxError
from .base import GATEWAY_MOUNT, SPAWN_REQUEST, Box, ShellStream
from .output import PtySpawn

TIOCSPTLCK = 0x40045431
TIOCGPTN = 0x80045430
TIOCGPTPEER = 0x5441
TIOCGSID = 0x5429
WINDOW = (50, 200)
"""The terminal's rows and columns (as the engines' exec terminals are given)."""
START_WAIT_S = 15.0
"""How long the warden has to end the box's processes and start the command until its first line (the
wipe's end) before the request counts as failed and the engine starts the shell instead."""


def root_reachable(box: Box) -> int | None:
    """The box's PID 1 on this host when this process may make its terminals: the box's root is reachable
    through ``/proc`` and is this box (its gateway mount is the box's gateway directory); else None."""
    pid = box.root_pid()
    if pid is None or os.geteuid() != 0:
        return None
    try:
        return pid if os.path.samefile(f"/proc/{pid}/root{GATEWAY_MOUNT}", box.gateway_dir) else None
    except OSError:
        return None


def _readable(fd: int, timeout_s: float) -> bool:
    """``fd`` is readable within ``timeout_s`` (poll: descriptors past 1024 too, a trainer holds many)."""
    p = select.poll()
    p.register(fd, select.POLLIN)
    return bool(p.poll(max(0, int(timeout_s * 1000))))


class _Leader:
    """The terminal's session leader (the started shell), as :class:`~.output.PtySpawn` drives a process:
    ``poll``, ``kill``, ``wait``. Found by ``TIOCGSID`` on the master, watched through a pidfd."""

    def __init__(self, master: int):
        self._master = master
        self._pidfd: int | None = None
        self.pid: int | None = None
        self.returncode: int | None = None

    def session(self) -> int | None:
        """The terminal's session (its leader's pid here), None while it has none."""
        try:
            return struct.unpack("i", fcntl.ioctl(self._master, TIOCGSID, b"\0\0\0\0"))[0]
        except OSError:
            return None

    def poll(self) -> int | None:
        # found at the first look after the shell's start (its READY line): a process of the last user
        # that took the terminal before the warden ended it held it only until then
        if self.returncode is None and self._pidfd is None:
            sid = self.session()
            try:
                self._pidfd = os.pidfd_open(sid) if sid else None
            except OSError:
                self._pidfd = None
            if self._pidfd is None:
                self.returncode = -1
                return self.returncode
            self.pid = sid
        if self.returncode is None and self._pidfd is not None and _readable(self._pidfd, 0):
            self.returncode = -1  # ended; not our child: its status is the warden's to reap
            os.close(self._pidfd)
            self._pidfd = None
        return self.returncode

    def kill(self) -> None:
        if self.poll() is None and self._pidfd is not None:
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)

    def wait(self, timeout: float | None = None) -> int:
        deadline = time.monotonic() + (timeout if timeout is not None else 1e9)
        while self.poll() is None and self._pidfd is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired("the session shell", timeout or 0.0)
            _readable(self._pidfd, left)
        return -1

    def release(self) -> None:
        if self._pidfd is not None:
            with contextlib.suppress(OSError):
                os.close(self._pidfd)
            self._pidfd = None


class WardenTerminal(PtySpawn):
    """The master of a terminal the warden starts a shell on. Until the first byte this process sends
    (after the wipe's end), it holds the slave open too (a master reads EIO while no slave is open: before
    the warden's child opened it); then it closes it and gives the terminal back the settings it was
    made with (a process of the last user may have changed them before the warden ended it)."""

    def __init__(self, fd: int, leader: _Leader, settings: list, slave: int, *, timeout: float):
        super().__init__(fd, leader, timeout=timeout)  # type: ignore[arg-type]
        self._leader = leader
        self._settings: list | None = settings
        self._slave: int | None = slave

    def _drop_slave(self) -> None:
        if self._slave is not None:
            with contextlib.suppress(OSError):
                os.close(self._slave)
            self._slave = None

    def close(self, force: bool = True) -> None:
        self._drop_slave()
        super().close(force)
        self._leader.release()

    def send(self, s: bytes | str) -> int:
        if self._settings is not None:
            self._drop_slave()
            termios.tcsetattr(self.child_fd, termios.TCSANOW, self._settings)
            self._settings = None
        return super().send(s)


@dataclass
class WardenSpawn:
    """A shell the warden started (:class:`~.base.Spawn`)."""

    child: ShellStream

    def exit_code(self, wait_s: float = 5.0) -> int | None:
        return None  # the warden reaps it; nobody here can say


def _open_terminal(root_pid: int, owner: tuple[int, int]) -> tuple[int, int, str]:
    """A new terminal in the box's devpts, given to ``owner``: its master and slave (this process's) and
    the slave's name in the box."""
    master = os.open(f"/proc/{root_pid}/root/dev/pts/ptmx", os.O_RDWR | os.O_NOCTTY)
    slave = -1
    try:
        fcntl.ioctl(master, TIOCSPTLCK, struct.pack("i", 0))
        n = struct.unpack("i", fcntl.ioctl(master, TIOCGPTN, b"\0\0\0\0"))[0]
        slave = fcntl.ioctl(master, TIOCGPTPEER, os.O_RDWR | os.O_NOCTTY)
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", *WINDOW, 0, 0))
        os.fchown(slave, *owner)
        os.fchmod(slave, 0o620)
    except BaseException:
        for fd in (slave, master):
            if fd >= 0:
                os.close(fd)
        raise
    return master, slave, f"/dev/pts/{n}"


def write_spawn_request(gateway_dir: Path, pts: str, argv: list[str]) -> None:
    """Ask the warden for a new shell: ``TOKEN PTS`` and the command's words (each ended by a NUL) in
    the gateway directory (read-only in the box; a signal without a new token starts nothing)."""
    if any("\0" in a for a in argv):
        raise SandboxError("a word of the shell's command holds a NUL")
    tmp = gateway_dir / f".{SPAWN_REQUEST}.{secrets.token_hex(4)}"
    try:
        tmp.write_bytes(f"{secrets.token_hex(12)} {pts}\n".encode() + b"".join(a.encode() + b"\0" for a in argv))
        os.chmod(tmp, 0o644)
        os.replace(tmp, gateway_dir / SPAWN_REQUEST)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise SandboxError(f"could not write the spawn request in {gateway_dir}: {e}") from e


def spawn_by_warden(box: Box, argv: list[str], owner: tuple[int, int], *, timeout: float) -> WardenSpawn:
    """Ask the warden to start ``argv`` as the box's user on a new terminal (see the module); raises
    :class:`SandboxError` when it cannot ask. The caller waits for the command's first line (at most
    :data:`START_WAIT_S`, then it has the engine start it instead)."""
    root = root_reachable(box)
    if root is None:
        raise SandboxError("the box's warden cannot start shells for this process")
    try:
        master, slave, pts = _open_terminal(root, owner)
    except OSError as e:
        raise SandboxError(f"could not make a terminal in the box: {e}") from e
    try:
        settings = termios.tcgetattr(master)
        write_spawn_request(box.gateway_dir, pts, argv)
        os.kill(root, signal.SIGUSR1)
        return WardenSpawn(WardenTerminal(master, _Leader(master), settings, slave, timeout=timeout))
    except BaseException as e:
        for fd in (slave, master):
            with contextlib.suppress(OSError):
                os.close(fd)
        if isinstance(e, OSError):
            raise SandboxError(f"could not ask the box's warden for a shell: {e}") from e
        raise
