"""A conversion worker process: its entry point and the pipe protocol both ends speak.

:mod:`fte_shell.fetch.pool` starts each worker as ``python -P -c BOOTSTRAP SYS_PATH PARENT_PID``; the
bootstrap sets ``sys.path`` to the parent's (as multiprocessing's spawn does) and calls :func:`main`. No
``__main__`` of the caller is ever imported: the worker's ``__main__`` is the bootstrap.

Protocol, one request at a time, over the worker's stdin and stdout (stray prints inside the worker go to
stderr): a frame is an 8-byte big-endian length and that many bytes.

* request (parent -> worker): a pickle of ``(op, args)``: ``("convert", convert_bytes's arguments)`` or
  ``("warm", ())`` (import the converters now; replies the worker's pid).
* reply (worker -> parent): a status byte and strings, each a 4-byte length and UTF-8 (surrogatepass):
  ``o`` title, text; ``r`` a :class:`FetchRefused` message; ``e`` ``"ExceptionClass: message"``;
  ``w`` the pid. Replies are data only: the worker parses hostile pages, so the parent decodes no pickle
  from it.

The worker leaves no orphan: idle, it exits at end of input (the parent closed the pipe or died). While
it converts, its stdin is in O_ASYNC mode with SIGIO at its default action, so the parent's death (the
pipe's last writer gone) makes the kernel kill it at once, even inside a long C call that holds the GIL.
A watchdog thread also exits it when its parent changes (a pipe end kept open by a process the parent
forked). It ignores SIGINT: a Ctrl-C in the terminal is the parent's to handle, which then stops its
workers.
"""

from __future__ import annotations

import fcntl
import os
import pickle
import signal
import struct
import sys
import threading
import time
from collections.abc import Callable

BOOTSTRAP = (
    "import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
    "from fte_shell.fetch.worker import main; main(int(sys.argv[2]))"
)
"""The worker's ``-c`` program: the parent's ``sys.path``, then :func:`main` with the parent's pid."""

_LEN = struct.Struct(">Q")
_STR = struct.Struct(">I")
WATCH_PARENT_S = 0.5
"""How often the worker checks that its parent is alive."""


class WorkerGone(Exception):
    """The worker's pipe closed: the worker (or, on its side, the parent) is gone."""


def write_frame(fd: int, payload: bytes) -> None:
    """Write one frame (raises ``OSError``/``BrokenPipeError`` if the other end is gone)."""
    data = memoryview(_LEN.pack(len(payload)) + payload)
    while data:
        data = data[os.write(fd, data) :]


def _read_exact(fd: int, n: int, wait: Callable[[], None] | None) -> bytes:
    chunks, left = [], n
    while left:
        if wait is not None:
            wait()
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise WorkerGone("pipe closed")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int, wait: Callable[[], None] | None = None) -> bytes:
    """Read one frame; ``wait()`` is called before every read (the parent's deadline check). Raises
    :class:`WorkerGone` at end of input."""
    (n,) = _LEN.unpack(_read_exact(fd, _LEN.size, wait))
    return _read_exact(fd, n, wait)


def pack_reply(status: bytes, *fields: str) -> bytes:
    """A reply: the status byte, then each string as length + UTF-8."""
    out = [status]
    for f in fields:
        b = f.encode("utf-8", "surrogatepass")
        out += [_STR.pack(len(b)), b]
    return b"".join(out)


def unpack_reply(payload: bytes) -> tuple[str, list[str]]:
    """``(status, strings)`` of a reply (raises ``ValueError``/``struct.error`` on a malformed one)."""
    status, fields, at = payload[:1].decode("ascii"), [], 1
    while at < len(payload):
        (n,) = _STR.unpack_from(payload, at)
        at += _STR.size
        if at + n > len(payload):
            raise ValueError("truncated reply")
        fields.append(payload[at : at + n].decode("utf-8", "surrogatepass"))
        at += n
    return status, fields


def _handle(op: str, args: tuple[object, ...]) -> bytes:
    from ..errors import FetchRefused
    from .convert import convert_bytes

    if op == "warm":
        import crawl4ai.html2text  # noqa: F401 - the slow import, done once per worker
        import lxml.cssselect  # noqa: F401

        return pack_reply(b"w", str(os.getpid()))
    try:
        title, text = convert_bytes(*args)  # type: ignore[arg-type]
    except FetchRefused as e:
        return pack_reply(b"r", e.message)
    except Exception as e:  # noqa: BLE001 - a converter bug is one line for the parent, not a dead worker
        return pack_reply(b"e", f"{e.__class__.__name__}: {e}")
    return pack_reply(b"o", title, text)


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(WATCH_PARENT_S)
    os._exit(0)


def main(parent: int) -> None:
    """Serve conversion requests on stdin until end of input or the parent's death."""
    from .convert import prepare_crawl4ai_env

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGIO, signal.SIG_DFL)  # SIGIO from stdin's hang-up ends the process
    fcntl.fcntl(0, fcntl.F_SETOWN, os.getpid())
    idle_flags = fcntl.fcntl(0, fcntl.F_GETFL)
    reply_fd = os.dup(1)
    os.dup2(2, 1)  # a library printing on stdout must not corrupt the protocol
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115 - fd 1 now is stderr
    if os.getppid() != parent:
        return
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True, name="watch-parent").start()
    prepare_crawl4ai_env()
    while True:
        try:
            request = read_frame(0)
        except WorkerGone:
            return
        op, args = pickle.loads(request)
        fcntl.fcntl(0, fcntl.F_SETFL, idle_flags | os.O_ASYNC)  # the parent sends nothing until the reply
        reply = _handle(op, args)
        fcntl.fcntl(0, fcntl.F_SETFL, idle_flags)
        write_frame(reply_fd, reply)
