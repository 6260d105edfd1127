"""Statistics a reviewer accepts, over judged runs (definitions: ``docs/metrics.md``).

- Accuracy: a **Wilson score interval** (95 %, z = 1.96) over the judged runs of a profile.
- Two profiles on the same questions: the **paired difference** of accuracy with a **paired (cluster)
  bootstrap** 95 % interval (questions resampled with replacement, ``BOOTSTRAP_RESAMPLES`` resamples,
  fixed seed ``BOOTSTRAP_SEED`` so a report is reproducible; percentile interval), and an **exact
  McNemar** test (two-sided binomial test of the discordant counts against p = 1/2).
- With several repetitions: accuracy mean ± sample sd over repetitions, best-of-K and pass@K.

Only runs that are results (not infrastructure failures) and have a verdict take part.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict

from .runs import RunMetrics, run_status

Z95 = 1.959963984540054
BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 20260101
PERCENTILES = (10, 25, 50, 75, 90)
"""Percentiles reported for pattern lengths and read windows."""


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """Wilson score interval of ``k`` successes in ``n`` trials; None for ``n == 0``. Clamped so that it
    always holds the estimate ``k / n`` and stays within [0, 1] (in floating point ``centre - half`` is
    5.6e-17 at 0/3, above the estimate: a negative error bar)."""
    if n <= 0:
        return None
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return min(p, max(0.0, centre - half)), max(p, min(1.0, centre + half))


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value: ``min(1, 2 · P(X ≤ min(b, c)))`` for X ~ Binomial(b + c, 1/2);
    1.0 without discordant pairs."""
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2**n
    return min(1.0, 2 * tail)


def cohen_kappa(pairs: Sequence[tuple[bool, bool]]) -> float | None:
    """Cohen's κ of two raters' yes/no labels on the same items: ``(p_o - p_e) / (1 - p_e)``, with ``p_o``
    the share of items they agree on and ``p_e`` the agreement expected by chance from each rater's own
    share of ``True``. None without items; 1.0 when both raters give one and the same label to every item
    (``p_e == 1``: perfect agreement, nothing left to chance), 0.0 when they never agree and ``p_e == 1``
    cannot happen then."""
    n = len(pairs)
    if n == 0:
        return None
    p_o = sum(a == b for a, b in pairs) / n
    pa, pb = sum(a for a, _ in pairs) / n, sum(b for _, b in pairs) / n
    p_e = pa * pb + (1 - pa) * (1 - pb)
    if p_e >= 1.0:
        return 1.0
    return (p_o - p_e) / (1 - p_e)


