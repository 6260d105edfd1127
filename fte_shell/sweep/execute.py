"""The attempt: where and how one run of a sweep is carried out.

Runs happen through a :class:`RemoteRuns`: :class:`LocalRuns` (the default: the runner in this process)
or another host's, e.g. :class:`fte_shell.distributed.RayExecutor` (one Ray task per run). Either way the
sweep's own worker threads (:func:`drain`, one per slot) take tasks from the :class:`WorkQueue` and call
:class:`Attempt` for each: the run, with immediate retries of unexpected harness errors, classified into
an :class:`Outcome`. What an outcome means for the sweep (counts, ``failures.jsonl``, redos after an
outage) is :mod:`.ledger`'s business.
"""

from __future__ import annotations

import shutil
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..episode.resume import stopped_here
from ..record.rundir import arm_name, last_error, read_result
from ..stops import is_infra_failure, stop_of_exception
from .config import RunFn, Task
from .failures import describe_exception
from .state import arm_config

if TYPE_CHECKING:  # pragma: no cover
    from ..model import ModelClient
    from .shared import Shared

Log = Callable[[str], None]


class RemoteRuns(Protocol):
    """Where the runs of a sweep happen. The sweep calls :meth:`open` once after its set-up, runs its
    worker threads (as many as :meth:`open` returns) with the returned run function in place of the
    local runner, :meth:`cancel` when it is interrupted, and :meth:`close` at the end. The run function
    writes the run directory (it alone, atomically) or raises."""

    uses_local_sandboxes: bool
    """Whether runs use this host's sandbox provider (the sweep then prepares it — image or rootfs — and
    gcs it first)."""

    def open(self, bench: Any, dataset: Any, shared: Any, log: Log | None) -> tuple[RunFn, int]:
        """Get ready; return the run function and how many runs to keep in flight."""
        ...

    def cancel(self) -> None:
        """Stop every run in flight (the sweep was interrupted: their outcome will not be trusted)."""
        ...

    def close(self) -> None:
        """Release what :meth:`open` set up."""
        ...


class LocalRuns:
    """Runs in this process: ``run_fn`` (default :func:`fte_shell.runner.run_question`) on
    ``bench.concurrency`` threads, each shell run in a box of this host's sandbox provider."""

    uses_local_sandboxes = True

    def __init__(self, run_fn: RunFn | None = None) -> None:
        self.run_fn = run_fn

    def open(self, bench: Any, dataset: Any, shared: Any, log: Log | None) -> tuple[RunFn, int]:
        if self.run_fn is None:
            from ..runner import run_question

            self.run_fn = run_question
        return self.run_fn, bench.concurrency

    def cancel(self) -> None:
        """Remove this process's containers at once: the runs in them end."""
        try:
            from ..sandbox import stop_all_boxes

            stop_all_boxes()
        except Exception as e:  # noqa: BLE001 - best effort during shutdown; gc removes what is left
            print(f"fte-shell bench: could not remove containers: {e}", file=sys.stderr)

    def close(self) -> None:
        """Nothing to release."""


@dataclass
class Outcome:
    """How one attempt at a run ended."""

    stop_reason: str
    answer: str | None
    error: str | None
    raised: bool = False
    """The harness raised instead of finishing the run: its ``result.json`` is the sweep's to write."""
    spent: tuple[int, float | None] | None = None
    """``(tokens, USD)`` the attempt spent, from its ``result.json`` (:func:`.pace.run_spend`)."""


