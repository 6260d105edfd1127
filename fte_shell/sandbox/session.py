"""One persistent bash session per question inside a sandbox box (not a process per command), over any spawn.

One ``bash --norc --noprofile --noediting`` started with a terminal as USER in the box (Docker: an exec
attached over the API socket) and driven by pexpect through the box's :class:`~.base.Spawn`; the
terminal runs raw with echo off. Per command the host sends, in one write, one line
(:func:`command_payload`): the command text verbatim as a ``$'…'`` word, ``eval``'d in
the shell itself (cd, exports, functions and aliases persist) with stdin from /dev/null and
stdout+stderr to a file on the box's private size-capped tmpfs; then ``__fte_post`` writes ``BEGIN
<nonce>``, the output (head and tail beyond the cap) and ``END <nonce> <status> <size> <cwd>``
(:mod:`.shell_script`). The nonce is fresh per command and never visible to it. On timeout the host
writes a fresh request to the gateway directory (a token, the command's start on the box's clock, the
shell's stdout between commands) and signals the box's warden (``sandbox/lib/warden.sh``), which kills
the command's processes and reports ``SWEPT``; a shell that dies is restarted in the last working
directory (:mod:`.shell_start` starts it), one that does not answer is killed and restarted. The whole
protocol and its guarantees: docs/sandbox.md, "The session".

The shell functions of :data:`~.shell_script._INIT` are installed in every (re)started shell. Aliases
the agent defines later cannot change them (aliases expand when a function is defined); absolute paths
bypass the agent's PATH and functions.
"""

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
from .output import Observation, reported_text, split_cap
from .ownership import write_sweep_request
from .shell_start import START_TIMEOUT_S, ShellStarter, StartedShell

__all__ = ["ShellSession"]

RUN = RUN_MOUNT
# Waits for the sandbox's own machinery (not for the agent's command). Each ends as soon as the answer
# comes; the limits only matter when something is broken, so they are sized for a host at load 10+.
SWEEP_GRACE_S = 30.0
"""After a timeout, the warden reports that it killed the command's processes."""
RESYNC_GRACE_S = 20.0
"""After the sweep, the interrupted shell runs the end-of-command report again; else it is replaced."""
RESEND_S = 2.0
"""The report is sent again this often while the shell has not answered (an interrupt that reached
the shell late may have discarded the line)."""
READ_BYTES = 1 << 16
"""One read of the shell's stream: a pipe's capacity (a terminal gives at most 4 KiB). A larger buffer
made Python map and unmap 1 MiB for every report (three system calls and, under threads, TLB flushes)."""


def end_fields(line: bytes | bytearray) -> tuple[int | None, int, str]:
    """The status, size (-1: the whole output was sent) and working directory of an END line, from what
    follows its nonce and space; None and -1 when they do not parse."""
    fields = bytes(line).decode("utf-8", "replace").split(" ", 2)
    try:
        status, size = int(fields[0]), int(fields[1])
    except (ValueError, IndexError):
        status, size = None, -1
    return status, size, fields[2] if len(fields) > 2 else ""


_ESCAPES = {**{c: f"\\x{c:02x}" for c in range(256) if not 0x20 <= c < 0x7F}, ord("'"): "\\'", ord("\\"): "\\\\"}
"""Byte -> its spelling inside bash's ``$'…'`` (what is not printable ASCII as ``\\xHH``)."""


def ansi_c_quoted(text: str) -> str:
    """``text`` as one bash ``$'…'`` word on one printable-ASCII line: bash gives back its exact bytes
    (UTF-8; lone surrogates as the bytes they escape), whatever control characters it holds."""
    return "$'" + text.encode("utf-8", "surrogateescape").decode("latin-1").translate(_ESCAPES) + "'"


def command_payload(command: str, out_file: str, post: str) -> str:
    """One line: the command, verbatim as a ``$'…'`` word, into a variable; ``eval``'d with stdin from
    /dev/null and its output to ``out_file``; then the end-of-command report ``post``. (Nothing the
    shell reads byte by byte, as it reads a here-document, and no ``/dev/null`` around ``set +x``: with
    ``set -x`` its trace goes to the terminal before the report's BEGIN, where the host ignores it.)"""
    body = command if command.endswith("\n") else command + "\n"
    return (
        f"__fte_c={ansi_c_quoted(body)}; \\builtin eval \"$__fte_c\" </dev/null >|{out_file} 2>&1; "
        + "__fte_st=$? __fte_f=$-; \\builtin set +x; "
        + post
    )