def _quantile(sorted_xs: Sequence[float], q: float) -> float:
    pos = (len(sorted_xs) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def percentile(xs: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile with linear interpolation between order statistics (position
    ``(n - 1) * q / 100`` of the sorted values; numpy's default); None for no values."""
    return _quantile(sorted(xs), q / 100) if xs else None


def percentiles(xs: Sequence[float]) -> dict[str, float]:
    """``{"p10": …, …, "p90": …}`` of :data:`PERCENTILES` ({} for no values)."""
    return {f"p{q}": percentile(xs, q) for q in PERCENTILES} if xs else {}  # type: ignore[misc]


def paired_bootstrap(
    clusters: Sequence[Sequence[float]], *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> tuple[float, float] | None:
    """95 % percentile interval of the mean paired difference. ``clusters`` holds, per question, the
    differences (a − b, each −1, 0 or 1) of its paired repetitions; questions are resampled with
    replacement (numpy's ``default_rng(seed)``) and the mean over all differences of a resample is taken.
    None without questions."""
    qs = [list(c) for c in clusters if c]
    if not qs:
        return None
    import numpy as np  # a dependency of matplotlib, which the report needs anyway

    rng = np.random.default_rng(seed)
    n = len(qs)
    sums = np.array([sum(c) for c in qs], dtype=float)
    sizes = np.array([len(c) for c in qs], dtype=float)
    chunks = []
    left = resamples
    while left > 0:
        m = min(left, 1000)
        idx = rng.integers(0, n, size=(m, n))
        chunks.append(sums[idx].sum(axis=1) / sizes[idx].sum(axis=1))
        left -= m
    means = sorted(float(x) for x in np.concatenate(chunks))
    return _quantile(means, 0.025), _quantile(means, 0.975)


class Paired(_M):
    """Two profiles compared on the questions (and repetitions) both have a verdict for."""

    a: str
    """Row label of the first profile."""

    b: str
    """Row label of the second profile."""

    n: int
    """Paired observations: (question, repetition) pairs judged in both."""

    a_only: int
    """Pairs only ``a`` got right."""

    b_only: int
    """Pairs only ``b`` got right."""

    diff: float | None
    """Accuracy of ``a`` minus accuracy of ``b`` over the pairs."""

    diff_ci95: tuple[float, float] | None
    """Paired bootstrap 95 % interval of ``diff`` (questions resampled)."""

    p_value: float | None
    """Exact McNemar p-value of ``a_only`` against ``b_only``."""


def verdicts(runs: Sequence[RunMetrics]) -> dict[tuple[str, int], bool]:
    """``{(qid, rep): correct}`` of the judged runs that are results."""
    return {(r.qid, r.rep): bool(r.correct) for r in runs if not r.infra_failure and r.correct is not None}


def paired(label_a: str, runs_a: Sequence[RunMetrics], label_b: str, runs_b: Sequence[RunMetrics],
           *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> Paired:
    """Compare two profiles on the (question, repetition) pairs judged in both (see the module doc)."""
    va, vb = verdicts(runs_a), verdicts(runs_b)
    keys = sorted(set(va) & set(vb))
    a_only = sum(1 for k in keys if va[k] and not vb[k])
    b_only = sum(1 for k in keys if vb[k] and not va[k])
    clusters: dict[str, list[float]] = {}
    for k in keys:
        clusters.setdefault(k[0], []).append(float(va[k]) - float(vb[k]))
    n = len(keys)
    return Paired(
        a=label_a, b=label_b, n=n, a_only=a_only, b_only=b_only,
        diff=(a_only - b_only) / n if n else None,
        diff_ci95=paired_bootstrap(list(clusters.values()), resamples=resamples, seed=seed),
        p_value=mcnemar_exact(a_only, b_only) if n else None,
    )


class Repetitions(_M):
    """Accuracy over K repetitions of one profile (shown only when K > 1)."""

    label: str
    """Row label."""

    k: int
    """Repetitions with at least one verdict."""

    per_rep: list[float]
    """Accuracy of each repetition (judged runs of that repetition), in repetition order."""

    mean: float
    """Mean of ``per_rep``."""

    sd: float | None
    """Sample standard deviation (n − 1) of ``per_rep``; None for one repetition."""

    best_of_k: float
    """The best repetition's accuracy (the paper reports the best of three runs)."""

    pass_at_k: float
    """Share of questions with at least one correct repetition (among questions with a verdict)."""


def repetitions_of(label: str, v: Mapping[tuple[str, int], bool]) -> Repetitions | None:
    """:class:`Repetitions` (Tongyi's Avg@K = ``mean``, Best@K = ``best_of_k``, Pass@K = ``pass_at_k``) of
    ``{(qid, rep): correct}`` verdicts, whoever judged them; None unless they hold more than one
    repetition."""
    reps = sorted({rep for _, rep in v})
    if len(reps) < 2:
        return None
    per_rep = []
    for rep in reps:
        xs = [ok for (_, r), ok in v.items() if r == rep]
        per_rep.append(sum(xs) / len(xs))
    mean = sum(per_rep) / len(per_rep)
    sd = math.sqrt(sum((x - mean) ** 2 for x in per_rep) / (len(per_rep) - 1))
    by_q: dict[str, bool] = {}
    for (q, _), ok in v.items():
        by_q[q] = by_q.get(q, False) or ok
    return Repetitions(label=label, k=len(reps), per_rep=per_rep, mean=mean, sd=sd, best_of_k=max(per_rep),
                       pass_at_k=sum(by_q.values()) / len(by_q))


def repetitions(label: str, runs: Sequence[RunMetrics]) -> Repetitions | None:
    """:class:`Repetitions` of one profile's runs by their primary verdicts (:func:`repetitions_of`)."""
    return repetitions_of(label, verdicts(runs))


def per_question(groups: dict[str, Sequence[RunMetrics]]) -> tuple[list[str], list[list[str]]]:
    """The question × profile table: one row per question id (first-seen order), one column per row
    label; a cell is the status of each repetition (``correct``, ``wrong``, ``failed``, ``unjudged``),
    joined by ``/`` in repetition order, or empty when the profile has no run of that question."""
    labels = list(groups)
    cells: dict[str, dict[str, list[tuple[int, str]]]] = {}
    for label, runs in groups.items():
        for r in runs:
            cells.setdefault(r.qid, {}).setdefault(label, []).append((r.rep, run_status(r)))
    rows = []
    for qid, by_label in cells.items():
        rows.append([qid, *["/".join(s for _, s in sorted(by_label.get(lab, []))) for lab in labels]])
    return ["question", *labels], rows
