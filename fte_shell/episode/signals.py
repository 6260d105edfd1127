"""SIGTERM as an interrupt: THE two ways fte-shell turns SIGTERM into ``KeyboardInterrupt`` in the main
thread, so a killed run records ``interrupted``, writes ``result.json`` and closes its box.

- :func:`sigterm_as_interrupt`: for fte-shell's own programs (``run_question``, the sweep), which own the
  process: installed unconditionally while inside, the previous handler restored after.
- :func:`sigterm_as_interrupt_if_unowned`: for an :class:`~fte_shell.episode.Episode` embedded in another
  program: installed only in the main thread and only while SIGTERM's handler is still the default (or
  the sandbox's own :func:`~fte_shell.sandbox.base.exit_on_sigterm`, which stands for the default), so a
  host's own handler is never replaced; the handler it replaced is put back when the last such episode
  closes.

SIGINT raises ``KeyboardInterrupt`` by itself. Outside the main thread neither does anything (Python sets
handlers only there); a box whose owner is killed is still removed by its provider's warden.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from typing import Any

from ..sandbox.base import exit_on_sigterm

_count_lock = threading.Lock()
_open_episodes = 0
"""Episodes inside :func:`sigterm_as_interrupt_if_unowned` that installed or share its handler."""
_replaced: Any = signal.SIG_DFL
"""The handler :func:`sigterm_as_interrupt_if_unowned` replaced (the default, or the sandbox's)."""
_UNOWNED = (signal.SIG_DFL, exit_on_sigterm)


def _raise(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _raise_while_open(signum: int, frame: object) -> None:
    if _open_episodes > 0:
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signum, _replaced)  # no episode left: what the replaced handler does
    if callable(_replaced):
        _replaced(signum, frame)
    os.kill(os.getpid(), signum)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While inside, SIGTERM raises KeyboardInterrupt in the main thread (so the loop records
    ``interrupted``, writes ``result.json`` and the profile is closed; the sweep uses it too — SIGINT
    raises KeyboardInterrupt by itself). No-op outside the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def sigterm_as_interrupt_if_unowned() -> Iterator[None]:
    """While inside, SIGTERM raises KeyboardInterrupt in the main thread — through this module's handler,
    installed only when nobody else handles SIGTERM (its handler is the default or the sandbox's
    :func:`~fte_shell.sandbox.base.exit_on_sigterm`). No-op outside the main thread."""
    global _open_episodes, _replaced
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    current = signal.getsignal(signal.SIGTERM)
    if current in _UNOWNED:
        _replaced = current
        signal.signal(signal.SIGTERM, _raise_while_open)
    with _count_lock:
        _open_episodes += 1
    try:
        yield
    finally:
        with _count_lock:  # the episode may be closed in another thread (``aclose``)
            _open_episodes -= 1
        if (_open_episodes == 0 and threading.current_thread() is threading.main_thread()
                and signal.getsignal(signal.SIGTERM) is _raise_while_open):  # closed elsewhere: see _raise_while_open
            signal.signal(signal.SIGTERM, _replaced)
