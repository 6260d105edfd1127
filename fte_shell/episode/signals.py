"""SIGTERM as an interrupt: THE two ways fte-shell turns SIGTERM into ``KeyboardInterrupt`` in the main
thread, so a killed run records ``interrupted``, writes ``result.json`` and closes its box.

- :func:`sigterm_as_interrupt`: for fte-shell's own programs (``run_question``, the sweep), which own the
  process: installed unconditionally while inside, the previous handler restored after.
- :func:`sigterm_as_interrupt_if_unowned`: for an :class:`~fte_shell.episode.Episode` embedded in another
  program: installed only in the main thread and only while SIGTERM's handler is still the default, so a
  host's own handler is never replaced; removed when the last such episode closes (if another handler
  was chained on top of it meanwhile, it is left there and acts as the default once no episode is open).

SIGINT raises ``KeyboardInterrupt`` by itself. Outside the main thread neither does anything (Python sets
handlers only there); a box whose owner is killed is still removed by its provider's warden.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator

_count_lock = threading.Lock()
_open_episodes = 0
"""Episodes inside :func:`sigterm_as_interrupt_if_unowned` that installed or share its handler."""


def _raise(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _raise_while_open(signum: int, frame: object) -> None:
    if _open_episodes > 0:
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signum, signal.SIG_DFL)  # no episode left: what the default handler does
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
    installed only when SIGTERM's handler is the default (a handler chained on top of it later, such as
    a sandbox provider's clean-up, still ends in it). No-op outside the main thread."""
    global _open_episodes
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _raise_while_open)
    with _count_lock:  # counted under another handler too: one chained on top of ours (a provider's) calls it
        _open_episodes += 1
    try:
        yield
    finally:
        with _count_lock:  # the episode may be closed in another thread (``aclose``)
            _open_episodes -= 1
        if (_open_episodes == 0 and threading.current_thread() is threading.main_thread()
                and signal.getsignal(signal.SIGTERM) is _raise_while_open):  # closed elsewhere: acts as the default
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
