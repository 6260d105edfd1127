"""Per-arm numbers of a sweep that compares context strategies (:class:`ArmSummary`; an arm is a row of
:func:`fte_shell.metrics.groups.group_runs`: profile × strategy). Accuracy, tokens and cost are the
row's :class:`~fte_shell.metrics.summary.ProfileSummary`; these are what the strategy changes besides.
Definitions: ``docs/metrics.md`` "Context arms"."""

from __future__ import annotations

from collections.abc import Sequence

from .actions import _M
from .runs import RunMetrics


class ArmSummary(_M):
    """One arm's context numbers, over its runs that are results (infrastructure failures left out);
    "per run" means are over those runs, edited or not."""

    label: str
    """The row label (``fte · keep_recent:5``)."""

    context: str
    """The strategy (``keep_recent:5``)."""

    results: int
    """Runs that are results."""

    turns: float | None
    """Mean model turns per run."""

    overflow: int = 0
    """Runs that stopped ``context_overflow`` (the counts of every stop reason: ``ProfileSummary.stops``)."""

    edited: float | None = None
    """Share of runs with at least one edit."""

    edits: float | None = None
    """Mean edits per run."""

    tokens_cleared: float | None = None
    """Mean per run of ``tokens_cleared_max`` (the most estimated prompt tokens one edit took out)."""

    cache_share: float | None = None
    """Prompt tokens the server's cache served / the prompt tokens of the calls whose usage says how many
    were cached, pooled over the runs; None when no call's did."""

    cache_share_before: float | None = None
    """``cache_share`` over the model calls before the first edit (every call of a run without edits)."""

    cache_share_after: float | None = None
    """``cache_share`` over the model calls at or after the first edit."""

    fetch_repeat_before: float | None = None
    """Mean fetches of a held document per run before the first edit (a run without edits: all of them)."""

    fetch_repeat_after: float | None = None
    """Mean fetches of a held document per run at or after the first edit."""

    whole_cache_grep_before: float | None = None
    """Mean whole-cache greps per run before the first edit."""

    whole_cache_grep_after: float | None = None
    """Mean whole-cache greps per run at or after the first edit."""

    cleared_recalls: float | None = None
    """Mean grep/read actions per run on a document whose observation an edit had cleared."""


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def summarize_arm(label: str, runs: Sequence[RunMetrics]) -> ArmSummary:
    """The :class:`ArmSummary` of one row's runs."""
    ok = [r for r in runs if not r.infra_failure]
    e = [r.edits for r in ok]
    known, late = sum(x.cache_known_prompt_tokens for x in e), sum(x.cache_known_prompt_tokens_after for x in e)
    cached, cached_late = sum(x.cached_prompt_tokens for x in e), sum(x.cached_prompt_tokens_after for x in e)
    m = _mean
    return ArmSummary(
        label=label,
        context=runs[0].context if runs else "keep_all",
        results=len(ok),
        turns=m([float(r.turns) for r in ok]),
        overflow=sum(1 for r in ok if r.stop_reason == "context_overflow"),
        edited=m([1.0 if r.edits.edits else 0.0 for r in ok]),
        edits=m([float(r.edits.edits) for r in ok]),
        tokens_cleared=m([float(r.edits.tokens_cleared_max) for r in ok]),
        cache_share=cached / known if known else None,
        cache_share_before=(cached - cached_late) / (known - late) if known - late else None,
        cache_share_after=cached_late / late if late else None,
        fetch_repeat_before=m([float(r.n_fetch_repeat - r.edits.fetch_repeat_after) for r in ok]),
        fetch_repeat_after=m([float(r.edits.fetch_repeat_after) for r in ok]),
        whole_cache_grep_before=m([float(r.n_whole_cache_grep - r.edits.whole_cache_grep_after) for r in ok]),
        whole_cache_grep_after=m([float(r.edits.whole_cache_grep_after) for r in ok]),
        cleared_recalls=m([float(r.edits.cleared_recalls) for r in ok]),
    )
