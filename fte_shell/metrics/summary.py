"""Per-profile numbers (:class:`ProfileSummary`): means per question over the runs that are results,
the pooled ratios, and the paper's analysis tables (3, 7, 8, 9, 10). Definitions: ``docs/metrics.md``."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from pydantic import Field

from ..stops import STOPS
from .actions import _M, ngrams
from .groups import compares_retrievers, group_runs
from .runs import RunMetrics
from .stats import percentiles, wilson

REGEX_META = frozenset(".*+?[](){}|^$\\")
"""Characters that make a grep pattern a regular expression rather than a literal (Table 7)."""


class ProfileSummary(_M):
    """Per-profile averages over its runs (per question, then averaged)."""

    profile: str
    """Profile name."""

    model: str | None = None
    """The backbone model of the runs (None when unknown)."""

    config_digest: str | None = None
    """The runs' ``config_digest`` when the report had to split a profile's runs by digest, else None."""

    context: str | None = None
    """The runs' context strategy (``keep_recent:5``) when the runs compare several (a row per arm, profile ×
    strategy), else None."""

    retriever: str | None = None
    """The runs' retriever when the runs compare several (a row per arm, profile × retriever), else None."""

    label: str = ""
    """Unique row label: the profile, ``profile · model`` with several models, ``… · cfg XXXXXXXX`` when
    runs of the same profile and model used different configs."""

    runs: int
    """Runs found (results and infrastructure failures)."""

    failed: int
    """Infrastructure failures (:func:`fte_shell.stops.is_infra_failure`, or no ``result.json``): not
    results, left out of every number below."""

    judged: int
    """Finished runs with a verdict."""

    accuracy: float | None
    """Share of judged runs judged correct."""

    accuracy_ci95: tuple[float, float] | None = None
    """Wilson score 95 % interval of ``accuracy`` (over the judged runs); None without verdicts."""

    f1: float | None
    """Mean token F1 (model-free judge), if any."""

    answered: float | None
    """Share of finished runs that ended with an answer."""

    search: float | None
    """Mean #Search per question."""

    select: float | None
    """Mean #Select per question."""

    extract: float | None
    """Mean #Extract per question."""

    grep: float | None
    """Mean grep-like extractions per question."""

    read: float | None
    """Mean read-like extractions per question."""

    list: float | None
    """Mean listings per question."""

    other: float | None
    """Mean other actions per question."""

    calls: float | None
    """Mean tool calls per question."""

    revisit_rate: float | None
    """Mean revisit rate over runs with at least one materialized document."""

    grep_read_ratio: float | None
    """Total grep-like / total read-like extractions (None without reads)."""

    whole_cache_grep_share: float | None
    """Share of questions with at least one whole-cache grep."""

    fetch_repeat_pct: float | None
    """Percent of fetches that named an already cached document (None without fetches)."""

    cache_files: float | None
    """Mean end-of-run cache size in files."""

    cache_chars: float | None
    """Mean end-of-run cache size in body characters."""

    tokens: float | None
    """Mean total tokens per question."""

    prompt_tokens: float | None
    """Mean prompt tokens per question."""

    completion_tokens: float | None
    """Mean completion tokens per question."""

    summary_tokens: float | None
    """Mean reader-model tokens per question (visit-summary's ``visit``; 0 for other profiles), not
    included in ``tokens``."""

    wall_s: float | None
    """Mean wall-clock seconds per question."""

    cost_usd: float | None = None
    """USD the profile's runs (results only) cost in all; None unless every one of them has a cost."""

    cost_per_run: float | None = None
    """``cost_usd`` / runs (results only): the mean cost of one run."""

    cost_per_correct: float | None = None
    """USD of the judged runs / the judged runs judged correct; None without a correct run or a cost."""

    fetch: float | None = None
    """Mean fetch actions per question (Table 3)."""

    unique_fetches: float | None = None
    """Mean distinct documents fetched per question (Table 10)."""

    repeated_fetches: float | None = None
    """Mean fetches of an already held document per question (Table 10)."""

    refused: float | None = None
    """Mean refused tool calls per question (ablation arms)."""

    stops: dict[str, int] = Field(default_factory=dict)
    """Runs that are results, per stop reason (``answer``, ``max_turns``, ``stuck`` …; in the order of
    :data:`fte_shell.stops.STOPS`)."""

    stuck_noticed: int = 0
    """Runs (results) that got at least one stuck-detector notice."""

    stuck_went_on: int = 0
    """Of those, runs that did not end ``stuck`` (the model changed course after a notice)."""

    grep_pattern_chars: dict[str, float] = Field(default_factory=dict)
    """Percentiles (``p10`` … ``p90``) of grep pattern lengths in characters, over all grep actions (Table 7)."""

    grep_regex_share: float | None = None
    """Share of grep patterns with a regex metacharacter (:data:`REGEX_META`) (Table 7)."""

    grep_whole_cache_call_share: float | None = None
    """Share of grep actions (with a known scope) over the whole cache (Table 7)."""

    grep_single_file_call_share: float | None = None
    """Share of grep actions (with a known scope) naming one file (Table 7)."""

    read_offset_share: float | None = None
    """Share of read actions with an explicit offset (Table 8)."""

    read_limit_share: float | None = None
    """Share of read actions with an explicit limit (Table 8)."""

    read_offsets: dict[str, float] = Field(default_factory=dict)
    """Percentiles of the explicit offsets (Table 8)."""

    read_limits: dict[str, float] = Field(default_factory=dict)
    """Percentiles of the explicit limits (Table 8)."""

    bigram_pct: list[tuple[str, float]] = Field(default_factory=list)
    """Most frequent bigrams as percent of all bigrams (Table 9)."""

    trigram_pct: list[tuple[str, float]] = Field(default_factory=list)
    """Most frequent trigrams as percent of all trigrams (Table 9)."""

    no_tool_calls: bool = False
    """The profile has results but none of its runs made a tool call (a misconfigured model?)."""

    distribution: dict[str, float] = Field(default_factory=dict)
    """Share of each op among all actions."""

    bigrams: list[tuple[str, int]] = Field(default_factory=list)
    """Most frequent op bigrams (``a→b``) with counts, pooled over runs."""

    trigrams: list[tuple[str, int]] = Field(default_factory=list)
    """Most frequent op trigrams with counts."""


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def summarize_profile(profile: str, runs: Sequence[RunMetrics], top: int = 10) -> ProfileSummary:
    """Average ``runs`` of one profile (see :class:`ProfileSummary` for each definition). Runs that are
    infrastructure failures count in ``failed`` only."""
    ok = [r for r in runs if not r.infra_failure]
    first = runs[0] if runs else None
    return ProfileSummary(
        profile=first.profile if first else profile,
        model=first.model if first else None,
        label=profile,
        runs=len(runs),
        failed=len(runs) - len(ok),
        **_outcomes(ok),
        **_tool_use(ok),
        **_costs(ok),
        **_grep_and_read_shapes(ok),
        **_op_sequences(ok, top),
    )


