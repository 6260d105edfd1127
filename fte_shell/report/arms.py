"""The report's "Context arms" section ("Arms" when the runs compare retrievers too): when the runs compare
context strategies (``bench --context``) or retrievers (``bench --retrievers``), a row per arm (profile ×
retriever × strategy) with its accuracy, tokens, the prompt share the server's cache served,
cost, turns, stops, edits, and the FtE behaviour before and after the first edit. The paired tests
between arms are the "Paired comparisons" section's (every pair of rows). Definitions: docs/metrics.md
"Context arms"."""

from __future__ import annotations

from collections.abc import Sequence

from ..benchmarks.sections import ReportData, Section, Table, ci, integer, num, pct
from ..metrics import ProfileSummary
from ..metrics.arms import ArmSummary, summarize_arm
from ..metrics.groups import compares_corpus, compares_retrievers, has_arms
from .sections import usd


def arm_summaries(d: ReportData) -> list[ArmSummary]:
    """One :class:`ArmSummary` per row, in the report's order."""
    return [summarize_arm(p.label, d.groups[p.label]) for p in d.profiles]


def _stops(p: ProfileSummary) -> str:
    return ", ".join(f"{k} {v}" for k, v in p.stops.items()) or "–"


def arms_table(ps: Sequence[ProfileSummary], arms: Sequence[ArmSummary]) -> Table:
    """Outcome and what it cost, per arm."""
    head = ["Arm", "Runs", "Failed (infra)", "Accuracy", "95% CI (Wilson)", "Tokens", "Cached prompt", "Cost",
            "Turns", "Overflow", "Stops", "Edited", "Edits/run", "Most cleared"]
    rows = [[a.label, str(p.runs), str(p.failed), pct(p.accuracy), ci(p.accuracy_ci95), integer(p.tokens),
             pct(a.cache_share), usd(p.cost_usd), num(a.turns, 1), str(a.overflow), _stops(p), pct(a.edited),
             num(a.edits), integer(a.tokens_cleared)] for p, a in zip(ps, arms, strict=True)]
    return head, rows


def edits_table(arms: Sequence[ArmSummary]) -> Table:
    """The FtE behaviour split at the first edit, per arm (means per run)."""
    head = ["Arm", "Cached prompt before", "Cached prompt after", "Re-fetch before", "Re-fetch after",
            "Whole-cache grep before", "Whole-cache grep after", "grep/read of cleared"]
    rows = [[a.label, pct(a.cache_share_before), pct(a.cache_share_after), num(a.fetch_repeat_before),
             num(a.fetch_repeat_after), num(a.whole_cache_grep_before), num(a.whole_cache_grep_after),
             num(a.cleared_recalls)] for a in arms]
    return head, rows


def arms_section(d: ReportData) -> Section | None:
    """The section, when some run's context strategy is not keep_all or the runs used several retrievers."""
    if not has_arms(d.runs):
        return None
    arms = arm_summaries(d)
    retrievers = compares_retrievers(d.runs)
    notes = [
        ("Arm: profile" + (" (+corpus: its box held the sweep's corpus at /corpus)" if compares_corpus(d.runs) else "")
         + (" · retriever" if retrievers else "")
         + (" · context strategy" if any(r.context != "keep_all" for r in d.runs) else "")
         + ". Cached prompt: prompt tokens the model server's cache served over the prompt tokens of the runs "
         "whose server reports it (– when none does); an edit changes the prompt's prefix, so the cache serves less after it. Cost: USD of the arm's result runs. Turns: mean model turns. "
         "Overflow: runs that stopped context_overflow; Stops: runs per stop reason. Edited: share of runs with "
         "at least one context edit; Most cleared: mean per run of the most estimated prompt tokens one edit took "
         "out. "
         "Paired tests between arms: Paired comparisons."),
        ("Behaviour at the edits: the cached prompt share over the model calls before and at-or-after the first "
         "edit's turn; then means per run, over every result run of the arm: fetches of a document the "
         "workspace already held, and greps over every cached document, before and at-or-after the turn of the "
         "first edit (a run without edits counts wholly before); grep/read of cleared: greps and reads touching a "
         "document whose observation an edit had cleared (got back from the workspace instead of fetched again)."),
    ]
    return Section("Arms" if retrievers else "Context arms", [arms_table(d.profiles, arms), edits_table(arms)], notes,
                   metrics={"arms": [a.model_dump(mode="json") for a in arms]})
