"""Which row of a report a run belongs to: its profile, or its arm (profile × retriever × context strategy,
``+corpus`` for a corpus arm), split by model and config digest where the runs differ in them."""

from __future__ import annotations

from collections.abc import Sequence

from ..record.rundir import CORPUS_ARM
from .runs import RunMetrics


def compares_retrievers(runs: Sequence[RunMetrics]) -> bool:
    """Whether the runs used more than one retriever (``bench --retrievers``): rows are then arms."""
    return len({r.retriever for r in runs}) > 1


def has_arms(runs: Sequence[RunMetrics]) -> bool:
    """Whether the runs compare context strategies (some run's is not ``keep_all``) or retrievers
    (:func:`compares_retrievers`) or the corpus in the box (``bench --corpus-arm``): rows are then arms."""
    return any(r.context != "keep_all" for r in runs) or compares_retrievers(runs) or compares_corpus(runs)


def compares_corpus(runs: Sequence[RunMetrics]) -> bool:
    """Whether some profile ran both with and without the sweep's corpus in its box (``bench --corpus-arm``)."""
    boxed = {r.profile for r in runs if r.corpus_in_box}
    return any(r.profile in boxed and not r.corpus_in_box for r in runs)


def arm_label(run: RunMetrics, retrievers: bool, contexts: bool) -> str:
    """A run's arm as a row label: ``profile`` (``profile+corpus`` for a corpus arm's run), then ``· retriever`` when the runs compare retrievers, then ``· strategy`` when they
    compare context strategies."""
    profile = f"{run.profile}{CORPUS_ARM}" if run.corpus_in_box else run.profile
    label = f"{profile} · {run.retriever or 'no corpus'}" if retrievers else profile
    return f"{label} · {run.context}" if contexts else label


def group_key(run: RunMetrics, several_models: bool, split_digest: bool, arms: bool = False,
              retrievers: bool = False) -> str:
    """The row a run belongs to: its profile; ``profile · strategy`` when the runs compare context
    strategies (``arms``), ``profile · retriever[ · strategy]`` when they compare ``retrievers``; ``… ·
    model`` when the runs used several models; ``… · cfg XXXXXXXX`` (8 hex of the digest) when split by
    config digest."""
    label = arm_label(run, retrievers, arms)
    label = f"{label} · {run.model}" if several_models and run.model else label
    if split_digest:
        label += f" · cfg {run.config_digest[:8]}" if run.config_digest else " · cfg ?"
    return label


def group_label(run: RunMetrics, several_models: bool) -> str:
    """The row a run belongs to: its profile, or ``profile · model`` when the runs used several models."""
    return group_key(run, several_models, False)


def group_runs(runs: Sequence[RunMetrics]) -> dict[str, list[RunMetrics]]:
    """Runs per row label, in order of first appearance: by profile; by profile, retriever and context
    strategy when the runs compare retrievers or strategies (:func:`has_arms`); by model too when the runs used more than one model
    (sweeps of several backbones); and by config digest when runs of one row carry different
    ``config_digest`` values (runs without one form their own row)."""
    several, retr = len({r.model for r in runs if r.model}) > 1, compares_retrievers(runs)
    arms = any(r.context != "keep_all" for r in runs)
    digests: dict[str, set[str | None]] = {}
    for r in runs:
        digests.setdefault(group_key(r, several, False, arms, retr), set()).add(r.config_digest)
    out: dict[str, list[RunMetrics]] = {}
    for r in runs:
        base = group_key(r, several, False, arms, retr)
        out.setdefault(group_key(r, several, len(digests[base]) > 1, arms, retr), []).append(r)
    return out