class Attempt:
    """One attempt at a run: ``run_fn`` in a fresh directory, retried at once (``retries`` times) when
    the harness raised an unexpected exception; an exception that names the infrastructure is not
    retried (the outage handling redoes the run). Returns None when the sweep stopped meanwhile."""

    def __init__(self, run_fn: RunFn, shared: Shared, model: ModelClient, dataset_source: str, retries: int,
                 stop: threading.Event, log: Log, *, resumes: bool = False) -> None:
        self.run_fn, self.shared, self.model = run_fn, shared, model
        self.dataset_source, self.retries, self.stop, self.log = dataset_source, retries, stop, log
        self.resumes = resumes
        """A run stopped part-way (redone after an outage) is resumed in place, not deleted."""

    def __call__(self, t: Task) -> Outcome | None:
        cfg = arm_config(self.shared.config, t.profile, t.context, t.retriever, t.corpus)
        if t.run_dir.exists() and not (self.resumes and stopped_here(t.run_dir)):  # an earlier attempt, redone
            shutil.rmtree(t.run_dir, ignore_errors=True)
        t.run_dir.parent.mkdir(parents=True, exist_ok=True)
        stop_reason, error = "failed", ""
        for i in range(self.retries + 1):
            if i:
                if self.stop.is_set():
                    break
                self.log(f"retrying {t.run_dir} after: {error.splitlines()[0]}")
                shutil.rmtree(t.run_dir, ignore_errors=True)
            try:
                res = self._run(t, cfg)
            except Exception as e:  # noqa: BLE001 - a failed run is recorded and the sweep goes on
                stop_reason, error = stop_of_exception(e), describe_exception(e)
                done = read_result(t.run_dir)
                if done is not None and not is_infra_failure(done.get("stop_reason")):
                    # the run finished (result.json has a result); only the clean-up after it failed
                    self.log(f"{t.run_dir}: the clean-up after the run failed ({error.splitlines()[0]}); "
                             f"its result is kept")
                    return Outcome(str(done["stop_reason"]), done.get("answer"), None)
                if stop_reason != "failed":  # infrastructure is down: the outage handling redoes it
                    break
                continue
            result = read_result(t.run_dir)
            if result is None:  # defensive: the runner always writes it
                stop_reason, error = "failed", "the run ended without writing result.json"
                continue
            stop_reason = str(result.get("stop_reason") or getattr(res, "stop_reason", "") or "failed")
            if not is_infra_failure(stop_reason):
                return Outcome(stop_reason, result.get("answer"), None)
            return Outcome(stop_reason, None, result.get("error") or last_error(t.run_dir))
        if self.stop.is_set():
            return None
        return Outcome(stop_reason, None, error, raised=True)

    def _run(self, t: Task, cfg: Any) -> Any:
        s = self.shared
        arm = arm_name(t.profile, t.context.label if t.context else "keep_all", t.retriever, t.corpus)
        return self.run_fn(
            t.question.question, cfg, t.run_dir,
            world=s.world_for(t.retriever),
            qid=f"{t.question.id}-{arm}-r{t.rep}",
            model=self.model,
            meta={"qid": t.question.id, "rep": t.rep, "dataset": self.dataset_source, "arm": arm,
                  **({"corpus_in_box": True} if t.corpus else {})},
        )


class WorkQueue:
    """The runs still to do. :meth:`get` hands one out only while the gate (``may_start``) lets runs
    start, and keeps workers waiting while runs in flight may still put one back."""

    def __init__(self, tasks: Iterable[Task], *, may_start: Callable[[], bool] = lambda: True,
                 not_started: Callable[[], None] = lambda: None):
        self._tasks: deque[Task] = deque(tasks)
        self._may_start = may_start
        self._not_started = not_started
        """Called when the gate let a task through but the queue closed meanwhile (it stays undone)."""
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
                self._not_started()  # the gate's place is given back
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


def drain(work: WorkQueue, run_one: Callable[[Task], None], workers: int) -> None:
    """Run every task of ``work`` with ``run_one`` on ``workers`` daemon threads; the calling thread joins
    them in short steps, so a KeyboardInterrupt (SIGINT/SIGTERM in the main thread) reaches it at once."""

    def worker() -> None:
        while (t := work.get()) is not None:
            try:
                run_one(t)
            finally:
                work.done(t)

    threads = [threading.Thread(target=worker, name=f"bench-{i}", daemon=True) for i in range(max(1, workers))]
    for th in threads:
        th.start()
    while any(th.is_alive() for th in threads):
        for th in threads:
            th.join(timeout=0.2)
