"""What comes back from a box: the shell's stream (:class:`SocketSpawn`, pexpect over a connected
socket, e.g. the hijacked stream of a Docker exec; :class:`PtySpawn`, pexpect over a terminal's master,
e.g. a bwrap box's; or pexpect's own spawn of a process on a host terminal, e.g. ``podman exec -it``),
what the agent sees of one command (:class:`Observation`), and the turning of raw command output (any
bytes) into a bounded, clean text. A provider builds the stream when the shell starts; running a command
reads and writes it here, so no provider code runs per command.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pexpect
from pexpect.fdpexpect import fdspawn
from pexpect.spawnbase import SpawnBase

if TYPE_CHECKING:
    from .base import ShellStream

# CSI (ESC [ ... final), OSC (ESC ] ... BEL or ESC \), other two-byte ESC sequences, and 8-bit CSI.
_ANSI = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"
    r"|\x1b[@-Z\\-_]"
    r"|\x1b."
    r"|\x9b[0-?]*[ -/]*[@-~]"
)
# C0 controls except \t and \n, DEL, C1 controls (\r is removed too: it only moves the cursor).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


_C0 = bytes([*range(0x09), *range(0x0B, 0x20), 0x7F])
"""The bytes of the C0 controls :data:`_CONTROL` removes, and DEL."""
_C0_EACH = [bytes([c]) for c in _C0]


def clean_text(data: bytes | bytearray | str) -> str:
    """Decode UTF-8 with replacement, strip ANSI escape sequences and control characters except \\n, \\t.

    Carriage returns: ``\\r\\n`` becomes ``\\n``; a lone ``\\r`` is removed.

    Valid UTF-8 without ESC and without the lead byte 0xC2 of the C1 controls (most output) takes a
    short way with the same result: its C0 controls deleted as bytes, then decoded (a regular expression
    over the text takes 10-40 ms per MB here; this under 1 ms when there are none).
    """
    if not isinstance(data, str) and b"\x1b" not in data and b"\xc2" not in data:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:  # a control byte may split an invalid sequence: the long way
            pass
        else:  # a short output: one copy; a long one: one memchr per control byte, no copy when it has none
            if len(data) <= 4096:
                kept = data.translate(None, _C0)
                return text if len(kept) == len(data) else kept.decode("utf-8")
            return data.translate(None, _C0).decode("utf-8") if any(c in data for c in _C0_EACH) else text
    text = data.decode("utf-8", errors="replace") if not isinstance(data, str) else data
    if "\x1b" in text or "\x9b" in text:
        text = _ANSI.sub("", text)
    text = text.replace("\r\n", "\n")
    return _CONTROL.sub("", text)


def truncation_line(omitted: int, note: str = "") -> str:
    """The line that replaces the middle of a long output."""
    extra = f"; {note}" if note else ""
    return f"[... output truncated: {omitted:,} bytes omitted{extra} ...]"


def _cut_utf8(data: bytes | bytearray, n: int, *, from_end: bool = False) -> bytes | bytearray:
    """At most ``n`` bytes of ``data`` without splitting a UTF-8 character at the cut."""
    if len(data) <= n:
        return data
    if not from_end:
        cut = n
        while cut > 0 and cut > n - 4 and (data[cut] & 0xC0) == 0x80:
            cut -= 1
        return data[: cut if (data[cut] & 0xC0) != 0x80 else n]
    start = len(data) - n
    s = start
    while s < len(data) and s < start + 4 and (data[s] & 0xC0) == 0x80:
        s += 1
    return data[s:]


def split_cap(cap: int) -> tuple[int, int]:
    """How many raw bytes of head and of tail a capped observation keeps."""
    head = max(cap // 2, 0)
    return head, max(cap - head, 0)


def align_to_lines(head: bytes | bytearray, tail: bytes | bytearray, omitted: int
                   ) -> tuple[bytes | bytearray, bytes | bytearray, int]:
    """Cut the head after its last newline and start the tail after its first one, when that loses at
    most a quarter of each, so the truncation line sits between whole lines. Returns the new head, tail
    and omitted count (which grows by what was cut)."""
    i = head.rfind(b"\n")
    if i >= 0 and len(head) - (i + 1) <= len(head) // 4:
        omitted += len(head) - (i + 1)
        head = head[: i + 1]
    j = tail.find(b"\n")
    if 0 <= j < len(tail) - 1 and j + 1 <= len(tail) // 4:
        omitted += j + 1
        tail = tail[j + 1 :]
    return head, tail, omitted


def join_head_tail(head: bytes | bytearray, tail: bytes | bytearray, omitted: int, note: str = "") -> str:
    """Clean a head and a tail (aligned to whole lines when cheap) and join them with the truncation
    line."""
    head, tail, omitted = align_to_lines(head, tail, omitted)
    h = clean_text(head)
    t = clean_text(tail)
    if h and not h.endswith("\n"):
        h += "\n"
    return f"{h}{truncation_line(omitted, note)}\n{t}"


def cap_output(data: bytes | bytearray, cap: int) -> tuple[str, bool]:
    """Clean ``data`` and keep at most ``cap`` raw bytes of it: a head and a tail around a line like
    ``[... output truncated: 1,234,567 bytes omitted ...]``. Returns ``(text, truncated)``."""
    if cap <= 0:
        return (truncation_line(len(data)) if data else ""), bool(data)
    if len(data) <= cap:
        return clean_text(data), False
    nh, nt = split_cap(cap)
    head = _cut_utf8(data, nh)
    tail = _cut_utf8(data, nt, from_end=True) if nt else b""
    return join_head_tail(head, tail, len(data) - len(head) - len(tail)), True


def reported_text(data: bytes | bytearray, size: int, cap: int, buffer_size: str) -> tuple[str, bool, str]:
    """(text, truncated, note) of what the shell's end-of-command report sent: all of the output when
    ``size`` < 0, else, of an output of ``size`` bytes, its first ``cap`` + 1 bytes and its last
    ``tail`` (:func:`split_cap`; the head is the first ``head`` of them); the note says when the output
    filled the box's ``buffer_size`` output buffer."""
    if size < 0:
        text, truncated = cap_output(data, cap)
        return text, truncated, ""
    note = ""
    full = size_bytes(buffer_size)
    if full and size >= full - 65536:
        note = (
            f"the output reached the {buffer_size} output buffer; what came after "
            "was discarded (the writer got 'No space left on device')"
        )
    head, tail = split_cap(cap)
    if len(data) == cap + 1 + tail:
        return join_head_tail(data[:head], data[cap + 1 :], size - head - tail), True, note
    text, _ = cap_output(data, cap)
    return text, True, note


