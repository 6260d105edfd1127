"""Resumable benchmark sweeps: every (question, profile, repetition) is its own run directory
``OUT/runs/<profile>/<qid>/r<k>/`` written by :func:`fte_shell.runner.run_question`.

Layout of ``OUT`` (docs/bench.md)::

    sweep.json        manifest: dataset, profiles, runs, config snapshot (secrets masked), status, counts
    questions.jsonl   the selected questions with their gold answers (the judge reads them)
    failures.jsonl    one line per run the harness could not finish (exception message)
    runs/<profile>/<qid>/r<k>/   trajectory.jsonl, result.json, workspace/, judgement.json
    shared/search-cache/         search results, shared by every profile (identical result lists)
    shared/page-cache/           converted pages, shared by every profile (identical page text)

Resume: a run whose ``result.json`` exists is done and skipped (a ``failed`` one is redone with
``retry_failed``); a run directory without ``result.json`` is partial: it is deleted and redone. A sweep
killed at any moment therefore loses at most the runs in flight. On SIGINT/SIGTERM the sweep stops
starting runs, removes this process's containers, deletes the runs that were in flight and returns.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import queue
import shutil
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from ..config import RunConfig
from ..errors import ConfigError, FteError
from ..recorder import write_json_atomic
from .datasets import Dataset, Question, load_dataset

if TYPE_CHECKING:  # pragma: no cover
    from ..fetch import PageCache, PageSource
    from ..model import ModelClient
    from ..search import SearchBackend

RESULT = "result.json"
FAILED = ("failed", "crashed")
"""Stop reasons of runs the harness could not finish (``crashed``: the runner recorded an unexpected
exception; ``failed``: the sweep recorded one raised before or outside the loop)."""
MANIFEST_EVERY_S = 5.0
"""How often (at most) a running sweep refreshes the counts in ``sweep.json``."""
GRACE_S = 10.0
"""Seconds an interrupted sweep waits for its in-flight runs before deleting them and returning."""


class BenchConfig(BaseModel):
    """What one ``fte-shell bench`` sweep runs."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    dataset: str
    """Dataset spec: ``hotpotqa``, ``hotpotqa:DIR``, ``browsecomp:FILE.csv``, ``jsonl:FILE`` or a path."""

    split: str = "dev"
    """HotpotQA split (``dev`` or ``test``)."""

    limit: int | None = None
    """Keep the first N questions (after ``sample``)."""

    sample: int | None = None
    """Draw N questions at random with ``seed``."""

    seed: int = 0
    """Seed of ``sample``."""

    profiles: list[str] = Field(default_factory=lambda: ["shell", "fte"])
    """Profiles to compare, each on every question."""

    runs: int = 1
    """Repetitions per (question, profile)."""

    concurrency: int = 4
    """Runs in flight at once (threads; each shell run holds one container)."""

    out: Path
    """Sweep directory."""

    corpus_dir: Path | None = None
    """HotpotQA only: where its local corpus index is built once and reused (default
    ``$FTE_CACHE_DIR/corpora/hotpotqa-amor``, else ``~/.cache/fte-shell/corpora/hotpotqa-amor``)."""

    retry_failed: bool = False
    """Redo runs recorded as ``failed`` instead of skipping them."""

    retries: int = 1
    """Times a run whose harness raised (e.g. a container that failed to start under load) is retried at
    once, in a fresh directory, before it is recorded as failed."""


class Task(BaseModel):
    """One run of a sweep."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    question: Question
    """The question."""

    profile: str
    """Profile name."""

    rep: int
    """Repetition index."""

    run_dir: Path
    """``OUT/runs/<profile>/<qid>/r<rep>``."""


class SweepStats(BaseModel):
    """Counts of one sweep invocation."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    total: int = 0
    """Runs in the sweep (all questions × profiles × repetitions)."""

    skipped: int = 0
    """Runs already done before this invocation."""

    redone: int = 0
    """Partial runs deleted and redone."""

    done: int = 0
    """Runs finished in this invocation (failed ones included)."""

    failed: int = 0
    """Runs the harness could not finish (recorded with stop_reason ``failed``)."""

    answered: int = 0
    """Runs finished in this invocation with an answer."""

    lost: int = 0
    """Runs in flight when the sweep was interrupted (deleted; redone on resume)."""

    interrupted: bool = False
    """The sweep was stopped by SIGINT/SIGTERM."""

    wall_s: float = 0.0
    """Seconds this invocation took."""