class ShellSession:
    """A persistent bash session in one box (not thread-safe: one command at a time)."""

    def __init__(self, box: Box, cfg: SandboxConfig):
        self.box = box
        self.cfg = cfg
        self.cwd = "/work"
        self._shell: StartedShell | None = None
        """The last shell started (its pid and clock outlive its stream: a wedged one is killed by pid)."""
        self._child: ShellStream | None = None
        self._exec: Spawn | None = None
        self._seq = 0
        self._rest = bytearray()
        self._swept_seen = False
        self._starter = ShellStarter(box, cfg)
        self._start_cs = 0
        """When the running command was sent, in hundredths of a second of the box's clock."""

    # --- lifecycle -------------------------------------------------------------------------------------
    def start(self, prelude: Sequence[str] = (), *, by_warden: bool = False) -> None:
        """Start the shell in ``self.cwd`` and wait until it is ready (:meth:`.ShellStarter.start`)."""
        shell = self._shell = self._starter.start(self.cwd, prelude, by_warden=by_warden)
        self._exec, self._child = shell.exec, shell.stream

    def close(self) -> None:
        self._kill_child()

    def _kill_child(self) -> None:
        self._rest = bytearray()
        self._exec = None
        if self._child is not None:
            with contextlib.suppress(Exception):  # closing a broken stream
                self._child.close(force=True)
            self._child = None

    @property
    def alive(self) -> bool:
        return self._child is not None and self._child.isalive()

    # --- commands --------------------------------------------------------------------------------------
    def run(self, command: str, timeout: float) -> Observation:
        """Run ``command`` in the persistent shell; never raises for anything the command does."""
        t_start = time.monotonic()
        if "\x00" in command:
            return Observation(
                "the command contains a NUL character, which bash cannot hold; nothing was run",
                exit_code=None,
                duration_s=0.0,
            )
        restarted = False
        if not self.alive:
            self._restart()
            restarted = True
        self._seq += 1
        nonce = secrets.token_hex(12)
        out_file = f"{RUN}/o.{self._seq}"
        cap = self.cfg.output_cap_bytes
        head, tail = split_cap(cap)
        post = f"\\__fte_post {nonce} {out_file} {cap} {head} {tail}\n"
        payload = command_payload(command, out_file, post)
        assert self._shell is not None  # started: alive, or restarted above
        box_now = time.clock_gettime(time.CLOCK_BOOTTIME) + self._shell.clock_offset
        self._start_cs = int(box_now * 100)  # early
        res = self._send(payload.encode("utf-8", "surrogateescape")) or self._collect(
            nonce, time.monotonic() + timeout
        )
        timed_out = False
        if res == "timeout":
            timed_out = True
            res = self._after_timeout(nonce, post)
        if isinstance(res, _Eof):
            # the shell died during the command (exit, exec, kill -9 $$, set -e): restart, then show
            # what the command wrote before it died
            self._restart()
            restarted = True
            res = self._recover(nonce, post, res.code)
        elif not isinstance(res, _End):  # the shell is wedged: kill it, start a fresh one, recover output
            self._hard_restart()
            restarted = True
            res = self._recover(nonce, post, None)
        if res.cwd:
            self.cwd = res.cwd
        text, truncated, note = reported_text(res.data, res.size, cap, self.cfg.output_buffer_size)
        return Observation(
            output=text,
            exit_code=None if timed_out else res.status,
            timed_out=timed_out,
            truncated=truncated,
            duration_s=time.monotonic() - t_start,
            restarted=restarted,
            timeout_s=timeout,
            note=note,
        )

    # --- reading ---------------------------------------------------------------------------------------
    def _collect(
        self, nonce: str, deadline: float, *, stop_on_swept: bool = False, skip_end: bool = False
    ) -> _End | _Eof | str:
        """Read until the END marker of ``nonce``; "timeout", "swept" or an _Eof otherwise.

        ``skip_end``: the END was already seen, wait only for SWEPT. Bytes after what was found stay in
        ``self._rest`` for the next call."""
        child = self._child
        assert child is not None
        begin_m = f"\n__FTE_BEGIN_{nonce}\n".encode()
        nb = nonce.encode()  # one search for it finds the END and any BEGIN sent again
        end_p, begin_p = b"\n__FTE_END_", b"\n__FTE_BEGIN_"
        swept_m = b"\n__FTE_SWEPT\n"
        bound = 2 * self.cfg.output_cap_bytes + (1 << 20)
        buf, self._rest = self._rest, bytearray()
        begin, start = -1, 0  # start: where the output begins in buf (after the last BEGIN: one sent again)
        scan = 0  # the nonce cannot start before this offset of buf (searched already): a long output is O(n)
        while True:
            if stop_on_swept:
                w = buf.find(swept_m)
                b = buf.find(begin_m) if (begin < 0 and not skip_end) else -1
                if w >= 0 and begin >= 0:  # the warden wrote while the output was streaming
                    del buf[w : w + len(swept_m)]
                    self._swept_seen, scan, start = True, 0, 0
                elif w >= 0 and (b < 0 or w < b):
                    self._rest = buf[w + len(swept_m) :]
                    return "swept"
            if begin < 0 and not skip_end:
                i = buf.find(begin_m)
                if i >= 0:
                    del buf[: i + len(begin_m)]
                    begin, scan, start = 0, 0, 0
            if begin >= 0:
                j = buf.find(nb, scan)
                while j >= 0:
                    e = j + len(nb)
                    if e >= len(buf):  # what follows the nonce has not come yet
                        break
                    if buf[e] == 0x20 and buf[j - len(end_p) : j] == end_p:  # END <nonce> <status> …
                        k = buf.find(b"\n", e)
                        if k < 0:
                            break
                        status, size, cwd = end_fields(buf[e + 1 : k])
                        self._rest = buf[k:]
                        del buf[j - len(end_p) :]  # the output in place: no copy of a large one
                        del buf[:start]
                        return _End(buf, status, size, cwd)
                    if buf[e] == 0x0A and buf[j - len(begin_p) : j] == begin_p:  # a report sent again
                        start = e + 1
                    j = buf.find(nb, e)
                scan = j if j >= 0 else max(0, len(buf) - len(nb) + 1)
                if j < 0 and len(buf) > bound:  # noise written to the terminal directly: keep it bounded
                    del buf[bound // 2 : len(buf) - bound // 4]
                    scan, start = 0, 0
            elif len(buf) > 8192:  # before BEGIN: only noise; keep a tail for a split marker
                del buf[: len(buf) - 256]
            left = deadline - time.monotonic()
            if left <= 0:  # keep what was read: the caller may go on waiting
                self._rest = buf if begin < 0 else bytearray(begin_m) + buf
                return "timeout"
            try:
                buf += child.read_nonblocking(READ_BYTES, timeout=min(left, 3600))
            except pexpect.TIMEOUT:
                continue
            except (pexpect.EOF, OSError):  # OSError: the terminal was closed under us
                return _Eof(self._exit_code())

    def _send(self, data: bytes) -> _Eof | None:
        """Write to the shell's terminal; an _Eof when the shell is already gone."""
        assert self._child is not None
        try:
            self._child.send(data)
        except OSError:  # the terminal is closed: the shell died
            return _Eof(self._exit_code())
        return None

    def _exit_code(self) -> int | None:
        """The ended shell's exit status (128+N when killed by signal N), from the daemon."""
        child, tty_exec = self._child, self._exec
        self._child, self._exec = None, None
        if child is not None:
            with contextlib.suppress(Exception):
                child.close(force=True)
        return tty_exec.exit_code() if tty_exec is not None else None

    def _after_timeout(self, nonce: str, post: str) -> _End | _Eof | str:
        """Kill the command's processes (via the warden), then collect its partial output.

        The next command is sent only after the warden reported ``SWEPT`` (or its grace ran out), so a
        sweep never touches the next command's processes."""
        try:
            assert self._shell is not None  # a command ran in it
            write_sweep_request(self.box.gateway_dir, self._start_cs, self._shell.idle_stdout)
            self.box.signal_warden()
        except SandboxError:
            return "wedged"
        end: _End | None = None
        swept = False
        self._swept_seen = False
        deadline = time.monotonic() + SWEEP_GRACE_S
        while not swept:
            res = self._collect(nonce, deadline, stop_on_swept=True, skip_end=end is not None)
            if isinstance(res, _End):
                end = res
                swept = self._swept_seen
            elif res == "swept":
                swept = True
            else:  # EOF or no answer from the warden
                return res if end is None or isinstance(res, _Eof) else end
        if end is not None:
            return end
        time.sleep(0.05)  # let the shell act on the interrupt before it reads the next line
        resync = ("\n{ __fte_st=137 __fte_f=; } 2>/dev/null; " + post).encode()
        deadline = time.monotonic() + RESYNC_GRACE_S
        while True:
            res = self._send(resync) or self._collect(nonce, min(deadline, time.monotonic() + RESEND_S))
            if res != "timeout" or time.monotonic() >= deadline:
                return res

    def _recover(self, nonce: str, post: str, code: int | None) -> _End:
        """In a fresh shell, collect what the dead command wrote to its output file."""
        res = self._send((f"{{ __fte_st={code or 0} __fte_f=; }} 2>/dev/null; " + post).encode())
        res = res or self._collect(nonce, time.monotonic() + START_TIMEOUT_S)
        if not isinstance(res, _End):
            return _End(b"", code, -1, self.cwd)
        res.status = code
        return res

    # --- restarts --------------------------------------------------------------------------------------
    def _restart(self) -> None:
        self._kill_child()
        if not self.box.is_running():
            raise SandboxError(
                f"the sandbox container {self.box.id[:12]} is gone (TTL reached or removed)"
            )
        self.start()

    def _hard_restart(self) -> None:
        """The shell does not answer: kill it inside the container, then start a fresh one."""
        pid = self._shell.pid if self._shell is not None else None
        self._kill_child()
        if pid:
            with contextlib.suppress(Exception):  # the container may be gone; _restart says so
                self.box.exec(["kill", "-KILL", str(pid)])
        self._restart()


@dataclass
class _End:
    data: bytearray | bytes
    status: int | None
    size: int
    cwd: str


@dataclass
class _Eof:
    code: int | None
