"""Agreement between judges (definitions: ``docs/metrics.md`` "Judge agreement"): the verdicts several
judges (``judgement.json`` keys, ``preset`` or ``preset@model``) gave the same runs, each judge's
accuracy, Cohen's κ of every pair over the runs both judged, and the runs they disagree on.

Only runs that are results take part (an infrastructure failure keeps no verdict)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from pathlib import Path

from pydantic import Field

from ..record.rundir import find_runs, read_judgement, read_result, verdicts
from ..stops import is_infra_failure
from .stats import _M, cohen_kappa, wilson

Table = Mapping[str, Mapping[str, bool]]
"""``{run: {judge: correct}}``."""


class JudgeScore(_M):
    """One judge's verdicts."""

    judge: str
    """The judge (``preset`` or ``preset@model``)."""

    judged: int
    """Runs it gave a verdict."""

    correct: int
    """Of those, judged correct."""

    accuracy: float | None
    """``correct / judged``."""

    accuracy_ci95: tuple[float, float] | None = None
    """Wilson score 95 % interval of ``accuracy``."""


class JudgePair(_M):
    """Two judges on the runs both judged."""

    a: str
    """First judge."""

    b: str
    """Second judge."""

    n: int
    """Runs both judged."""

    agree: int
    """Of those, the runs they gave the same verdict."""

    kappa: float | None
    """Cohen's κ of their verdicts on those runs (:func:`fte_shell.metrics.stats.cohen_kappa`)."""


class Agreement(_M):
    """Judges side by side over a set of runs."""

    judges: list[JudgeScore] = Field(default_factory=list)
    """Each judge's accuracy, judges by name."""

    pairs: list[JudgePair] = Field(default_factory=list)
    """Every pair of judges (in the order of ``judges``)."""

    disagreements: dict[str, dict[str, bool]] = Field(default_factory=dict)
    """``{run: {judge: correct}}`` of the runs judges disagree on (by run)."""


def run_verdicts(run_dir: Path) -> dict[str, bool]:
    """``{judge: correct}`` of one run's ``judgement.json``."""
    return {k: bool(v["correct"]) for k, v in verdicts(read_judgement(run_dir)).items()}


def verdict_table(roots: Iterable[Path]) -> dict[str, dict[str, bool]]:
    """``{run directory: {judge: correct}}`` of the runs under ``roots`` that are results and have a
    verdict."""
    out: dict[str, dict[str, bool]] = {}
    for root in roots:
        for d, *_ in find_runs(Path(root)):
            result = read_result(d)
            if result is None or is_infra_failure(result.get("stop_reason")):
                continue
            if row := run_verdicts(d):
                out[str(d)] = row
    return out


def agreement(table: Table) -> Agreement:
    """Each judge's accuracy, κ of each pair over the runs both judged, the runs with differing verdicts."""
    judges = sorted({j for row in table.values() for j in row})
    scores = []
    for j in judges:
        xs = [row[j] for row in table.values() if j in row]
        k = sum(xs)
        scores.append(JudgeScore(judge=j, judged=len(xs), correct=k, accuracy=k / len(xs) if xs else None,
                                 accuracy_ci95=wilson(k, len(xs))))
    pairs = []
    for a, b in itertools.combinations(judges, 2):
        both = [(row[a], row[b]) for row in table.values() if a in row and b in row]
        pairs.append(JudgePair(a=a, b=b, n=len(both), agree=sum(x == y for x, y in both), kappa=cohen_kappa(both)))
    split = {run: dict(sorted(row.items())) for run, row in sorted(table.items()) if len(set(row.values())) > 1}
    return Agreement(judges=scores, pairs=pairs, disagreements=split)