class Executor(Protocol):
    """Where the runs of a sweep are carried out. Default: this process's thread pool
    (``concurrency`` threads calling ``run_fn``); :class:`fte_shell.distributed.RayExecutor` runs each on
    a Ray node. ``run`` returns when every task of ``todo`` is recorded (or ``job.stop`` is set); it lets
    KeyboardInterrupt through (the sweep then discards what ``job.started`` marked and did not record)."""

    uses_local_docker: bool
    """Whether runs use this host's Docker daemon (the sweep then checks its image and gcs it first)."""

    def run(self, todo: list[Task], job: SweepJob) -> None: ...


@dataclass
class SweepJob:
    """What an :class:`Executor` gets from :func:`run_sweep`: the shared set-up and the bookkeeping."""

    bench: BenchConfig
    dataset: Dataset
    shared: Shared
    stop: threading.Event
    started: Callable[[Task], bool]
    """Call when a task is handed out (marks it in flight, shows progress); False once the sweep stops."""
    record: Callable[[Task, Any, str | None], None]
    """``record(task, answer, error)`` once the task's run directory is in place (or ``error`` says why
    there is none): writes a failed result/failures.jsonl, counts, progress."""
    log: Callable[[str], None] | None


class RunFn(Protocol):
    """What the sweep calls for one run: :func:`fte_shell.runner.run_question`'s signature."""

    def __call__(
        self,
        question: str,
        config: RunConfig,
        out_dir: Path,
        *,
        search: SearchBackend | None,
        page_source: PageSource | None,
        page_cache: PageCache | None,
        qid: str | None,
        model: ModelClient | None,
        meta: dict[str, Any] | None,
    ) -> Any: ...


