"""Resumable benchmark sweeps: every (question, profile, repetition) is its own run directory
``OUT/runs/<profile>/<qid>/r<k>/`` written by :func:`fte_shell.runner.run_question`.

Layout of ``OUT`` (docs/bench.md)::

    sweep.json        manifest: dataset, profiles, runs, config snapshot (secrets masked), config digests,
                      status, counts
    questions.jsonl   the selected questions with their gold answers (the judge reads them)
    failures.jsonl    one line per attempt that ended for an infrastructure reason (not a result)
    runs/<profile>/<qid>/r<k>/   trajectory.jsonl, result.json, workspace/, judgement.json
    shared/search-cache/         search results, shared by every profile (identical result lists)
    shared/page-cache/           converted pages, shared by every profile (identical page text)

Modules: :mod:`.config` (BenchConfig, Task, SweepStats), :mod:`.shared` (search, corpus, caches),
:mod:`.state` (plan, run states, manifest, resume checks), :mod:`.failures` (infrastructure failures),
:mod:`.outage` (probes and the gate), :mod:`.execute` (the work queue and the executor seam), :mod:`.run`
(:func:`run_sweep`).
"""

from __future__ import annotations

from .config import BenchConfig, RunFn, SweepStats, Task
from .execute import Executor, RemoteRuns, WorkQueue, thread_executor
from .failures import FAILURES, FailureLog
from .outage import EndpointProbe, Outages, Probe, SandboxProbe, SearchProbe
from .run import GRACE_S, MANIFEST_EVERY_S, run_sweep
from .shared import Shared, prepare_shared, sweep_config
from .state import RESULT, check_compatible, check_config, plan, run_state, write_manifest, write_questions

__all__ = [
    "FAILURES",
    "GRACE_S",
    "MANIFEST_EVERY_S",
    "RESULT",
    "BenchConfig",
    "EndpointProbe",
    "Executor",
    "FailureLog",
    "Outages",
    "Probe",
    "RemoteRuns",
    "RunFn",
    "SandboxProbe",
    "SearchProbe",
    "Shared",
    "SweepStats",
    "Task",
    "WorkQueue",
    "check_compatible",
    "check_config",
    "plan",
    "prepare_shared",
    "run_state",
    "run_sweep",
    "sweep_config",
    "thread_executor",
    "write_manifest",
    "write_questions",
]
