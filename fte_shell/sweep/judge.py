"""``fte-shell judge``: grade every finished run under some sweeps or run directories, each by the
grading of the benchmark that wrote its sweep (:meth:`fte_shell.benchmarks.base.Benchmark.judge`) with
a grading preset (:mod:`fte_shell.benchmarks.presets`: the dataset's ``judge_preset`` unless another is
named). Verdicts are kept per run and judge in ``RUN_DIR/judgement.json``."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from ..benchmarks.grading import JudgeRequest, JudgeSummary
from ..benchmarks.llmjudge import LLMJudge
from ..benchmarks.registry import of_sweep, preset
from ..errors import ConfigError
from ..record.rundir import runs_under
from ..record.sweepdir import sweep_root

MODEL_FREE = "match"
"""The preset a dataset's default model preset gives way to when no grading model is given."""


def judge_runs(
    roots: Iterable[Path],
    preset_name: str | None = None,
    *,
    judge: LLMJudge | None = None,
    golds: dict[str, str] | None = None,
    force: bool = False,
    concurrency: int = 8,
    on_done: Callable[[], None] | None = None,
) -> JudgeSummary:
    """Judge every finished run under ``roots`` (sweeps or single run directories) and keep the
    verdicts. The preset is ``preset_name`` or else each sweep's dataset default; a default that needs a
    model while no ``judge`` is given gives way to the model-free ``match`` (noted in the summary), a
    named one is a ConfigError. Gold answers come from ``golds`` (by qid or ``"question:" + text``) and
    from each sweep's ``questions.jsonl``."""
    named = preset(preset_name) if preset_name is not None else None
    if named is not None and named.needs_model and judge is None:
        raise ConfigError(f"the {named.name} judge preset needs a grading model: pass --judge-model")
    summary = JudgeSummary()
    for root in roots:
        root = Path(root)
        runs_under(root)  # a path that holds no run is an error, not zero runs judged
        sroot = sweep_root(root)
        bm = of_sweep(sroot)
        chosen = named or preset(bm.judge_preset)
        if chosen.needs_model and judge is None:
            note = f"{root}: {chosen.name} needs a grading model (--judge-model): graded by {MODEL_FREE} instead"
            summary.notes.append(note)
            chosen = preset(MODEL_FREE)
        req = JudgeRequest(root=root, sweep=sroot, preset=chosen, llm=judge, golds=dict(golds or {}), force=force,
                           concurrency=concurrency, on_done=on_done)
        bm.judge(req, summary)
    return summary