# --- shared resources ---------------------------------------------------------------------------------
def default_cache_root() -> Path:
    """``$FTE_CACHE_DIR``, else ``~/.cache/fte-shell``."""
    env = os.environ.get("FTE_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "fte-shell"


_corpus_lock = threading.Lock()


def ensure_hotpotqa_corpus(data_dir: Path, corpus_dir: Path | None = None, log: Callable[[str], None] | None = None) -> Path:
    """Build the HotpotQA passages into a bm25s corpus once (reused while the data files are unchanged)."""
    from ..search.corpus import META, build_corpus, hotpotqa_docs

    data_dir = Path(data_dir).resolve()
    corpus_dir = Path(corpus_dir or default_cache_root() / "corpora" / "hotpotqa-amor").expanduser().resolve()
    stamp = "-".join(
        f"{p.stat().st_size}.{int(p.stat().st_mtime)}" for p in sorted(data_dir.glob("*.jsonl"))
    )
    name = f"hotpotqa-amor@{stamp}"
    with _corpus_lock:
        try:
            meta = json.loads((corpus_dir / META).read_text())
        except (OSError, json.JSONDecodeError):
            meta = {}
        if meta.get("name") == name and meta.get("source") == str(data_dir):
            return corpus_dir
        if log:
            log(f"building the HotpotQA corpus index in {corpus_dir} (once)")
        return build_corpus(hotpotqa_docs(data_dir), corpus_dir, name=name, source=str(data_dir))


def _page_cache(path: Path) -> PageCache:
    """The converted-page cache every profile of the sweep shares."""
    from ..fetch import PageCache

    return PageCache(path)


@dataclass(frozen=True)
class Shared:
    """Search backend, page source and page cache shared by every run of a sweep."""

    config: RunConfig
    """The run configuration with the sweep's search settings filled in."""

    search: SearchBackend | None
    """The (cached) search backend."""

    page_source: PageSource | None
    """Local corpus serving fetches by docid/url (HotpotQA), or None."""

    page_cache: PageCache | None
    """Converted-page cache shared by every profile, or None."""


def prepare_shared(bench: BenchConfig, dataset: Dataset, config: RunConfig, log: Callable[[str], None] | None = None) -> Shared:
    """Pick the search backend (HotpotQA: its local corpus) with the sweep's result cache."""
    from ..search import make_page_source, make_search

    out = Path(bench.out)
    cfg = config.model_copy(deep=True)
    if dataset.kind == "hotpotqa":
        cfg.search.backend = "local"
        cfg.search.corpus = ensure_hotpotqa_corpus(Path(dataset.source), bench.corpus_dir, log)
    if cfg.search.cache_dir is None or dataset.kind == "hotpotqa":
        cfg.search.cache_dir = out / "shared" / "search-cache"
    search = make_search(cfg.search)
    page_source = make_page_source(cfg.search)
    return Shared(config=cfg, search=search, page_source=page_source, page_cache=_page_cache(out / "shared" / "page-cache"))


# --- bookkeeping --------------------------------------------------------------------------------------
def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def plan(bench: BenchConfig, questions: list[Question]) -> list[Task]:
    """All runs, repetition-major then question then profile (a question's profiles run close in time,
    so the shared caches are warm)."""
    runs_dir = Path(bench.out) / "runs"
    return [
        Task(question=q, profile=p, rep=k, run_dir=runs_dir / p / q.id / f"r{k}")
        for k in range(bench.runs)
        for q in questions
        for p in bench.profiles
    ]


def run_state(run_dir: Path) -> str:
    """``done``, ``failed``, ``partial`` or ``new``."""
    res = run_dir / RESULT
    if res.exists():
        try:
            stop = json.loads(res.read_text()).get("stop_reason")
        except (OSError, json.JSONDecodeError):
            return "partial"
        return "failed" if stop in FAILED else "done"
    return "partial" if run_dir.exists() else "new"


def write_manifest(bench: BenchConfig, dataset: Dataset, cfg: RunConfig, status: str, stats: SweepStats | None, started: str) -> None:
    """Write ``OUT/sweep.json`` atomically (secrets masked; format in docs/bench.md)."""
    out = Path(bench.out)
    manifest = {
        "dataset": {k: v for k, v in dataset.model_dump(mode="json").items() if k != "questions"},
        "questions": len(dataset.questions),
        "bench": bench.model_dump(mode="json"),
        "profiles": bench.profiles,
        "runs": bench.runs,
        "config": cfg.model_dump(mode="json"),
        "started_at": started,
        "updated_at": _now(),
        "status": status,
        "stats": stats.model_dump() if stats else None,
    }
    write_json_atomic(out / "sweep.json", manifest)


def write_questions(out: Path, questions: list[Question]) -> None:
    path = out / "questions.jsonl"
    known: dict[str, dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                known[row["id"]] = row
    for q in questions:
        known[q.id] = q.model_dump(mode="json")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in known.values()), encoding="utf-8")
    os.replace(tmp, path)


def check_compatible(out: Path, dataset: Dataset) -> None:
    """Refuse to mix datasets in one sweep directory."""
    try:
        old = json.loads((out / "sweep.json").read_text())
    except (OSError, json.JSONDecodeError):
        return
    od = old.get("dataset") or {}
    if (od.get("source"), od.get("split")) != (dataset.source, dataset.split):
        raise ConfigError(
            f"{out} holds a sweep of {od.get('source')} (split {od.get('split')}); this is "
            f"{dataset.source} (split {dataset.split}): choose another --out"
        )


# --- running ------------------------------------------------------------------------------------------
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
        from .. import container

        container.remove_all_live()
    except Exception as e:  # noqa: BLE001 - best effort during shutdown; gc removes what is left
        print(f"fte-shell bench: could not remove containers: {e}", file=sys.stderr)


