"""``run_sweep``: run (or resume) a sweep — every (question, profile, retriever, context arm, repetition) into
its own run directory ``OUT/runs/<arm>/<qid>/r<k>/`` (the arm: the profile, or ``profile@strategy`` for a
context strategy other than keep_all, ``profile@retriever[+strategy]`` with ``--retrievers``) — in three
steps:

1. **plan** (:mod:`.state`): the runs, the configuration checked against the sweep's, ``questions.jsonl``,
   the infrastructure probed (:mod:`.outage`);
2. **attempt** (:mod:`.execute`): worker threads take the runs still to do from a work queue and carry
   each out through a :class:`~.execute.RemoteRuns` — :class:`~.execute.LocalRuns` (this process) or
   e.g. a Ray cluster; a run starts only through the gates of :mod:`.pace` (the outage gate, the
   concurrency the endpoint's 429s allow, the sweep's budget);
3. **bookkeeping** (:mod:`.ledger`): counts, ``failures.jsonl``, the outage gate, ``sweep.json``.

Resume: a run whose ``result.json`` holds a result stop reason is done and skipped; one that ended for
an infrastructure reason (:func:`fte_shell.stops.is_infra_failure`), or a directory without
``result.json`` (partial), is resumed in place at its last completed turn (:mod:`fte_shell.episode.resume`;
redone from scratch when it cannot be). A sweep killed at any moment therefore loses at most the turns in
flight. When a run ends because the model endpoint, the sandbox provider or the search
backend is unavailable, no new run starts until a probe of it answers; the run is then redone. On
SIGINT/SIGTERM the sweep stops starting runs, stops the runs in flight (this process's boxes are removed),
waits up to :data:`GRACE_S` for them, deletes them and returns. docs/bench.md.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..benchmarks.registry import load_dataset
from ..config import RunConfig
from ..episode import sigterm_as_interrupt
from ..errors import ConfigError, FteError
from ..record.jsonio import DiskFull, is_disk_full
from ..record.rundir import read_result
from .config import BenchConfig, RunFn, SweepStats, Task
from .execute import Attempt, LocalRuns, RemoteRuns, WorkQueue, drain
from .ledger import Ledger, OnEvent
from .outage import Outages, default_probes
from .pace import Budget, Gates, Throttle, run_spend
from .shared import prepare_shared, sweep_config
from .state import (
    check_compatible,
    check_config,
    context_arms,
    plan,
    resumed_retriever,
    retriever_arms,
    run_digests,
    uses_boxes,
    write_questions,
)

if TYPE_CHECKING:
    from ..benchmarks.base import Dataset
    from ..model import ModelClient
    from ..model.prices import ModelPrice

GRACE_S = 10.0
"""Seconds an interrupted sweep waits for its in-flight runs before deleting them and returning."""


def run_sweep(
    bench: BenchConfig,
    config: RunConfig,
    *,
    run_fn: RunFn | None = None,
    on_event: OnEvent | None = None,
    log: Callable[[str], None] | None = None,
    remote: RemoteRuns | None = None,
) -> SweepStats:
    """Run (or resume) the sweep. ``on_event(kind, task, stats)`` is called with ``start``/``done``/
    ``failed`` for progress display; ``log`` gets one-line messages (outages, retries, set-up).
    ``remote`` carries out each run elsewhere (e.g. on a Ray cluster, one worker thread per slot); else
    ``run_fn`` runs it here (default :func:`fte_shell.runner.run_question`; for a fork sweep,
    ``bench.fork_from``, :class:`.fork.ForkRuns`). Returns the counts: ``stats.interrupted`` after SIGINT/SIGTERM,
    ``stats.gave_up`` when infrastructure stayed unavailable past ``bench.endpoint_wait_s``."""
    t0 = time.monotonic()
    _validate(bench)
    if bench.fork_from is not None:  # bench --fork-from: every run a fork of the parent sweep's
        if remote is not None:
            raise ConfigError("a fork sweep (--fork-from) runs in this process: --ray does not take it")
        if run_fn is None:
            from .fork import ForkRuns

            run_fn = ForkRuns(bench)
    say = log or (lambda _m: None)
    dataset = load_dataset(bench.dataset, split=bench.split, limit=bench.limit, sample=bench.sample, seed=bench.seed,
                           options=config.benchmark, log=say)
    out = Path(bench.out)
    check_compatible(out, dataset)
    out.mkdir(parents=True, exist_ok=True)
    runs = remote if remote is not None else LocalRuns(run_fn)

    from ..model import ModelClient
    from ..model.prices import price_for, unknown_price_note

    price = price_for(config.model)
    if price is None and config.budget.max_cost is not None:
        raise ConfigError(f"--max-cost needs a price: {unknown_price_note(config.model)}")
    model = ModelClient(config.model)  # fails fast without an endpoint; shared connection pool
    try:
        planned = _plan(bench, config, dataset, out, t0=t0, on_event=on_event, log=log)
        if not planned.ready:
            return planned.books.finish()
        return _attempt(bench, dataset, planned, runs, model, price, log)
    except OSError as e:  # a full disk: a write outside the record's writers (caches, directories)
        if is_disk_full(e):
            raise DiskFull(getattr(e, "filename", None) or out) from e
        raise
    finally:
        runs.close()
        model.close()


@dataclass
class _Planned:
    """What step 1 (plan) hands to step 2 (attempt)."""

    config: RunConfig
    """The sweep's configuration as given (with the retriever of a sweep recorded before ``[search] retriever``)."""
    filled: RunConfig
    """The sweep's configuration, filled from the dataset (:func:`.shared.sweep_config`)."""
    books: Ledger
    """The runs and their bookkeeping."""
    outages: Outages
    """The infrastructure's probes and gate."""
    stop: threading.Event
    """Set when the sweep ends (ends the probe watchers)."""
    ready: bool
    """The infrastructure answered the preflight probes."""


