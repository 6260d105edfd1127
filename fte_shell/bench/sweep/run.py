"""``run_sweep``: run (or resume) a sweep — every (question, profile, repetition) into its own run
directory ``OUT/runs/<profile>/<qid>/r<k>/`` written by :func:`fte_shell.runner.run_question`.

Resume: a run whose ``result.json`` holds a result stop reason is done and skipped; one that ended for
an infrastructure reason (:func:`fte_shell.stops.is_infra_failure`), or a directory without
``result.json`` (partial), is deleted and redone. A sweep killed at any moment therefore loses at most
the runs in flight. When a run ends because the model endpoint, the Docker daemon or the search backend
is unavailable, no new run starts until a probe of it answers (:mod:`.outage`); the run is then redone.
On SIGINT/SIGTERM the sweep stops starting runs, removes this process's containers, deletes the runs that
were in flight and returns. docs/bench.md.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ...benchmarks.registry import load_dataset
from ...config import RunConfig
from ...errors import ConfigError, FteError
from ...stops import is_infra_failure
from .config import BenchConfig, RunFn, SweepStats, Task
from .execute import Executor, RemoteRuns, WorkQueue, thread_executor
from .failures import (
    GIVE_UP_STATUS,
    RESOURCE_OF,
    FailureLog,
    describe_exception,
    last_error,
    read_result,
    record_raised,
    stop_of_exception,
)
from .outage import Outages, Probe, default_probes
from .shared import prepare_shared, sweep_config
from .state import check_compatible, check_config, now, plan, run_state, write_manifest, write_questions

MANIFEST_EVERY_S = 5.0
"""How often (at most) a running sweep refreshes the counts in ``sweep.json``."""
GRACE_S = 10.0
"""Seconds an interrupted sweep waits for its in-flight runs before deleting them and returning."""


@contextlib.contextmanager
def _signals_to_interrupt() -> Iterator[None]:
    """SIGINT and SIGTERM raise KeyboardInterrupt in the main thread while inside (no-op elsewhere)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    prev = {s: signal.signal(s, _raise) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in prev.items():
            signal.signal(s, h)


def _remove_live_containers() -> None:
    try:
        from ...sandbox import stop_all_boxes

        stop_all_boxes()
    except Exception as e:  # noqa: BLE001 - best effort during shutdown; gc removes what is left
        print(f"fte-shell bench: could not remove containers: {e}", file=sys.stderr)


@dataclass
class Outcome:
    """How one attempt at a run ended."""

    stop_reason: str
    answer: str | None
    error: str | None


def _validate(bench: BenchConfig) -> None:
    if bench.runs < 1:
        raise ConfigError(f"--runs must be >= 1 (got {bench.runs})")
    if bench.concurrency < 1:
        raise ConfigError(f"--concurrency must be >= 1 (got {bench.concurrency})")
    if not bench.profiles:
        raise ConfigError("--profiles is empty")
    from ...profiles import PROFILES

    unknown = [p for p in bench.profiles if p not in PROFILES]
    if unknown:
        raise ConfigError(f"unknown profile(s): {', '.join(unknown)} (known: {', '.join(PROFILES)})")


def run_sweep(
    bench: BenchConfig,
    config: RunConfig,
    *,
    run_fn: RunFn | None = None,
    on_event: Callable[[str, Task, SweepStats], None] | None = None,
    log: Callable[[str], None] | None = None,
    executor: Executor | None = None,
    probes: dict[str, Probe] | None = None,
    remote: RemoteRuns | None = None,
) -> SweepStats:
    """Run (or resume) the sweep. ``on_event(kind, task, stats)`` is called with ``start``/``done``/
    ``failed`` for progress display; ``log`` gets one-line messages (outages, retries, set-up).
    ``executor`` runs the tasks (default :func:`~.execute.thread_executor`); ``remote`` carries out each
    run elsewhere (e.g. on a Ray cluster, one worker thread per slot); ``probes`` replaces the
    infrastructure probes. Returns the counts: ``stats.interrupted`` after SIGINT/SIGTERM,
    ``stats.gave_up`` when infrastructure stayed unavailable past ``bench.endpoint_wait_s``."""
    t0 = time.monotonic()
    _validate(bench)
    say = log or (lambda _m: None)
    dataset = load_dataset(bench.dataset, split=bench.split, limit=bench.limit, sample=bench.sample, seed=bench.seed)
    out = Path(bench.out)
    check_compatible(out, dataset)
    out.mkdir(parents=True, exist_ok=True)
    started = now()

    from ...model import ModelClient, resolve_endpoint

    model = ModelClient(config.model)  # fails fast without an endpoint; shared connection pool
    try:
        filled = sweep_config(bench, dataset, config, log)
        history, changed = check_config(out, filled, bench.allow_config_change)
        if changed:
            say("resuming with a changed configuration (recorded in sweep.json): " + "; ".join(changed))
        stop = threading.Event()
        base_url, api_key, _name = resolve_endpoint(config.model)
        outages = Outages(probes or default_probes(filled, base_url, api_key),
                          wait_s=bench.endpoint_wait_s, backoff_s=bench.probe_backoff_s, log=say, stop=stop)
        stats = SweepStats()
        tasks = plan(bench, dataset.questions)
        stats.total = len(tasks)

        def finish(status: str) -> SweepStats:
            outages.finish()
            stats.outages, stats.outage_s = outages.count, round(outages.paused_s, 3)
            stats.pending = sum(1 for t in tasks if run_state(t.run_dir) != "done")
            stats.wall_s = time.monotonic() - t0
            write_manifest(bench, dataset, filled, status, stats, started, config_changes=history)
            return stats

        needed = ["endpoint"] + (["sandbox"] if "shell" in bench.profiles else [])
        needed += ["search"] if filled.search.backend == "serper" else []
        write_questions(out, dataset.questions)
        try:
            ready = outages.preflight(needed)
        except KeyboardInterrupt:
            stop.set()  # ends the probe watchers
            raise
        if not ready:
            stats.gave_up = GIVE_UP_STATUS.get(outages.gave_up or "")
            return finish(stats.gave_up or "interrupted")
        if run_fn is None:
            from ...runner import run_question

            run_fn = run_question
        if "shell" in bench.profiles and (remote is None or remote.uses_local_docker):
            _prepare_sandbox(filled, log)
        shared = prepare_shared(bench, dataset, config, log, filled=filled)
        concurrency = bench.concurrency
        if remote is not None:
            run_fn, concurrency = remote.open(bench, dataset, shared, log)
        write_manifest(bench, dataset, shared.config, "running", stats, started, config_changes=history)

        todo: list[Task] = []
        for t in tasks:
            state = run_state(t.run_dir)
            if state == "done":
                stats.skipped += 1
                continue
            if state in ("partial", "failed"):
                shutil.rmtree(t.run_dir, ignore_errors=True)
                stats.redone += 1
            todo.append(t)

        lock = threading.Lock()
        in_flight: dict[Path, Task] = {}
        redos: dict[Path, int] = {}
        failures = FailureLog(out)
        work = WorkQueue(todo, may_start=outages.wait_open)
        last_manifest = [time.monotonic()]

        def checkpoint() -> None:
            """Refresh sweep.json's counts now and then (call with ``lock`` held)."""
            if time.monotonic() - last_manifest[0] >= MANIFEST_EVERY_S:
                last_manifest[0] = time.monotonic()
                stats.wall_s = time.monotonic() - t0
                write_manifest(bench, dataset, shared.config, "running", stats, started, config_changes=history)

        def emit(kind: str, t: Task) -> None:
            if on_event:
                try:
                    on_event(kind, t, stats)
                except Exception as e:  # noqa: BLE001 - display problems never stop a sweep
                    say(f"progress display failed: {e}")

        def attempt(t: Task) -> Outcome | None:
            """Run ``t`` (with immediate retries of unexpected harness errors); None when interrupted."""
            cfg = shared.config.model_copy(deep=True)
            cfg.agent.profile = t.profile
            if t.run_dir.exists():  # an earlier attempt of this invocation, redone after an outage
                shutil.rmtree(t.run_dir, ignore_errors=True)
            t.run_dir.parent.mkdir(parents=True, exist_ok=True)
            stop_reason, error = "failed", ""
            for i in range(bench.retries + 1):
                if i:
                    if stop.is_set():
                        break
                    say(f"retrying {t.run_dir} after: {error.splitlines()[0]}")
                    shutil.rmtree(t.run_dir, ignore_errors=True)
                try:
                    res = run_fn(
                        t.question.question, cfg, t.run_dir,
                        search=shared.search, page_source=shared.page_source, page_cache=shared.page_cache,
                        qid=f"{t.question.id}-{t.profile}-r{t.rep}", model=model,
                        meta={"qid": t.question.id, "rep": t.rep, "dataset": dataset.source},
                    )
                except Exception as e:  # noqa: BLE001 - a failed run is recorded and the sweep goes on
                    stop_reason, error = stop_of_exception(e), describe_exception(e)
                    done = read_result(t.run_dir)
                    if done is not None and not is_infra_failure(done.get("stop_reason")):
                        # the run finished (result.json has a result); only the clean-up after it failed
                        say(f"{t.run_dir}: the clean-up after the run failed ({error.splitlines()[0]}); "
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
            if stop.is_set():
                return None
            record_raised(t, stop_reason, error)
            return Outcome(stop_reason, None, error)

        def run_one(t: Task) -> None:
            with lock:
                in_flight[t.run_dir] = t
            emit("start", t)
            try:
                o = attempt(t)
                if o is None or stop.is_set():  # in flight when the sweep was interrupted: not trusted
                    return
                resource = RESOURCE_OF.get(o.stop_reason)
                requeue = False
                with lock:
                    in_flight.pop(t.run_dir, None)
                    if is_infra_failure(o.stop_reason):
                        failures.add(t, o.stop_reason, o.error)
                        stats.failed += 1
                        stats.failed_by_reason[o.stop_reason] = stats.failed_by_reason.get(o.stop_reason, 0) + 1
                        if resource is not None and redos.get(t.run_dir, 0) < bench.outage_retries:
                            redos[t.run_dir] = redos.get(t.run_dir, 0) + 1
                            requeue = True
                    else:
                        stats.done += 1
                        stats.answered += o.answer is not None
                    checkpoint()
                if resource is not None:
                    outages.report(resource, o.error)
                if requeue:
                    work.put(t)
                emit("failed" if is_infra_failure(o.stop_reason) else "done", t)
            except Exception as e:  # noqa: BLE001 - bookkeeping failed (disk full?): say so, keep the worker
                with lock:
                    in_flight.pop(t.run_dir, None)
                say(f"could not record run {t.run_dir}: {e.__class__.__name__}: {e}")

        try:
            with _signals_to_interrupt():
                (executor or thread_executor)(work, run_one, min(concurrency, max(1, len(todo))))
        except KeyboardInterrupt:
            stop.set()
            work.close()
            stats.interrupted = True
            _remove_live_containers()
            work.wait_idle(GRACE_S)
            with lock:
                for d in list(in_flight):
                    shutil.rmtree(d, ignore_errors=True)
                    stats.lost += 1
                in_flight.clear()
        stats.gave_up = GIVE_UP_STATUS.get(outages.gave_up or "")
        stop.set()  # ends the probe watchers
        if stats.interrupted:
            return finish("interrupted")
        return finish(stats.gave_up or "finished")
    finally:
        if remote is not None:
            remote.close()
        model.close()


def _prepare_sandbox(cfg: RunConfig, log: Callable[[str], None] | None) -> None:
    """Check (or build) the sandbox image once, before the threads, and remove the containers of an
    earlier harness that was SIGKILLed."""
    from ...sandbox import get_provider

    provider = get_provider(cfg.sandbox.provider)
    provider.prepare(cfg.sandbox)
    try:
        removed = provider.gc(log=log).removed
    except FteError as e:
        removed = []
        if log:
            log(f"container gc skipped: {e}")
    if removed and log:
        log(f"removed {len(removed)} container(s) left by an earlier harness")
