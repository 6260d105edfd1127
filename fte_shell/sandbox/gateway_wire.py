"""The gateway's wire: one JSON line in, one JSON line out, over a unix stream socket (the request
format is in :mod:`.gateway`). Bounded: a request line of at most :data:`MAX_REQUEST_BYTES`, arriving
within :data:`REQUEST_TIMEOUT_S`; a client that went away is not an error."""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import socket
import socketserver
import time
from collections.abc import Callable
from typing import Any

MAX_REQUEST_BYTES = 128 * 1024
"""Largest request line accepted (room for MAX_URLS references of MAX_REF_CHARS each)."""

REQUEST_TIMEOUT_S = 10.0
"""Time a client has to send its whole request line."""



class RequestLineError(Exception):
    """The request line did not arrive whole (too large, too slow, connection error): a one-line reason."""


def read_request_line(conn: socket.socket) -> bytes:
    """The first line a client sent (without the newline); raises :class:`RequestLineError`."""
    deadline = time.monotonic() + REQUEST_TIMEOUT_S
    buf = bytearray()
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            raise RequestLineError(f"request not received within {REQUEST_TIMEOUT_S:g} s")
        conn.settimeout(left)
        try:
            chunk = conn.recv(65536)
        except TimeoutError:
            raise RequestLineError(f"request not received within {REQUEST_TIMEOUT_S:g} s") from None
        except OSError as e:
            raise RequestLineError(f"connection error: {e}") from None
        if not chunk:
            break
        buf += chunk
        if len(buf) > MAX_REQUEST_BYTES + 1:
            raise RequestLineError(f"request too large (over {MAX_REQUEST_BYTES:,} bytes)")
    line = bytes(buf).split(b"\n", 1)[0]
    if len(line) > MAX_REQUEST_BYTES:
        raise RequestLineError(f"request too large (over {MAX_REQUEST_BYTES:,} bytes)")
    return line


def send_response(conn: socket.socket, response: dict[str, Any]) -> None:
    """Send one JSON line; a client that went away (its command was killed) is ignored."""
    # "replace": a stray surrogate in a message must not cost the client its answer
    data = (json.dumps(response, ensure_ascii=False) + "\n").encode("utf-8", "replace")
    try:
        conn.settimeout(REQUEST_TIMEOUT_S)
        conn.sendall(data)
    except OSError:
        pass


class LineServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """A threaded unix-socket server handing each connection to ``serve(conn)``. :meth:`run` serves
    until :meth:`stop`, which ends it at once: no polling (``serve_forever`` wakes every poll interval
    and its ``shutdown`` waits for the next wake, up to the whole interval, in every box's close)."""

    daemon_threads = True
    block_on_close = False
    request_queue_size = 128

    def __init__(self, path: str, serve: Callable[[socket.socket], None]):
        self.serve = serve
        self._wake_r, self._wake_w = os.pipe()
        try:
            super().__init__(path, _Handler, bind_and_activate=True)
        except BaseException:
            os.close(self._wake_r)
            os.close(self._wake_w)
            raise

    def run(self) -> None:
        """Accept connections (each served in a thread of its own) until :meth:`stop`."""
        with selectors.DefaultSelector() as sel:
            sel.register(self, selectors.EVENT_READ)
            sel.register(self._wake_r, selectors.EVENT_READ)
            while True:
                ready = {key.fileobj for key, _ in sel.select()}
                if self._wake_r in ready:
                    return
                self._handle_request_noblock()

    def stop(self) -> None:
        """End :meth:`run` (now, or as soon as it starts)."""
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")

    def server_close(self) -> None:
        super().server_close()
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)


class _Handler(socketserver.BaseRequestHandler):
    server: LineServer

    def handle(self) -> None:
        self.server.serve(self.request)
