"""Behavioural metrics of runs, from their run directories, for every profile (definitions:
``docs/metrics.md``).

- :mod:`.actions`: a run's tool calls as :class:`Action` s in one vocabulary, and the revisit rule;
- :mod:`.runs`: :class:`RunMetrics` of one run directory, discovery of run directories;
- :mod:`.summary`: :class:`ProfileSummary`, the per-profile numbers and the paper's analysis tables.
"""

from .actions import (
    CATEGORY,
    EXTRACTING_OPS,
    MOUNT,
    RECORD_RE,
    SHELL_TOOL,
    STRUCTURED_OPS,
    Action,
    Category,
    Op,
    actions_from_events,
    materialized_pages,
    ngrams,
    records,
    revisited_docs,
)
from .groups import group_label, group_runs
from .runs import RunMetrics, collect, judged, run_metrics, run_status
from .stats import PERCENTILES, percentile, percentiles
from .summary import REGEX_META, ProfileSummary, summarize, summarize_profile

__all__ = [
    "CATEGORY", "EXTRACTING_OPS", "MOUNT", "PERCENTILES", "RECORD_RE", "REGEX_META", "SHELL_TOOL",
    "STRUCTURED_OPS", "Action", "Category", "Op", "ProfileSummary", "RunMetrics", "actions_from_events",
    "collect", "group_label", "group_runs", "judged", "materialized_pages", "ngrams", "percentile",
    "percentiles", "records", "revisited_docs", "run_metrics", "run_status",
    "summarize", "summarize_profile",
]