def _outcomes(ok: Sequence[RunMetrics]) -> dict[str, Any]:
    """Judged, accuracy (with its Wilson interval), F1, answered share."""
    judged = [r for r in ok if r.correct is not None]
    n_correct = sum(1 for r in judged if r.correct)
    return {
        "judged": len(judged),
        "accuracy": _mean([1.0 if r.correct else 0.0 for r in judged]),
        "accuracy_ci95": wilson(n_correct, len(judged)),
        "f1": _mean([r.f1 for r in ok if r.f1 is not None]),
        "answered": _mean([1.0 if r.answered else 0.0 for r in ok]),
    }


def _tool_use(ok: Sequence[RunMetrics]) -> dict[str, Any]:
    """Per-run means of the calls by kind, the cache, tokens and time; fetch repeats, stops and stuck."""
    reads = sum(r.n_read for r in ok)
    fetches = sum(r.n_fetch for r in ok)

    def m(attr: str) -> float | None:
        return _mean([float(getattr(r, attr)) for r in ok])

    return {
        "search": m("n_search"),
        "select": m("n_select"),
        "extract": m("n_extract"),
        "grep": m("n_grep"),
        "read": m("n_read"),
        "list": m("n_list"),
        "other": m("n_other"),
        "calls": m("calls"),
        "revisit_rate": _mean([r.revisit_rate for r in ok if r.revisit_rate is not None]),
        "grep_read_ratio": (sum(r.n_grep for r in ok) / reads) if reads else None,
        "whole_cache_grep_share": _mean([1.0 if r.n_whole_cache_grep else 0.0 for r in ok]),
        "fetch_repeat_pct": (100.0 * sum(r.n_fetch_repeat for r in ok) / fetches) if fetches else None,
        "cache_files": m("cache_files"),
        "cache_chars": m("cache_chars"),
        "tokens": m("total_tokens"),
        "prompt_tokens": m("prompt_tokens"),
        "completion_tokens": m("completion_tokens"),
        "summary_tokens": m("summary_tokens"),
        "wall_s": m("wall_s"),
        "fetch": m("n_fetch"),
        "unique_fetches": m("n_unique_fetch"),
        "repeated_fetches": m("n_fetch_repeat"),
        "refused": m("n_refused"),
        "stops": {x.name: n for x in STOPS if (n := sum(1 for r in ok if r.stop_reason == x.name))},
        "stuck_noticed": sum(1 for r in ok if r.stuck_notices),
        "stuck_went_on": sum(1 for r in ok if r.stuck_notices and r.stop_reason != "stuck"),
        "no_tool_calls": bool(ok) and all(r.calls == 0 for r in ok),
    }


