"""Scores the field's benchmarks define over a set of graded runs (definitions: ``docs/metrics.md``):

- :func:`calibration_error`: HLE's RMS calibration error (bins of 100 by confidence);
- :func:`grade_summary`: SimpleQA's summary of three-way grades (correct, not attempted, correct given
  attempted, F-score);
- :func:`accuracy_by`: accuracy per group (GAIA's levels, FRAMES's reasoning types, WebWalkerQA's
  difficulty / language / domain), a run counting in every group it belongs to.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .runs import RunMetrics

GRADES = ("CORRECT", "INCORRECT", "NOT_ATTEMPTED")
"""SimpleQA's three grades."""


def calibration_error(confidence: Sequence[float], correct: Sequence[bool], beta: int = 100) -> float | None:
    """RMS calibration error as HLE defines it: the (confidence, correct) pairs sorted by confidence
    (ties keep their given order), cut into consecutive bins of ``beta`` — the last bin takes the
    remainder; fewer than ``beta`` pairs make one bin — and
    ``sqrt(sum_b n_b / N * (mean confidence_b - accuracy_b) ** 2)``. Confidences are shares (0-1).
    None without pairs."""
    if len(confidence) != len(correct):
        raise ValueError("confidence and correct differ in length")
    n = len(confidence)
    if n == 0:
        return None
    if beta < 1:
        raise ValueError("beta must be >= 1")
    order = sorted(range(n), key=lambda i: confidence[i])
    conf = [float(confidence[i]) for i in order]
    ok = [1.0 if correct[i] else 0.0 for i in order]
    nbins = max(1, n // beta)
    edges = [i * beta for i in range(nbins)] + [n]
    total = 0.0
    for lo, hi in itertools.pairwise(edges):
        m = hi - lo
        diff = sum(conf[lo:hi]) / m - sum(ok[lo:hi]) / m
        total += m / n * diff * diff
    return math.sqrt(total)


def grade_summary(grades: Iterable[str]) -> dict[str, Any]:
    """SimpleQA's summary of three-way grades: ``n``; ``correct``, ``incorrect``, ``not_attempted`` (shares
    of n); ``correct_given_attempted`` = correct / (correct + incorrect) (0 when none was attempted);
    ``f_score`` = the harmonic mean of ``correct`` and ``correct_given_attempted`` (0 when both are 0).
    Every value but ``n`` is None when there are no grades."""
    gs = list(grades)
    bad = sorted({g for g in gs if g not in GRADES})
    if bad:
        raise ValueError(f"unknown grade(s) {bad} (known: {', '.join(GRADES)})")
    n = len(gs)
    if not n:
        return {"n": 0, "correct": None, "incorrect": None, "not_attempted": None,
                "correct_given_attempted": None, "f_score": None}
    c, i, na = (gs.count(g) / n for g in GRADES)
    cga = c / (c + i) if c + i > 0 else 0.0
    f = 2 * c * cga / (c + cga) if c + cga > 0 else 0.0
    return {"n": n, "correct": c, "incorrect": i, "not_attempted": na, "correct_given_attempted": cga, "f_score": f}


def accuracy_by(runs: Sequence[RunMetrics], groups_of: Callable[[RunMetrics], Sequence[str]]) -> dict[str, dict[str, Any]]:
    """``{group: {"judged", "correct", "accuracy"}}`` over the judged runs that are results, a run counted
    in each group ``groups_of(run)`` names (groups in order of first appearance)."""
    out: dict[str, dict[str, Any]] = {}
    for r in runs:
        if r.infra_failure or r.correct is None:
            continue
        for g in groups_of(r):
            row = out.setdefault(g, {"judged": 0, "correct": 0, "accuracy": None})
            row["judged"] += 1
            row["correct"] += bool(r.correct)
    for row in out.values():
        row["accuracy"] = row["correct"] / row["judged"]
    return out
