"""The owner's reaper: a small watcher process that removes this process's boxes once it is gone,
however it went (SIGKILL included).

The first box a process starts (:func:`watch_owner`, called by :class:`~.facade.Sandbox` before the
provider starts it) spawns ``python -m fte_shell.sandbox.reaper`` in a session of its own, holding the
read end of a pipe whose write end only the owner holds. The owner writes each provider's name once;
when the pipe ends (the owner exited, crashed or was SIGKILLed: the kernel closes its descriptors), the
reaper runs each provider's gc (:func:`.ownership.stale_reason`: the boxes of a dead owner, temporary
directories included) now and again a few seconds later, for a box whose start was in flight when the
owner died. A clean exit has removed its boxes already: the gc then finds none of them.

Without it a Docker or podman box whose owner was SIGKILLed stays until its dead-man TTL
(``sandbox.ttl_s``) or the next ``fte-shell sandbox gc``; bwrap boxes die with their owner anyway
(``--die-with-parent``), and the reaper removes their temporary directories.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from typing import IO

from .base import get_provider

AGAIN_S = (0.0, 3.0, 10.0)
"""When the reaper runs gc after its owner is gone (seconds after): a box created while the owner died
has its labels by then."""

_lock = threading.Lock()
_pipe: IO[bytes] | None = None
_owner = 0
_named: set[str] = set()


def watch_owner(provider: str) -> None:
    """Make sure this process has a reaper and that it knows ``provider`` (idempotent, thread-safe; a
    forked child gets a reaper of its own). A reaper that cannot start is not an error: gc and the
    dead-man TTL remain."""
    global _pipe, _owner
    with _lock:
        if _owner != os.getpid():
            _pipe, _owner = None, os.getpid()
            _named.clear()
            with contextlib.suppress(OSError, ValueError):
                proc = subprocess.Popen(
                    [sys.executable, "-m", __name__], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL, start_new_session=True)
                _pipe = proc.stdin
                proc.returncode = 0  # never waited for: it outlives us by design (no ResourceWarning)
        if _pipe is None or provider in _named:
            return
        try:
            _pipe.write(f"{provider}\n".encode())
            _pipe.flush()
            _named.add(provider)
        except (OSError, ValueError):
            _pipe = None


def reap(providers: set[str]) -> None:
    """gc of each named provider at :data:`AGAIN_S` (errors ignored: best effort)."""
    t0 = time.monotonic()
    for at in AGAIN_S:
        time.sleep(max(0.0, at - (time.monotonic() - t0)))
        for name in sorted(providers):
            with contextlib.suppress(Exception):
                get_provider(name).gc()


def main() -> None:
    """The reaper: read provider names until the owner's pipe ends, then :func:`reap`."""
    names: set[str] = set()
    for line in sys.stdin.buffer:
        if name := line.decode(errors="replace").strip():
            names.add(name)
    if names:
        reap(names)


if __name__ == "__main__":
    main()
