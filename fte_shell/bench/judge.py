"""``fte-shell judge``: grade every finished run under some sweeps or run directories, each by the
grading of the benchmark that wrote its sweep (:meth:`fte_shell.benchmarks.base.Benchmark.judge`; the
default is exact match + F1 or the LLM judge of :mod:`fte_shell.benchmarks.llmjudge`). Verdicts are cached
per run in ``RUN_DIR/judgement.json``."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from ..benchmarks.answers import Method
from ..benchmarks.grading import JudgeRequest, JudgeSummary
from ..benchmarks.llmjudge import LLMJudge
from ..benchmarks.registry import of_sweep
from ..errors import ConfigError
from ..record.sweepdir import SweepDir


def sweep_root(run_dir: Path) -> Path | None:
    """The sweep directory (holding ``sweep.json``) above ``run_dir``, if any."""
    for p in [run_dir, *run_dir.parents]:
        if SweepDir(p).manifest_path.exists():
            return p
    return None


def judge_runs(
    roots: Iterable[Path],
    method: Method,
    *,
    judge: LLMJudge | None = None,
    golds: dict[str, str] | None = None,
    force: bool = False,
    concurrency: int = 8,
    on_done: Callable[[], None] | None = None,
) -> JudgeSummary:
    """Judge every finished run under ``roots`` (sweeps or single run directories) with ``method`` and
    cache the verdicts. Gold answers come from ``golds`` (by qid or ``"question:" + text``) and from each
    sweep's ``questions.jsonl``."""
    if method == "llm" and judge is None:
        raise ConfigError("the LLM judge needs a grading model: pass --judge-model")
    summary = JudgeSummary()
    for root in roots:
        root = Path(root)
        if not root.exists():
            raise ConfigError(f"run directory not found: {root}")
        sroot = sweep_root(root)
        req = JudgeRequest(root=root, sweep=sroot, method=method, llm=judge, golds=dict(golds or {}), force=force,
                           concurrency=concurrency, on_done=on_done)
        of_sweep(sroot).judge(req, summary)
    return summary