def _plan(bench: BenchConfig, config: RunConfig, dataset: Dataset, out: Path, *, t0: float,
          on_event: OnEvent | None, log: Callable[[str], None] | None) -> _Planned:
    """Step 1: the runs, the configuration checked against the sweep's, ``questions.jsonl``, the
    infrastructure probed."""
    from ..model import resolve_endpoint

    say = log or (lambda _m: None)
    config = resumed_retriever(out, config)  # a sweep recorded before [search] retriever: bm25s
    filled = sweep_config(bench, dataset, config, log)
    if bench.retrievers and filled.search.corpus is None:
        raise ConfigError(f"--retrievers compares retrievers of a local corpus; {bench.dataset} has none and "
                          "no [search] corpus is set")
    if bench.corpus_arm:
        _check_corpus_arm(bench, filled)
    arms = context_arms(bench, filled)
    history, changed = check_config(out, filled, bench.allow_config_change,
                                    run_digests(filled, bench.profiles, arms, retriever_arms(bench), bench.corpus_arm),
                                    retrievers=bool(bench.retrievers))
    if changed:
        say("resuming with a changed configuration (recorded in sweep.json): " + "; ".join(changed))
    stop = threading.Event()
    base_url, api_key, _name = resolve_endpoint(config.model)
    outages = Outages(default_probes(filled, base_url, api_key),
                      wait_s=bench.endpoint_wait_s, backoff_s=bench.probe_backoff_s, log=say, stop=stop)
    books = Ledger(bench, dataset, filled, plan(bench, dataset.questions, arms), history=history, t0=t0,
                   outages=outages, on_event=on_event, log=say)
    write_questions(out, dataset.questions)
    try:
        ready = outages.preflight(_needed(bench, filled))
    except KeyboardInterrupt:
        stop.set()  # ends the probe watchers
        raise
    return _Planned(config, filled, books, outages, stop, ready)