def run_sweep(
    bench: BenchConfig,
    config: RunConfig,
    *,
    run_fn: RunFn | None = None,
    on_event: Callable[[str, Task, SweepStats], None] | None = None,
    log: Callable[[str], None] | None = None,
    executor: Executor | None = None,
) -> SweepStats:
    """Run (or resume) the sweep. ``on_event(kind, task, stats)`` is called with ``start``/``done``/
    ``failed`` for progress display; ``executor`` carries out the runs (default: this process's threads). Returns the counts; ``stats.interrupted`` after SIGINT/SIGTERM."""
    t0 = time.monotonic()
    if bench.runs < 1:
        raise ConfigError(f"--runs must be >= 1 (got {bench.runs})")
    if bench.concurrency < 1:
        raise ConfigError(f"--concurrency must be >= 1 (got {bench.concurrency})")
    if not bench.profiles:
        raise ConfigError("--profiles is empty")
    from ..profiles import PROFILES

    unknown = [p for p in bench.profiles if p not in PROFILES]
    if unknown:
        raise ConfigError(f"unknown profile(s): {', '.join(unknown)} (known: {', '.join(PROFILES)})")
    dataset = load_dataset(bench.dataset, split=bench.split, limit=bench.limit, sample=bench.sample, seed=bench.seed)
    out = Path(bench.out)
    check_compatible(out, dataset)
    out.mkdir(parents=True, exist_ok=True)
    started = _now()

    from ..model import ModelClient

    model = ModelClient(config.model)  # fails fast without an endpoint; shared connection pool
    if run_fn is None:
        from ..runner import run_question

        run_fn = run_question
    if "shell" in bench.profiles and (executor is None or executor.uses_local_docker):
        from .. import container

        container.ensure_image(config.sandbox)  # once, before the threads
        try:  # containers of a SIGKILLed earlier sweep: their owner is gone
            removed = container.gc(log=log).removed
        except FteError as e:
            removed = []
            if log:
                log(f"container gc skipped: {e}")
        if removed and log:
            log(f"removed {len(removed)} container(s) left by an earlier harness")
    shared = prepare_shared(bench, dataset, config, log)
    write_questions(out, dataset.questions)
    stats = SweepStats()
    write_manifest(bench, dataset, shared.config, "running", stats, started)

    tasks = plan(bench, dataset.questions)
    stats.total = len(tasks)
    todo: list[Task] = []
    for t in tasks:
        state = run_state(t.run_dir)
        if state == "done" or (state == "failed" and not bench.retry_failed):
            stats.skipped += 1
            continue
        if state in ("partial", "failed"):
            shutil.rmtree(t.run_dir, ignore_errors=True)
            stats.redone += 1
        todo.append(t)

    stop = threading.Event()
    lock = threading.Lock()
    in_flight: dict[Path, Task] = {}
    work: queue.Queue[Task] = queue.Queue()
    for t in todo:
        work.put(t)
    failures_path = out / "failures.jsonl"
    last_manifest = [time.monotonic()]

    def checkpoint() -> None:
        """Refresh sweep.json's counts now and then (call with ``lock`` held)."""
        if time.monotonic() - last_manifest[0] >= MANIFEST_EVERY_S:
            last_manifest[0] = time.monotonic()
            stats.wall_s = time.monotonic() - t0
            write_manifest(bench, dataset, shared.config, "running", stats, started)

    def emit(kind: str, t: Task) -> None:
        if on_event:
            try:
                on_event(kind, t, stats)
            except Exception as e:  # noqa: BLE001 - display problems never stop a sweep
                if log:
                    log(f"progress display failed: {e}")

    def one(t: Task) -> None:
        cfg = shared.config.model_copy(deep=True)
        cfg.agent.profile = t.profile
        t.run_dir.parent.mkdir(parents=True, exist_ok=True)
        error: str | None = None
        answer = None
        for attempt in range(bench.retries + 1):
            if attempt:
                if stop.is_set():
                    break
                if log:
                    log(f"retrying {t.run_dir} after: {error}")
                shutil.rmtree(t.run_dir, ignore_errors=True)
            error = None
            try:
                res = run_fn(
                    t.question.question,
                    cfg,
                    t.run_dir,
                    search=shared.search,
                    page_source=shared.page_source,
                    page_cache=shared.page_cache,
                    qid=f"{t.question.id}-{t.profile}-r{t.rep}",
                    model=model,
                    meta={"qid": t.question.id, "rep": t.rep, "dataset": dataset.source},
                )
                answer = getattr(res, "answer", None)
                break
            except Exception as e:  # noqa: BLE001 - a failed run is recorded and the sweep goes on
                error = f"{e.__class__.__name__}: {e}"
                if not isinstance(e, FteError):
                    error += "\n" + "".join(traceback.format_exception(e)[-3:])
        if stop.is_set():  # in flight when the sweep was interrupted: its outcome is not trusted
            return
        record(t, answer, error)

    def record(t: Task, answer: Any, error: str | None) -> None:
        with lock:
            if error is not None:
                if not (t.run_dir / RESULT).exists():  # else the runner recorded it ("crashed")
                    t.run_dir.mkdir(parents=True, exist_ok=True)
                    write_json_atomic(t.run_dir / RESULT, {
                        "question": t.question.question, "answer": None, "profile": t.profile,
                        "stop_reason": "failed", "error": error, "qid": t.question.id, "rep": t.rep,
                        "finished_at": _now(),
                    })
                with failures_path.open("a", encoding="utf-8") as f:
                    f.write(json.dumps({"profile": t.profile, "qid": t.question.id, "rep": t.rep,
                                        "error": error, "at": _now()}) + "\n")
                stats.failed += 1
            elif not (t.run_dir / RESULT).exists():  # defensive: the runner always writes it
                in_flight.pop(t.run_dir, None)
                return
            stats.done += 1
            stats.answered += answer is not None
            in_flight.pop(t.run_dir, None)
            checkpoint()
        emit("failed" if error else "done", t)

    def started(t: Task) -> bool:
        with lock:
            if stop.is_set():
                return False
            in_flight[t.run_dir] = t
        emit("start", t)
        return True

    def worker() -> None:
        while not stop.is_set():
            try:
                t = work.get_nowait()
            except queue.Empty:
                return
            if not started(t):
                return
            try:
                one(t)
            except Exception as e:  # noqa: BLE001 - bookkeeping failed (disk full?): say so, keep the worker
                with lock:
                    in_flight.pop(t.run_dir, None)
                if log:
                    log(f"could not record run {t.run_dir}: {e.__class__.__name__}: {e}")

    threads = [threading.Thread(target=worker, name=f"bench-{i}", daemon=True)
               for i in range(min(bench.concurrency, max(1, len(todo))))]
    try:
        with _signals_to_interrupt():
            if executor is not None:
                threads = []
                executor.run(todo, SweepJob(bench=bench, dataset=dataset, shared=shared, stop=stop,
                                            started=started, record=record, log=log))
            for th in threads:
                th.start()
            while any(th.is_alive() for th in threads):
                for th in threads:
                    th.join(timeout=0.2)
    except KeyboardInterrupt:
        stop.set()
        stats.interrupted = True
        _remove_live_containers()
        deadline = time.monotonic() + GRACE_S
        for th in threads:
            th.join(timeout=max(0.0, deadline - time.monotonic()))
        with lock:
            for d in list(in_flight):
                shutil.rmtree(d, ignore_errors=True)
                stats.lost += 1
            in_flight.clear()
    finally:
        model.close()
    stats.wall_s = time.monotonic() - t0
    write_manifest(bench, dataset, shared.config, "interrupted" if stats.interrupted else "finished", stats, started)
    return stats
