"""Where a sweep hands its runs to workers: the :class:`WorkQueue` of tasks and the :data:`Executor` that
drains it. The default executor is :func:`thread_executor` (``concurrency`` threads in this process);
another executor (e.g. one task per run on a cluster) only has to take tasks with :meth:`WorkQueue.get`,
call ``run_one(task)`` for each, and :meth:`WorkQueue.done` after it.

``run_one`` does everything for one task — the run, its bookkeeping, and putting it back into the queue
when it must be redone after an outage — so an executor knows nothing about results or failures.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from .config import RunFn, Task

RunOne = Callable[[Task], None]
Executor = Callable[["WorkQueue", RunOne, int], None]
"""``executor(work, run_one, concurrency)``: run every task of ``work`` with at most ``concurrency`` in
flight; return when :meth:`WorkQueue.get` returns None to every worker. KeyboardInterrupt in the calling
thread propagates (the sweep then closes the queue and waits for the runs in flight)."""


class WorkQueue:
    """The runs still to do. :meth:`get` hands one out only while the gate (``may_start``) lets runs
    start, and keeps workers waiting while runs in flight may still put one back."""

    def __init__(self, tasks: Iterable[Task], *, may_start: Callable[[], bool] = lambda: True):
        self._tasks: deque[Task] = deque(tasks)
        self._may_start = may_start
        self._in_flight = 0
        self._closed = False
        self._cond = threading.Condition()

    def get(self) -> Task | None:
        """The next task to run (counted in flight until :meth:`done`), or None when there is none left
        and none in flight, or the queue is closed. Blocks while the gate is closed."""
        while True:
            with self._cond:
                while not self._closed and not self._tasks and self._in_flight:
                    self._cond.wait(timeout=0.5)
                if self._closed or not self._tasks:
                    return None
                t = self._tasks.popleft()
                self._in_flight += 1
            if self._may_start():  # outside the lock: may block for the length of an outage
                with self._cond:
                    if not self._closed:
                        return t
            with self._cond:  # the gate said stop, or the queue closed meanwhile: the task stays undone
                self._tasks.appendleft(t)
                self._in_flight -= 1
                self._closed = True
                self._cond.notify_all()
            return None

    def put(self, t: Task) -> None:
        """Put a task back (to be redone); call before :meth:`done` of the same attempt."""
        with self._cond:
            self._tasks.append(t)
            self._cond.notify_all()

    def done(self, t: Task) -> None:
        """The attempt at ``t`` that :meth:`get` handed out is over."""
        with self._cond:
            self._in_flight -= 1
            self._cond.notify_all()

    def close(self) -> None:
        """Hand out no more tasks."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def remaining(self) -> list[Task]:
        """Tasks never handed out (or put back and not taken again)."""
        with self._cond:
            return list(self._tasks)

    def wait_idle(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s for the runs in flight to end; True when none is left."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._in_flight:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(timeout=min(left, 0.2))
            return True


def thread_executor(work: WorkQueue, run_one: RunOne, concurrency: int) -> None:
    """Drain ``work`` on ``concurrency`` daemon threads; the calling thread joins them in short steps, so
    a KeyboardInterrupt (SIGINT/SIGTERM in the main thread) reaches it at once."""

    def worker() -> None:
        while (t := work.get()) is not None:
            try:
                run_one(t)
            finally:
                work.done(t)

    threads = [threading.Thread(target=worker, name=f"bench-{i}", daemon=True) for i in range(max(1, concurrency))]
    for th in threads:
        th.start()
    while any(th.is_alive() for th in threads):
        for th in threads:
            th.join(timeout=0.2)


class RemoteRuns(Protocol):
    """Runs carried out somewhere else (e.g. one Ray task per run, :class:`fte_shell.distributed.RayExecutor`),
    with this process's threads and bookkeeping: the sweep calls :meth:`open` once after its set-up, runs
    its usual workers (one per slot) with the returned ``run_fn`` in place of the local runner, and
    :meth:`close` at the end. ``run_fn`` writes the run directory (it alone, atomically) or raises."""

    uses_local_docker: bool
    """Whether runs use this host's Docker daemon (the sweep then checks its image and gcs it first)."""

    def open(self, bench: Any, dataset: Any, shared: Any, log: Callable[[str], None] | None) -> tuple[RunFn, int]: ...

    def close(self) -> None: ...