def _attempt(bench: BenchConfig, dataset: Dataset, planned: _Planned, runs: RemoteRuns,
             model: ModelClient, price: ModelPrice | None, log: Callable[[str], None] | None) -> SweepStats:
    """Step 2: the runs still to do, on worker threads through the gates; each run's step 3
    (bookkeeping) as it ends, the sweep's when all have."""
    say = log or (lambda _m: None)
    config, books, stop, out = planned.config, planned.books, planned.stop, Path(bench.out)
    if uses_boxes(bench.profiles) and runs.uses_local_sandboxes:
        _prepare_sandbox(planned.filled, log, corpus=bench.corpus_arm)
    shared = prepare_shared(bench, dataset, config, log, filled=planned.filled)
    run, slots = runs.open(bench, dataset, shared, log)
    books.write("running")
    todo = books.to_do()
    if price is not None:  # else the runs record tokens only (the command's closing line says so)
        books.stats.cost_usd = 0.0
    budget = _budget(config, books, todo, price, stop)
    workers = min(slots, max(1, len(todo)))
    throttle = Throttle(workers, log=say, stop=stop)
    books.stats.concurrency = books.stats.concurrency_lowest = workers
    gates = Gates(planned.outages.wait_open, throttle, budget)
    work = WorkQueue(todo, may_start=gates.may_start, not_started=lambda: gates.ended(None))
    attempt = Attempt(run, shared, model, dataset.source, bench.retries, stop, say, resumes=books.resumes)

    def run_one(t: Task) -> None:  # on a worker thread
        books.started(t)
        spent = None
        try:
            o = attempt(t)
            if o is None or stop.is_set():  # in flight when the sweep was interrupted: not trusted
                return
            spent = o.spent = run_spend(read_result(t.run_dir), price)
            if o.stop_reason == "disk_full":  # a full disk: nothing can be recorded; redone on resume
                books.forget(t)
                disk_full(t.run_dir)
                return
            # 3. bookkeeping
            books.stats.concurrency, books.stats.concurrency_lowest = throttle.allowed, throttle.lowest
            if books.ended(t, o):
                work.put(t)
        except Exception as e:  # noqa: BLE001 - bookkeeping failed (disk full?): say so, keep the worker
            books.forget(t)
            if is_disk_full(e):  # a full disk
                disk_full(getattr(e, "path", out))
                return
            say(f"could not record run {t.run_dir}: {e.__class__.__name__}: {e}")
        finally:
            gates.ended(spent)

    # --- a full disk: the first write that finds the device full stops
    # the sweep: no new runs, the ones in flight end on their own, then one line (DiskFull) for the user
    full: list[Path] = []

    def disk_full(where: Path) -> None:
        if not full:
            full.append(Path(where))
            work.close()

    unlisten = model.pacer.listen(throttle.on_status)  # the throttle listens to the endpoint's 429s
    try:
        with sigterm_as_interrupt():  # SIGINT raises KeyboardInterrupt by itself
            drain(work, run_one, workers)
    except KeyboardInterrupt:
        stop.set()
        work.close()
        books.stats.interrupted = True
        runs.cancel()
        work.wait_idle(GRACE_S)
        books.discard_in_flight()
    finally:
        unlisten()
    stop.set()  # ends the probe watchers
    return _close_books(books, throttle, budget, full, say)


def _budget(config: RunConfig, books: Ledger, todo: list[Task], price: ModelPrice | None,
            stop: threading.Event) -> Budget:
    """The sweep's budget, counting what the runs of this sweep already on disk spent."""
    budget = Budget(config.budget.max_cost, config.budget.max_tokens_total, stop=stop)
    if budget.limited:
        waiting = set(map(id, todo))
        for t in books.tasks:
            if id(t) not in waiting:
                budget.add(*run_spend(read_result(t.run_dir), price))
    return budget


