"""What a report section is (:class:`Section`, built from :class:`ReportData` by a
:data:`SectionBuilder`), where a benchmark's section goes (:class:`Placed`), and the cell formatters every
section uses. ``fte_shell.report.build`` lays the sections out; every number is defined in docs/metrics.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..metrics import ProfileSummary, RunMetrics
from ..metrics.runs import verdict_entry
from ..metrics.scores import accuracy_by
from ..metrics.stats import Paired, Repetitions
from ..record.rundir import read_judgement
from ..record.sweepdir import SweepDir

Table = tuple[list[str], list[list[str]]]


# --- formatting ---------------------------------------------------------------------------------------
def pct(x: float | None, digits: int = 1) -> str:
    """A share as a percentage (``–`` when unknown)."""
    return "–" if x is None else f"{100 * x:.{digits}f}%"


def num(x: float | None, digits: int = 2) -> str:
    """A mean with ``digits`` decimals (``–`` when unknown)."""
    return "–" if x is None else f"{x:,.{digits}f}"


def integer(x: float | None) -> str:
    """A rounded count with thousands separators."""
    return "–" if x is None else f"{x:,.0f}"


def ci(x: tuple[float, float] | None, share: bool = True) -> str:
    """An interval ``[lo, hi]`` (percent points when ``share``)."""
    if x is None:
        return "–"
    return f"[{100 * x[0]:.1f}, {100 * x[1]:.1f}]" if share else f"[{x[0]:.2f}, {x[1]:.2f}]"


def pvalue(p: float | None) -> str:
    """A p-value with 3 significant digits (``<0.001`` below)."""
    return "–" if p is None else "<0.001" if p < 0.001 else f"{p:.3g}"


def kappa(x: float | None) -> str:
    """An agreement coefficient with 3 decimals (``–`` when unknown; no ``-0.000``)."""
    return "–" if x is None else f"{round(x, 3) + 0.0:.3f}"


def pcts(d: dict[str, float], keys: Sequence[str] = ("p25", "p50", "p75", "p90")) -> list[str]:
    """Selected percentiles of a ``percentiles()`` dict as cells."""
    return [num(d.get(k), 1) for k in keys]


# --- data and sections --------------------------------------------------------------------------------
@dataclass
class ReportData:
    """Everything the section builders read."""

    roots: list[Path]
    """The sweep / run directories given."""

    runs: list[RunMetrics]
    """Every run found."""

    profiles: list[ProfileSummary]
    """One summary per row, in the report's order."""

    groups: dict[str, list[RunMetrics]]
    """Runs per row label (same order as ``profiles``)."""

    paired: list[Paired]
    """Every pair of rows with common judged (question, repetition) pairs."""

    repetitions: list[Repetitions]
    """Rows with more than one repetition."""

    warnings: list[str]
    """Problems a reader must see first (no tool calls, infrastructure failures)."""

    questions: dict[str, dict[str, Any]] = field(default_factory=dict)
    """``{qid: row}`` of the sweeps' ``questions.jsonl`` (gold answers, dataset meta)."""

    out: Path | None = None
    """The output directory (builders may write extra files there)."""


@dataclass
class Section:
    """One section of the report."""

    title: str
    """Heading."""

    tables: list[Table] = field(default_factory=list)
    """Tables, in order."""

    notes: list[str] = field(default_factory=list)
    """Paragraphs under the tables (plain text)."""

    metrics: dict[str, Any] = field(default_factory=dict)
    """Extra top-level keys of metrics.json."""

    html_only: bool = False
    """Shown in report.html only (report.md links the files named in ``notes``)."""


SectionBuilder = Callable[[ReportData], "Section | None"]


@dataclass(frozen=True)
class Placed:
    """A benchmark's section builder and where the report puts it."""

    build: SectionBuilder
    """Returns the section, or None when the report holds none of this benchmark's runs."""

    where: Literal["results", "analysis"] = "analysis"
    """``results``: right after the main results (the benchmark's own score); ``analysis``: after the
    analysis tables, before the per-question table."""


# --- helpers of the benchmarks' sections ---------------------------------------------------------------
def rows_of(d: ReportData, kind: str) -> dict[str, list[RunMetrics]]:
    """The report's rows (label → runs, in report order) kept to the runs of the sweeps of dataset ``kind``
    among ``d.roots``; rows without such runs are left out ({}: the report holds none)."""
    roots = [Path(r).resolve() for r in d.roots if SweepDir(Path(r)).dataset_kind() == kind]
    if not roots:
        return {}
    out: dict[str, list[RunMetrics]] = {}
    for p in d.profiles:
        mine = [r for r in d.groups.get(p.label, []) if any(Path(r.run_dir).resolve().is_relative_to(x) for x in roots)]
        if mine:
            out[p.label] = mine
    return out


def verdict_of(run: RunMetrics) -> dict[str, Any] | None:
    """The verdict a run is counted by (``judgement.json``'s primary verdict)."""
    return verdict_entry(read_judgement(Path(run.run_dir)))


def meta_of(d: ReportData, run: RunMetrics) -> dict[str, Any]:
    """The dataset meta of a run's question (``questions.jsonl``), {} when unknown."""
    return dict((d.questions.get(run.qid) or {}).get("meta") or {})


def accuracy_tables(d: ReportData, kind: str, dims: Sequence[tuple[str, Callable[[dict[str, Any]], Sequence[str]]]]
                    ) -> tuple[list[Table], dict[str, Any]]:
    """Accuracy per group of each dimension (``(name, groups of a question's meta)``) for each row of the
    runs of ``kind``: one table per dimension with a row per (profile, group); and the same numbers as a
    metrics.json value ``{dimension: {profile: {group: {judged, correct, accuracy}}}}``."""
    rows = rows_of(d, kind)
    tables: list[Table] = []
    metrics: dict[str, Any] = {}
    for name, groups in dims:
        per = {label: accuracy_by(runs, lambda r, g=groups: list(g(meta_of(d, r)))) for label, runs in rows.items()}
        per = {k: v for k, v in per.items() if v}
        if not per:
            continue
        metrics[name] = per
        body = [[label, g, str(x["judged"]), str(x["correct"]), pct(x["accuracy"])]
                for label, by in per.items() for g, x in by.items()]
        tables.append((["Profile", name, "Judged runs", "Correct", "Accuracy"], body))
    return tables, metrics
