"""stdin and stdout as event-loop pipes for the SDK's ``stdio_server(stdin, stdout)``.

The SDK's default streams are ``anyio.wrap_file`` objects: every line read, every write and every flush
is a hop to a worker thread (three per request and reply, ``mcp/server/stdio.py``: ``stdin_reader`` and
``stdout_writer``), about as much as the rest of a call costs (perf/mcp_overhead.py). These read and
write the pipes from the event loop. Like the SDK's own claim, they serve the wire from private copies
of fds 0 and 1 and point fd 0 at the null device and fd 1 at stderr meanwhile, so a stray write of any
library or child process cannot corrupt the wire; :func:`event_loop_stdio` gives both back at exit.

Only pipes and sockets are served this way (what a client that starts the server gives it): a terminal
or a file is left to the SDK's threads (O_NONBLOCK on a terminal would be shared with the shell).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import stat
from collections.abc import AsyncIterator

MAX_LINE = 64 << 20
"""The longest message line read (bytes): a longer one is dropped and answered as a parse error."""

BAD_LINE = "\x00 message longer than the server reads\n"
"""What a dropped line is handed on as: not JSON, so the SDK reports a parse error."""


class LineReader:
    """``async for line in reader``: decoded lines until EOF (``anyio.AsyncFile``'s iteration)."""

    def __init__(self, reader: asyncio.StreamReader):
        self._reader = reader

    def __aiter__(self) -> LineReader:
        return self

    async def __anext__(self) -> str:
        try:
            line = await self._reader.readline()
        except ValueError:  # over MAX_LINE: asyncio dropped it
            return BAD_LINE
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")


class LineWriter:
    """``await write(text)``, ``await flush()`` (what the SDK's writer calls)."""

    def __init__(self, writer: asyncio.StreamWriter):
        self._writer = writer

    async def write(self, text: str) -> None:
        self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self._writer.drain()


def _is_pipe(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


@contextlib.asynccontextmanager
async def event_loop_stdio() -> AsyncIterator[tuple[LineReader, LineWriter] | None]:
    """``(stdin, stdout)`` for ``stdio_server``, or None when fd 0 or 1 is not a pipe (then use the
    SDK's own). fds 0 and 1 are diverted while inside and given back after."""
    if not (_is_pipe(0) and _is_pipe(1)):
        yield None
        return
    loop = asyncio.get_running_loop()
    private = {fd: fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3) for fd in (0, 1)}
    null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    transports: list[asyncio.BaseTransport] = []
    try:
        os.dup2(null, 0)
        os.dup2(2, 1)
        reader = asyncio.StreamReader(limit=MAX_LINE)
        rt, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                             os.fdopen(private[0], "rb", buffering=0, closefd=False))
        transports.append(rt)
        wt, wp = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin,
                                               os.fdopen(private[1], "wb", buffering=0, closefd=False))
        transports.append(wt)
        yield LineReader(reader), LineWriter(asyncio.StreamWriter(wt, wp, None, loop))
    finally:
        for t in transports:
            t.close()
        for fd, copy in private.items():
            with contextlib.suppress(OSError):
                os.dup2(copy, fd)
            os.close(copy)
        os.close(null)
