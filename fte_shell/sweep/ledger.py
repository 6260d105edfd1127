"""The bookkeeping of one sweep invocation: which planned runs are still to do, the counts
(:class:`~.config.SweepStats`), the runs in flight, what an attempt's :class:`~.execute.Outcome` means
(a result; or an infrastructure failure: a line of ``failures.jsonl``, the outage gate told, the run put
back up to ``outage_retries`` times) and ``sweep.json``, refreshed every :data:`MANIFEST_EVERY_S`."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ..benchmarks.base import Dataset
from ..config import RunConfig
from ..episode.resume import stopped_here
from ..record.rundir import read_result
from ..record.sweepdir import ConfigChange, SweepDir
from ..stops import GAVE_UP, RESOURCE_OF, SweepStatus, is_infra_failure
from .config import BenchConfig, SweepStats, Task
from .execute import Outcome
from .failures import failure_row, record_raised
from .outage import Outages
from .state import now, run_state, write_manifest

MANIFEST_EVERY_S = 5.0
"""How often (at most) a running sweep refreshes the counts in ``sweep.json``."""

OnEvent = Callable[[str, Task, SweepStats], None]
"""``on_event(kind, task, stats)``: ``start``, ``done`` or ``failed`` of a run, for progress display."""


class Ledger:
    """The books of one invocation (thread-safe: the workers report to it concurrently)."""

    def __init__(self, bench: BenchConfig, dataset: Dataset, config: RunConfig, tasks: list[Task], *,
                 history: list[ConfigChange], t0: float, outages: Outages, on_event: OnEvent | None, log: Callable[[str], None]):
        self.bench, self.dataset, self.config, self.tasks = bench, dataset, config, tasks
        self.history, self.outages, self.on_event, self.log = history, outages, on_event, log
        self.stats = SweepStats(total=len(tasks))
        self.sweep_dir = SweepDir(Path(bench.out))
        self.started_at = now()
        self._t0 = t0
        self._last_manifest = time.monotonic()
        self._lock = threading.Lock()
        self._in_flight: dict[Path, Task] = {}
        self._redos: dict[Path, int] = {}
        self.sandboxes: dict[str, int] = {}
        """``provider/runtime`` -> runs done with it (shell profile; a remote run's own record, else the
        sweep's config)."""

    # --- the plan against what the sweep directory holds ------------------------------------------------
    @property
    def resumes(self) -> bool:
        """Whether a run stopped part-way is kept to be resumed in place (``run_question`` resumes it;
        :mod:`fte_shell.episode.resume`); a fork sweep's runs start over."""
        return self.bench.fork_from is None

    def to_do(self) -> list[Task]:
        """The planned runs without a result: a run with one is skipped; a partial or infrastructure-
        failed one is kept to be resumed where it stopped (deleted, to be redone from scratch, in a fork
        sweep or when it holds nothing to resume)."""
        todo: list[Task] = []
        for t in self.tasks:
            state = run_state(t.run_dir)
            if state == "done":
                self.stats.skipped += 1
                self._count_sandbox(t)
                continue
            if state in ("partial", "failed"):
                if not (self.resumes and stopped_here(t.run_dir)):
                    shutil.rmtree(t.run_dir, ignore_errors=True)
                self.stats.redone += 1
            todo.append(t)
        return todo

    # --- one attempt ---------------------------------------------------------------------------------------
    def started(self, t: Task) -> None:
        with self._lock:
            self._in_flight[t.run_dir] = t
        self._emit("start", t)

    def ended(self, t: Task, o: Outcome) -> bool:
        """Record how the attempt at ``t`` ended; True when it is to be redone (after an outage)."""
        if o.raised:
            record_raised(t, o.stop_reason, o.error or "")
        failed = is_infra_failure(o.stop_reason)
        resource = RESOURCE_OF.get(o.stop_reason)
        redo = False
        with self._lock:
            self._in_flight.pop(t.run_dir, None)
            if failed:
                self.sweep_dir.add_failure(failure_row(Path(self.bench.out), t, o.stop_reason, o.error))
                self.stats.failed += 1
                by = self.stats.failed_by_reason
                by[o.stop_reason] = by.get(o.stop_reason, 0) + 1
                if resource is not None and self._redos.get(t.run_dir, 0) < self.bench.outage_retries:
                    self._redos[t.run_dir] = self._redos.get(t.run_dir, 0) + 1
                    redo = True
            else:
                self.stats.done += 1
                self.stats.answered += o.answer is not None
                self._count_sandbox(t)
            if o.spent is not None:
                self.stats.tokens += o.spent[0]
                if o.spent[1] is not None:
                    self.stats.cost_usd = (self.stats.cost_usd or 0.0) + o.spent[1]
            self._checkpoint()
        if resource is not None:
            self.outages.report(resource, o.error)
        self._emit("failed" if failed else "done", t)
        return redo

    def _count_sandbox(self, t: Task) -> None:
        if t.profile != "shell":  # the only profile whose runs start a sandbox
            return
        rec = (read_result(t.run_dir) or {}).get("sandbox") or {}
        sb = self.config.sandbox
        key = f"{rec.get('provider', sb.provider)}/{rec.get('runtime', sb.runtime)}"
        self.sandboxes[key] = self.sandboxes.get(key, 0) + 1

    def forget(self, t: Task) -> None:
        """``t`` is no longer in flight and nothing of it is recorded (the sweep stopped, or its
        bookkeeping failed)."""
        with self._lock:
            self._in_flight.pop(t.run_dir, None)

    def discard_in_flight(self) -> None:
        """The runs still in flight after an interrupt: kept to be resumed at their last completed turn (a
        turn whose box was removed under it fails the resume's check and the run is redone), deleted in a
        fork sweep (their outcome is not trusted)."""
        with self._lock:
            for d in list(self._in_flight):
                if not self.resumes:
                    shutil.rmtree(d, ignore_errors=True)
                self.stats.lost += 1
            self._in_flight.clear()

    # --- sweep.json -------------------------------------------------------------------------------------
    def write(self, status: SweepStatus) -> None:
        self.stats.wall_s = time.monotonic() - self._t0
        write_manifest(self.bench, self.dataset, self.config, status, self.stats, self.started_at,
                       config_changes=self.history, sandboxes=dict(self.sandboxes))

    def finish(self) -> SweepStats:
        """The closing counts, written with the sweep's final status (interrupted, gave up or finished)."""
        self.outages.finish()
        s = self.stats
        s.gave_up = GAVE_UP.get(self.outages.gave_up or "")
        s.outages, s.outage_s = self.outages.count, round(self.outages.paused_s, 3)
        s.pending = sum(1 for t in self.tasks if run_state(t.run_dir) != "done")
        self.write("interrupted" if s.interrupted else s.gave_up or ("budget_reached" if s.budget_reached else "finished"))
        return s

    def _checkpoint(self) -> None:
        """Refresh sweep.json's counts now and then (called with the lock held)."""
        if time.monotonic() - self._last_manifest >= MANIFEST_EVERY_S:
            self._last_manifest = time.monotonic()
            self.write("running")

    def _emit(self, kind: str, t: Task) -> None:
        if self.on_event:
            try:
                self.on_event(kind, t, self.stats)
            except Exception as e:  # noqa: BLE001 - display problems never stop a sweep
                self.log(f"progress display failed: {e}")
