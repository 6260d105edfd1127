"""Resumable benchmark sweeps: every (question, profile, context arm, repetition) is its own run directory
``OUT/runs/<arm>/<qid>/r<k>/`` (the arm: the profile, or ``profile@strategy`` for a context strategy other
than keep_all) written by :func:`fte_shell.runner.run_question`.

Layout of ``OUT`` (docs/bench.md)::

    sweep.json        manifest: dataset, profiles, runs, config snapshot (secrets masked), config digests,
                      status, counts
    questions.jsonl   the selected questions with their gold answers (the judge reads them)
    failures.jsonl    one line per attempt that ended for an infrastructure reason (not a result)
    runs/<arm>/<qid>/r<k>/       trajectory.jsonl, result.json, workspace/, judgement.json
    shared/search-cache/         search results, shared by every profile (identical result lists)
    shared/page-cache/           converted pages, shared by every profile (identical page text)

:func:`run_sweep` (:mod:`.run`) is one seam: **plan** (:mod:`.state`: the runs, resume checks, the
manifest; :mod:`.outage`: probes and the gate) → **attempt** (:mod:`.execute`: the work queue, worker
threads and where a run happens, :class:`RemoteRuns` — this process or e.g. a Ray cluster) →
**bookkeeping** (:mod:`.ledger`: counts, :mod:`.failures`, ``sweep.json``); :mod:`.pace` gates the starts
(the budget, the concurrency under 429s). :mod:`.config` holds
BenchConfig, Task, SweepStats; :mod:`.shared` the search, corpus and caches every run shares.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .config import BenchConfig, RunFn, SweepStats, Task

if TYPE_CHECKING:  # pragma: no cover
    from .execute import LocalRuns, RemoteRuns
    from .run import run_sweep
    from .shared import Shared

_LAZY = {"LocalRuns": ".execute", "RemoteRuns": ".execute", "run_sweep": ".run", "Shared": ".shared"}
"""Imported on first access, so the CLI reads :class:`BenchConfig` (its flags' help) without the sweep's
machinery (the sandbox, fetch and search stacks)."""


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(mod, __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "BenchConfig",
    "LocalRuns",
    "RemoteRuns",
    "RunFn",
    "Shared",
    "SweepStats",
    "Task",
    "run_sweep",
]
