"""The worker threads of the async episode API (``aopen``, ``acall``, ``afinish``, ``aclose``).

A box's start, a command and a close block on the box; the async methods run them here, in a pool of
this module's own (:data:`THREADS` threads, started as needed, idle ones costing nothing), not in the
event loop's default executor: that one has ``min(32, cores + 4)`` threads (6 on a 2-core machine), so a
burst of starts would hold every one of them and the first commands of the episodes already open would
queue behind the remaining starts. The caller's loop and its default executor are left as they are.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, TypeVar

THREADS = 256
"""Most episode calls running at once in one process (each waits on its box almost all the time)."""

T = TypeVar("T")
_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="fte-episode")
        return _pool


def in_thread(fn: Callable[..., T], /, *args: Any, **kw: Any) -> asyncio.Future[T]:
    """``fn(*args, **kw)`` in an episode worker thread, with the caller's context variables (as
    :func:`asyncio.to_thread`)."""
    ctx = contextvars.copy_context()
    return asyncio.get_running_loop().run_in_executor(_executor(), functools.partial(ctx.run, fn, *args, **kw))


class _Ends(Protocol):
    """What :func:`closed_if_cancelled` opens (an :class:`~fte_shell.episode.Episode`)."""

    def end(self, *, why: BaseException | None = None) -> Any: ...


E = TypeVar("E", bound=_Ends)


async def closed_if_cancelled(opening: asyncio.Future[E]) -> E:
    """What ``opening`` (an :func:`in_thread` future opening an episode) gives; cancelled while it runs,
    the episode opened meanwhile is ended as the cancellation says (``interrupted``) when it comes, in a
    worker thread: never left open."""
    try:
        return await asyncio.shield(opening)
    except asyncio.CancelledError as e:
        why = e  # (the ``as`` name is gone after the block; the callback runs later)
        opening.add_done_callback(lambda f: None if f.cancelled() or f.exception() is not None
                                  else in_thread(functools.partial(f.result().end, why=why)))
        raise