@dataclass
class Observation:
    """The result of one command, as the agent (and the researcher) sees it."""

    output: str
    """Merged stdout+stderr, decoded, cleaned and capped (head + tail with the omitted count)."""
    exit_code: int | None
    """The command's exit status (128+N when killed by signal N); None when it timed out or did not run."""
    timed_out: bool = False
    """The command hit its timeout and its processes were killed."""
    truncated: bool = False
    """The output was longer than the cap and its middle was omitted."""
    duration_s: float = 0.0
    """Wall-clock seconds from sending the command to having its observation."""
    restarted: bool = False
    """The shell died (or was wedged) and a fresh one was started in the previous working directory."""
    timeout_s: float | None = None
    """The timeout that applied (for the note)."""
    note: str = ""
    """Extra information for the agent (e.g. the output buffer filled up, the budget is spent)."""
    cwd: str | None = None
    """The shell's working directory after the command (None: the command did not run)."""

    def render(self) -> str:
        """The text the model sees: the output, then one note per unusual event."""
        parts = [self.output.rstrip("\n")] if self.output.strip() else ["(no output)"]
        if self.timed_out:
            t = f"{self.timeout_s:g} s" if self.timeout_s is not None else "its time limit"
            parts.append(f"[timed out after {t}; the process was killed; partial output above]")
        elif self.exit_code not in (0, None):
            parts.append(f"[exit code {self.exit_code}]")
        if self.restarted:
            parts.append(
                "[the shell was restarted (it exited or had to be killed): the working directory was kept; "
                "shell variables, functions and aliases were reset]"
            )
        if self.note:
            parts.append(f"[{self.note}]")
        return "\n".join(parts)


def size_bytes(text: str) -> int:
    """Bytes of a size string like ``16m`` (a config's tmpfs or buffer size; 0 when unparsable)."""
    t = text.strip().lower().rstrip("b")
    mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(t[-1:], 1)
    try:
        return int(float(t[:-1] if t[-1:] in "kmg" else t) * mult)
    except ValueError:
        return 0