def _costs(ok: Sequence[RunMetrics]) -> dict[str, Any]:
    """Total cost (None unless every run is priced), per run and per correct answer."""
    costs = [r.cost_usd for r in ok]
    priced = bool(ok) and all(c is not None for c in costs)
    cost = sum(c for c in costs if c is not None) if priced else None
    judged = [r for r in ok if r.correct is not None]
    n_correct = sum(1 for r in judged if r.correct)
    judged_cost = sum(r.cost_usd or 0.0 for r in judged)
    return {
        "cost_usd": cost,
        "cost_per_run": cost / len(ok) if cost is not None else None,
        "cost_per_correct": judged_cost / n_correct if cost is not None and n_correct else None,
    }


def _grep_and_read_shapes(ok: Sequence[RunMetrics]) -> dict[str, Any]:
    """How grep patterns and read windows look: pattern lengths, regex and scope shares, offsets, limits."""
    patterns = [p for r in ok for p in r.grep_patterns]
    scopes: Counter[str] = Counter()
    for r in ok:
        scopes.update(r.grep_scopes)
    n_scoped = sum(scopes.values())
    windows = [w for r in ok for w in r.read_windows]
    offsets = [float(o) for o, _ in windows if o is not None]
    limits = [float(lim) for _, lim in windows if lim is not None]
    return {
        "grep_pattern_chars": percentiles([float(len(p)) for p in patterns]),
        "grep_regex_share": _share(sum(1 for p in patterns if REGEX_META & set(p)), len(patterns)),
        "grep_whole_cache_call_share": _share(scopes["all"], n_scoped),
        "grep_single_file_call_share": _share(scopes["one"], n_scoped),
        "read_offset_share": _share(len(offsets), len(windows)),
        "read_limit_share": _share(len(limits), len(windows)),
        "read_offsets": percentiles(offsets),
        "read_limits": percentiles(limits),
    }


def _op_sequences(ok: Sequence[RunMetrics], top: int) -> dict[str, Any]:
    """The operation distribution and the ``top`` bigrams and trigrams of operations (counts and %)."""
    ops = Counter(op for r in ok for op in r.ops)
    n_ops = sum(ops.values())
    bi: Counter[tuple[str, ...]] = Counter()
    tri: Counter[tuple[str, ...]] = Counter()
    for r in ok:
        bi.update(ngrams(r.ops, 2))
        tri.update(ngrams(r.ops, 3))
    n_bi, n_tri = sum(bi.values()), sum(tri.values())
    return {
        "bigram_pct": [("→".join(k), 100.0 * v / n_bi) for k, v in bi.most_common(top)],
        "trigram_pct": [("→".join(k), 100.0 * v / n_tri) for k, v in tri.most_common(top)],
        "distribution": {k: v / n_ops for k, v in sorted(ops.items())} if n_ops else {},
        "bigrams": [("→".join(k), v) for k, v in bi.most_common(top)],
        "trigrams": [("→".join(k), v) for k, v in tri.most_common(top)],
    }


def summarize(runs: Sequence[RunMetrics]) -> list[ProfileSummary]:
    """One :class:`ProfileSummary` per row of :func:`group_runs`, in order of first appearance."""
    out = []
    arms, retr = any(r.context != "keep_all" for r in runs), compares_retrievers(runs)
    for label, rs in group_runs(runs).items():
        s = summarize_profile(label, rs)
        if " · cfg " in label:
            s.config_digest = rs[0].config_digest
        if arms:
            s.context = rs[0].context
        if retr:
            s.retriever = rs[0].retriever or "no corpus"
        out.append(s)
    return out
