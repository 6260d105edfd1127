"""Starting the persistent shell of one box (again, after it died): its process, started by the box's
warden where asked and possible (:mod:`.warden_shell`), else by the engine; an optional prelude (the
reset's wipe) before it; its set-up (:func:`~.shell_script.init_script`) and ``READY`` line, which give
its pid and the box's clock; then the command channel past the engine's relay where the box allows it
(:mod:`.channel`). Nothing here runs per command (:mod:`.session` runs them)."""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass

import pexpect

from ..config import SandboxConfig
from ..errors import SandboxError
from .base import RUN_MOUNT, Box, ShellStream, Spawn
from .channel import channel_owner, open_channel
from .hardening import shell_rlimit_as
from .ownership import box_clock_offset
from .reset import WIPED
from .shell_script import init_script
from .warden_shell import START_WAIT_S, WardenSpawn, spawn_by_warden

__all__ = ["START_TIMEOUT_S", "ShellStarter", "StartedShell"]

STATE = f"{RUN_MOUNT}/state"
START_TIMEOUT_S = 60.0
"""A new shell prints its READY line; a dead shell's output file is read back (sized for a host at load
10+: the wait ends as soon as the answer comes)."""
SHELL_ARGV = ["bash", "--norc", "--noprofile", "--noediting"]


@dataclass
class StartedShell:
    """A shell ready for commands."""

    exec: Spawn
    """Its process (the exit status of a shell that died comes from it)."""
    stream: ShellStream
    """Where commands go and reports come from: its terminal, or the command channel."""
    pid: int
    """Its pid in the box (a shell that does not answer is killed by it)."""
    clock_offset: float
    """Seconds from this host's ``CLOCK_BOOTTIME`` to the box's uptime (measured at start)."""
    idle_stdout: str
    """Its stdout between commands as the box names it (``-``: its terminal)."""


class ShellStarter:
    """Starts the shells of one box; remembers that the box's shell could not use the command channel."""

    def __init__(self, box: Box, cfg: SandboxConfig):
        self.box = box
        self.cfg = cfg
        self.no_channel = False
        """The box's shell could not use the command channel: the terminal carries everything."""

    def start(self, cwd: str, prelude: Sequence[str] = (), *, by_warden: bool = False) -> StartedShell:
        """A shell in ``cwd``, ready; ``prelude``: a command its process runs first, which then execs the
        shell (the reset's wipe, :data:`.reset.RESET_SCRIPT`, ending with its :data:`.reset.WIPED` line).
        ``by_warden``: the box's warden starts it where it can. A start that ends at once while the box
        runs is tried again by the engine, three times in all."""
        deadline = time.monotonic() + START_TIMEOUT_S
        for attempt in range(3):
            res = self._once(cwd, deadline, prelude, by_warden=by_warden and attempt == 0)
            if isinstance(res, StartedShell):
                return res
            if attempt == 2 or not self.box.is_running():
                break
            time.sleep(0 if by_warden and attempt == 0 else 0.5 * (attempt + 1))
        raise SandboxError(f"the shell in container {self.box.id[:12]} exited at start: {res}")

    def _new_shell(self, argv: list[str], deadline: float, by_warden: bool) -> Spawn:
        """The shell's process: started by the warden when asked and possible, else by the engine."""
        timeout = max(1.0, deadline - time.monotonic())
        if by_warden and (owner := channel_owner(self.cfg.user)) is not None:
            with contextlib.suppress(SandboxError):
                return spawn_by_warden(self.box, argv, owner, timeout=timeout)
        return self.box.spawn(argv, timeout=timeout)

    def _once(
        self, cwd: str, deadline: float, prelude: Sequence[str], *, by_warden: bool
    ) -> StartedShell | str:
        """One start of the shell: the shell when it is ready, else what it printed before it ended."""
        nonce = secrets.token_hex(8)
        try:
            tty_exec = self._new_shell([*prelude, *SHELL_ARGV], deadline, by_warden)
        except (SandboxError, OSError) as e:
            return str(e)
        child = tty_exec.child
        buf = bytearray()
        try:
            # the set-up goes to the shell, not to the wipe (which drains the terminal's input)
            warden = isinstance(tty_exec, WardenSpawn)
            if prelude and _await(child, WIPED, min(deadline, time.monotonic() + START_WAIT_S) if warden
                                  else deadline, buf) is None:
                _close(child)
                if warden:  # the warden did not do it: the engine will
                    return f"the box's warden did not start the shell within {START_WAIT_S:.0f} s"
                raise SandboxError(f"the shell in container {self.box.id[:12]} did not start")
            sent = time.clock_gettime(time.CLOCK_BOOTTIME)
            child.send(init_script(STATE, cwd, nonce, rlimit_as=shell_rlimit_as(self.cfg)).encode())
            marker = f"\n__FTE_READY_{nonce} ".encode()
            ready = _await(child, marker, deadline, buf) is not None and _await(child, b"\n", deadline, buf)
            if not ready:  # READY <nonce> <pid> <box uptime>
                _close(child)
                raise SandboxError(f"the shell in container {self.box.id[:12]} did not start")
            pid, uptime = ready.split()
            offset = box_clock_offset(float(uptime), sent, time.clock_gettime(time.CLOCK_BOOTTIME))
            stream, idle_stdout = self._channel(child, nonce, deadline)
            return StartedShell(tty_exec, stream, int(pid), offset, idle_stdout)
        except (pexpect.EOF, OSError):
            _close(child)
            return bytes(buf[-500:]).decode("utf-8", "replace").strip()

    def _channel(self, tty: ShellStream, nonce: str, deadline: float) -> tuple[ShellStream, str]:
        """Commands and reports past the engine's relay where the box allows it, with the shell's stdout
        between commands; a shell that did not answer on it is replaced by one over its terminal alone."""
        owner = channel_owner(self.cfg.user) if getattr(self.box, "direct_channel", False) else None
        if owner is None or self.no_channel:
            return tty, "-"
        try:
            chan = open_channel(tty, self.box.gateway_dir, owner, nonce, min(deadline, time.monotonic() + 10))
        except TimeoutError:
            self.no_channel = True
            raise OSError("the shell did not answer on its command channel") from None
        if chan is None:
            self.no_channel = True
            return tty, "-"
        return chan, chan.box_stdout


def _await(child: ShellStream, line: bytes, deadline: float, buf: bytearray) -> bytes | None:
    """Read into ``buf`` until ``line`` came: what came before it (taken out of ``buf`` with the line),
    None when it did not come in time; pexpect.EOF or OSError when the stream ended (``buf`` kept)."""
    while (i := buf.find(line)) < 0:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        with contextlib.suppress(pexpect.TIMEOUT):
            buf += child.read_nonblocking(1 << 16, timeout=left)
        if len(buf) > 1 << 16:  # only noise so far: keep a tail for a split line
            del buf[: len(buf) - 4096]
    before = bytes(buf[:i])
    del buf[: i + len(line)]
    return before


def _close(child: ShellStream) -> None:
    with contextlib.suppress(Exception):  # closing a broken stream
        child.close(force=True)