def _close_books(books: Ledger, throttle: Throttle, budget: Budget, full: list[Path],
                 say: Callable[[str], None]) -> SweepStats:
    """Step 3 for the sweep: its counts, the budget, ``sweep.json``; :class:`DiskFull` after a full disk."""
    books.stats.concurrency, books.stats.concurrency_lowest = throttle.allowed, throttle.lowest
    books.stats.throttled = throttle.lowered
    if budget.limited:
        books.stats.budget = budget.describe()
    if budget.reached and not books.stats.interrupted:
        books.stats.budget_reached = budget.reached
        say(f"budget reached: {budget.describe()}; no more runs started, the runs in flight finished")
    if full:  # a full disk: the status if there is room, then the one line
        with contextlib.suppress(OSError, FteError):
            books.write("disk_full")
        raise DiskFull(full[0])
    return books.finish()


def _validate(bench: BenchConfig) -> None:
    if bench.runs < 1:
        raise ConfigError(f"--runs must be >= 1 (got {bench.runs})")
    if bench.concurrency < 1:
        raise ConfigError(f"--concurrency must be >= 1 (got {bench.concurrency})")
    if not bench.profiles:
        raise ConfigError("--profiles is empty")
    from ..profiles.base import IMPLEMENTATIONS, PROFILES

    unknown = [p for p in bench.profiles if not IMPLEMENTATIONS.knows(p)]
    if unknown:
        raise ConfigError(f"unknown profile(s): {', '.join(unknown)} (known: {', '.join(PROFILES)}; or a "
                          "third-party one as module:attr)")


def _needed(bench: BenchConfig, cfg: RunConfig) -> list[str]:
    """The resources the sweep probes before its first run."""
    from ..search.registry import selected

    return (["endpoint"] + (["sandbox"] if uses_boxes(bench.profiles) else [])
            + (["search"] if selected(cfg.search).remote else []))


def _check_corpus_arm(bench: BenchConfig, cfg: RunConfig) -> None:
    """``--corpus-arm`` needs a profile that runs a box, a local corpus, and no ``[sandbox] corpus`` (which
    would put /corpus in the boxes of every arm)."""
    if not uses_boxes(bench.profiles):
        raise ConfigError("--corpus-arm adds a corpus arm to the profiles that run a box (shell, or a third-party "
                          "one whose class sets uses_box); --profiles has none")
    if cfg.search.corpus is None:
        raise ConfigError(f"--corpus-arm mounts the sweep's local corpus at /corpus; {bench.dataset} has none "
                          "and no [search] corpus is set")
    if cfg.sandbox.corpus is not None:
        raise ConfigError("--corpus-arm compares boxes with and without /corpus; [sandbox] corpus (--sandbox-corpus) "
                          "puts it in every box: leave it unset")


def _prepare_sandbox(cfg: RunConfig, log: Callable[[str], None] | None, corpus: bool = False) -> None:
    """Check (or build) the sandbox image (and export the corpus of ``[sandbox] corpus``, or with
    ``corpus`` — ``--corpus-arm`` — the sweep's ``[search] corpus``) once, before the threads, and remove
    the containers of an earlier harness that was SIGKILLed."""
    from ..sandbox import get_provider

    provider = get_provider(cfg.sandbox.provider)
    provider.prepare(cfg.sandbox)
    mounted = cfg.search.corpus if corpus else cfg.sandbox.corpus
    if mounted is not None:  # the corpus for /corpus, exported once before the threads
        from ..sandbox.corpus_files import corpus_mount

        corpus_mount(cfg.sandbox.model_copy(update={"corpus": mounted}), log)
    try:
        removed = provider.gc(log=log).removed
    except FteError as e:
        removed = []
        if log:
            log(f"container gc skipped: {e}")
    if removed and log:
        log(f"removed {len(removed)} container(s) left by an earlier harness")