class SocketSpawn(SpawnBase):
    """pexpect over a connected socket (the hijacked stream of a ``tty`` exec): ``send``,
    ``read_nonblocking(size, timeout)`` and, from :class:`~pexpect.spawnbase.SpawnBase`, ``expect``.

    Writes go out whole (``sendall``) and at once (there is no ``delaybeforesend``); reads wait with
    ``poll`` (no ``select`` limit on descriptor numbers). EOF is the daemon closing the stream: the
    process ended."""

    def __init__(
        self, sock: socket.socket, *, initial: bytes = b"", maxread: int = 1 << 20, timeout: float = 30
    ):
        super().__init__(timeout=timeout, maxread=maxread)
        self.delaybeforesend = None  # as tuned for the pty spawn (send never sleeps here anyway)
        self.sock = sock
        self.child_fd = sock.fileno()
        self.closed = False
        self.name = f"<docker exec socket {self.child_fd}>"
        self._pending = bytes(initial)
        self._poll = select.poll()
        self._poll.register(self.child_fd, select.POLLIN | select.POLLPRI)

    def send(self, s: bytes | str) -> int:
        b = self._encoder.encode(self._coerce_send_string(s), final=False)
        self._log(b, "send")
        self.sock.sendall(b)
        return len(b)

    def sendline(self, s: bytes | str = "") -> int:
        return self.send(self._coerce_send_string(s) + self.linesep)

    def _buffered(self) -> bool:
        pending = getattr(self.sock, "pending", None)  # an SSL socket may hold decrypted bytes
        return bool(self._pending) or bool(pending and pending())

    def read_nonblocking(self, size: int = 1, timeout: float | None = -1) -> Any:
        if self.closed:
            raise ValueError("I/O operation on a closed socket")
        if self._pending:
            s, self._pending = self._pending[:size], self._pending[size:]
            return self._decoder.decode(s, final=False)
        if timeout == -1:
            timeout = self.timeout
        if not self._buffered():
            ready = self._poll.poll(None if timeout is None else max(0, int(timeout * 1000)))
            if not ready:
                raise pexpect.TIMEOUT("Timeout exceeded.")
        try:
            s = self.sock.recv(size)
        except (ConnectionError, OSError) as e:
            self.flag_eof = True
            raise pexpect.EOF(f"the exec's stream broke: {e}") from e
        if not s:
            self.flag_eof = True
            raise pexpect.EOF("End Of File (EOF): the exec's stream was closed.")
        self._log(s, "read")
        return self._decoder.decode(s, final=False)

    def isalive(self) -> bool:
        """False once the stream has ended (checked without consuming anything)."""
        if self.closed or self.flag_eof:
            return False
        if self._pending:
            return True
        events = self._poll.poll(0)
        if not events:
            return True
        if events[0][1] & (select.POLLHUP | select.POLLERR | select.POLLNVAL):
            return False
        try:
            peek = self.sock.recv(1, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            return True
        except (OSError, ValueError):  # ValueError: an SSL socket takes no flags; poll said readable
            return True
        return bool(peek)

    def close(self, force: bool = True) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self.child_fd = -1


class PtySpawn(fdspawn):
    """pexpect over the master of a terminal whose slave side ``proc`` (the entered shell) holds: alive
    while ``proc`` runs; closing kills ``proc`` and closes the master."""

    def __init__(self, fd: int, proc: subprocess.Popen, *, timeout: float = 30, maxread: int = 1 << 20):
        super().__init__(fd, timeout=timeout, maxread=maxread, use_poll=True)
        self.delaybeforesend = None
        self._proc = proc

    def isalive(self) -> bool:
        return not self.closed and self._proc.poll() is None

    def close(self, force: bool = True) -> None:
        if self.closed:
            return
        if self._proc.poll() is None:
            with contextlib.suppress(OSError):
                self._proc.kill()
        super().close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=5)


class ChannelStream:
    """A :class:`~.base.ShellStream` that writes to the shell's stdin FIFO and reads its stdout FIFO
    and its terminal (merged, the FIFO first); it has ended when the terminal has. Made by
    :func:`~.channel.open_channel` (the channel past the engine's relay)."""

    def __init__(self, tty: ShellStream, rfd: int, wfd: int, paths: list[Path], box_stdout: str):
        self.tty = tty
        self.box_stdout = box_stdout
        """The shell's stdout FIFO as the box names it (the warden tells a running command by it)."""
        self.child_fd = rfd
        self.pid = getattr(tty, "pid", None)  # a client process's (podman exec), for whoever counts them
        self._rfd: int | None = rfd
        self._wfd: int | None = wfd
        self._paths = paths
        self._poll = select.poll()
        self._poll.register(rfd, select.POLLIN)
        self._poll.register(tty.child_fd, select.POLLIN | select.POLLPRI)  # type: ignore[attr-defined]

    def send(self, s: bytes | str) -> int:
        data = memoryview(s.encode() if isinstance(s, str) else s)
        done = 0
        while done < len(data):
            if self._wfd is None:
                raise OSError("the shell's command channel is closed")
            try:
                done += os.write(self._wfd, data[done:])
            except BlockingIOError:  # the shell has not read the last 64 KiB yet
                if not self.tty.isalive():
                    raise OSError("the shell ended") from None
                out = select.poll()
                out.register(self._wfd, select.POLLOUT)
                out.poll(1000)
        return done

    def read_nonblocking(self, size: int = 1, timeout: float | None = -1) -> Any:
        if getattr(self.tty, "_pending", b""):  # bytes the terminal stream already holds
            return self.tty.read_nonblocking(size, 0)
        ms = None if timeout is None or timeout < 0 else max(0, int(timeout * 1000))
        events = dict(self._poll.poll(ms))
        if not events:
            raise pexpect.TIMEOUT("Timeout exceeded.")
        if self._rfd is not None and self._rfd in events:
            try:
                data = os.read(self._rfd, size)
            except BlockingIOError:
                data = None
            if data:
                return data
            if data == b"":  # every writer closed: the shell ended (its terminal says so next)
                self._poll.unregister(self._rfd)
                self._rfd = None
        if len(events) > 1 or self._rfd not in events:
            return self.tty.read_nonblocking(size, 0)
        raise pexpect.TIMEOUT("nothing yet")

    def isalive(self) -> bool:
        return self.tty.isalive()

    def close(self, force: bool = True) -> None:
        for fd in (self._rfd, self._wfd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._rfd = self._wfd = None
        for p in self._paths:
            p.unlink(missing_ok=True)
        self.tty.close(force=force)
