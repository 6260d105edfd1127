"""Reports: ``report.md`` and one self-contained ``report.html`` (plots embedded as base64 PNG), plus
``metrics.json`` (every number shown), ``per_question.csv`` and the PNG files, from one or more sweep / run
directories.

The report is a list of sections (:func:`sections`, general builders in :mod:`.sections`): main
results with Wilson intervals and a model column, the context arms (when runs compare context
strategies), the judges (which graded each row, accuracy under each,
Cohen's κ between them), the benchmarks' own scores (WideSearch), repetitions
(K > 1), paired comparisons (paired bootstrap, exact McNemar), stops (per stop reason, stuck notices),
behaviour, the paper's analysis tables (3, 7, 8, 9, 10), the benchmarks' analyses (BrowseComp-Plus
evidence recall, when the sweep's questions carry relevance judgments), and the per-question table. A
benchmark adds its own sections through :meth:`fte_shell.benchmarks.base.Benchmark.report_sections`. Runs that are infrastructure failures are
counted apart and left out of every score and mean.
"""

from __future__ import annotations

import base64
import contextlib
import csv
import datetime as _dt
import html
import itertools
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from ..benchmarks.registry import report_sections
from ..benchmarks.sections import ReportData, Section, SectionBuilder, Table
from ..errors import FteError
from ..metrics import ProfileSummary, RunMetrics, collect, group_runs, summarize
from ..metrics.arms import ArmSummary
from ..metrics.groups import has_arms
from ..metrics.stats import paired, per_question, repetitions
from ..record.rundir import runs_under
from ..record.sweepdir import SweepDir
from .arms import arm_summaries, arms_section
from .audit import audit_section
from .judges import judges_section
from .plots import make_plots
from .sections import (
    analysis_section,
    behaviour_section,
    main_section,
    paired_section,
    repetitions_section,
    stops_section,
)

PROFILE_ORDER = ["shell", "fte", "fte-no-grep", "fte-no-read", "fte-single-grep", "open-find", "visit-snippet",
                 "visit-summary", "snippet-only"]
"""Default row order (``fte-shell report --order`` replaces it); unknown profiles follow, by name."""


class Report(BaseModel):
    """What :func:`write_report` produced."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    out: Path
    """Output directory."""

    markdown: Path
    """``report.md``."""

    html: Path
    """``report.html`` (self-contained)."""

    metrics: Path
    """``metrics.json``."""

    per_question: Path
    """``per_question.csv`` (question × profile: correct / wrong / failed / unjudged)."""

    plots: list[Path]
    """The PNG files."""

    profiles: list[ProfileSummary]
    """The per-profile summaries shown."""

    arms: list[ArmSummary]
    """The context numbers of each row when the runs compare context strategies (else empty)."""

    warnings: list[str]
    """Warnings shown at the top of the report."""


def ordered(profiles: Sequence[ProfileSummary], order: Sequence[str] | None = None,
            contexts: Sequence[str] = (), retrievers: Sequence[str] = ()) -> list[ProfileSummary]:
    """Rows by model (first appearance), then by the profile's place in ``order`` (default
    :data:`PROFILE_ORDER`; unknown profiles after, by name), then by the retriever's place in
    ``retrievers`` (the sweeps' ``--retrievers`` order, others after), then by the context strategy's place
    in ``contexts`` (the sweeps' ``--context`` order; keep_all first, others after, by name), then by label."""
    rank = {p: i for i, p in enumerate(order or PROFILE_ORDER)}
    arm = {c: i for i, c in enumerate(dict.fromkeys([*contexts, "keep_all"]))}
    ret = {r: i for i, r in enumerate(retrievers)}
    models = list(dict.fromkeys(p.model for p in profiles))
    return sorted(profiles, key=lambda s: (models.index(s.model), rank.get(s.profile, len(rank)), s.profile,
                                           ret.get(s.retriever or "", len(ret)), arm.get(s.context or "keep_all", len(arm)),
                                           s.label))


def _axes(roots: Sequence[Path]) -> tuple[list[str], list[str]]:
    """The context strategies and the retrievers of the sweeps under ``roots``, in their ``--context`` and
    ``--retrievers`` order."""
    contexts: list[str] = []
    retrievers: list[str] = []
    for root in roots:
        with contextlib.suppress(FteError):
            m = SweepDir(Path(root)).manifest()
            contexts += m.contexts if m is not None else []
            retrievers += m.retrievers if m is not None else []
    return list(dict.fromkeys(contexts)), list(dict.fromkeys(retrievers))


def md_table(t: Table) -> str:
    head, rows = t
    esc: Callable[[str], str] = lambda s: s.replace("|", "\\|")
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def html_table(t: Table) -> str:
    head, rows = t
    h = "".join(f"<th>{html.escape(c)}</th>" for c in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{h}</tr></thead><tbody>{body}</tbody></table>"


def per_question_section(d: ReportData) -> Section:
    """The question × profile table (HTML, and ``per_question.csv`` for every report)."""
    return Section("Per question", [per_question(d.groups)], [("Also in per_question.csv. Cells: the status of each "
                   "repetition (correct / wrong / failed = infrastructure / unjudged), joined by /.")], html_only=True)


def sections() -> list[SectionBuilder]:
    """The report's sections in order: the main results, the judges (when verdicts name their preset or
    several judges graded), the benchmarks' own scores (``results``), the general sections, the
    benchmarks' analyses (``analysis``), the per-question table. A benchmark adds
    its sections through :meth:`fte_shell.benchmarks.base.Benchmark.report_sections`."""
    placed = list(report_sections())
    return [main_section, arms_section, judges_section, *[x.build for x in placed if x.where == "results"],
            audit_section, repetitions_section, paired_section, stops_section, behaviour_section, analysis_section,
            *[x.build for x in placed if x.where == "analysis"],
            per_question_section]


CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:14px}th,td{border:1px solid #ccc;padding:4px 8px;
text-align:right}th:first-child,td:first-child{text-align:left}thead{background:#f3f3f3}
img{max-width:100%;margin:.5em 0}code{background:#f3f3f3;padding:0 3px}.note{color:#555;font-size:13px}
.warn{background:#fff3cd;border:1px solid #e0c36b;padding:6px 10px}"""

NOTES = [
    ("Counts are means per question (per run with --runs K); infrastructure failures are counted apart and left "
    "out of every mean."),
    ("Tokens are the agent model's (prompt + completion); visit-summary's reader-model tokens are counted apart "
    "(Reader tokens, shown when any run spent some)."),
    ("Cost (shown when the model's price is known) is what the profile's result runs cost in USD (the reader "
    "model's tokens included) at the price of each run; Cost/run its mean; Cost/correct the cost of the judged runs over the judged-correct "
    "ones. Infrastructure failures cost money too but are not in it."),
    ("#Select = fetch/visit/open; #Extract = grep/read/find (shell: grep-like and read-like commands with document "
    "operands, also inside bash -c scripts). Refused: calls the profile refused (ablation arms). Every number is "
    "defined in docs/metrics.md."),
]


def _questions(roots: Sequence[Path]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for root in roots:
        for qid, row in SweepDir(Path(root)).questions().items():
            if isinstance(row.get("id"), str):
                out.setdefault(qid, row)
    return out


def _warnings(ps: Sequence[ProfileSummary]) -> list[str]:
    out = []
    for p in ps:
        if p.no_tool_calls:
            out.append(f"{p.label}: none of its {p.runs - p.failed} finished run(s) made a tool call — check the model "
                       "set-up (tool calling enabled? the server's tool-call parser? docs/run.md 'Server kinds': "
                       "model.parse_text_tool_calls, agent.first_tool_choice) before reading its numbers as a "
                       "property of the interface.")
        if p.failed:
            out.append(f"{p.label}: {p.failed} of {p.runs} run(s) failed (infrastructure) and are left out of every "
                       "score and mean.")
    return out


def build_data(roots: Sequence[Path], order: Sequence[str] | None = None, out: Path | None = None) -> ReportData:
    """Collect the runs under ``roots`` and compute everything the sections show."""
    for r in roots:
        runs_under(Path(r))
    runs: list[RunMetrics] = collect([Path(r) for r in roots])
    groups = group_runs(runs)
    ps = ordered(summarize(runs), order, *_axes(roots))
    groups = {p.label: groups[p.label] for p in ps}
    pairs = [x for a, b in itertools.combinations(ps, 2) if (x := paired(a.label, groups[a.label], b.label,
                                                                           groups[b.label])).n]
    reps = [x for p in ps if (x := repetitions(p.label, groups[p.label])) is not None]
    return ReportData(roots=[Path(r) for r in roots], runs=runs, profiles=ps, groups=groups, paired=pairs,
                      repetitions=reps, warnings=_warnings(ps), questions=_questions(roots), out=out)


def write_report(roots: Sequence[Path], out: Path, *, title: str = "fte-shell benchmark report",
                 order: Sequence[str] | None = None) -> Report:
    """Collect every run under ``roots`` and write the report files into ``out``; ``order`` lists profiles
    in the order their rows appear (default :data:`PROFILE_ORDER`)."""
    out = Path(out)
    d = build_data(roots, order, out)
    out.mkdir(parents=True, exist_ok=True)
    built = [s for build in sections() if (s := build(d)) is not None]
    plots = make_plots(d.profiles, out)
    pq_path = out / "per_question.csv"
    head, rows = per_question(d.groups)
    with pq_path.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([head, *rows])
    metrics_path = out / "metrics.json"
    metrics_path.write_text(json.dumps(_metrics_json(d, roots, built), indent=1, ensure_ascii=False) + "\n",
                            encoding="utf-8")
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    md_path = out / "report.md"
    md_path.write_text(_markdown(d, roots, built, plots, title, now), encoding="utf-8")
    html_path = out / "report.html"
    html_path.write_text(_html(d, roots, built, plots, title, now), encoding="utf-8")
    return Report(out=out, markdown=md_path, html=html_path, metrics=metrics_path, per_question=pq_path, plots=plots,
                  profiles=d.profiles, arms=arm_summaries(d) if has_arms(d.runs) else [], warnings=d.warnings)


def _metrics_json(d: ReportData, roots: Sequence[Path], built: Sequence[Section]) -> dict[str, Any]:
    """``metrics.json``: the sources, warnings, profiles, paired comparisons and repetitions, each section's
    own keys, then every run."""
    data: dict[str, Any] = {
        "sources": [str(Path(r).resolve()) for r in roots],
        "warnings": d.warnings,
        "profiles": [p.model_dump(mode="json") for p in d.profiles],
        "paired": [x.model_dump(mode="json") for x in d.paired],
        "repetitions": [x.model_dump(mode="json") for x in d.repetitions],
    }
    for s in built:
        data.update(s.metrics)
    data["runs"] = [r.model_dump(mode="json") for r in d.runs]
    return data


def _markdown(d: ReportData, roots: Sequence[Path], built: Sequence[Section], plots: Sequence[Path], title: str,
              now: str) -> str:
    """``report.md``: the sections' tables and notes (an HTML-only section points to the HTML), the plots."""
    sources = ", ".join(f"`{r}`" for r in roots)
    md = [f"# {title}", "", f"{len(d.runs)} runs from {sources}; generated {now}.", ""]
    md += [f"> **Warning:** {w}" for w in d.warnings] + ([""] if d.warnings else [])
    for s in built:
        md += [f"## {s.title}", ""]
        if s.html_only:
            md += ["See report.html and per_question.csv.", ""]
            continue
        for t in s.tables:
            md += [md_table(t), ""]
        md += [f"*{n}*" for n in s.notes] + ([""] if s.notes else [])
    md += ["## Plots", ""] + [f"![{p.stem}]({p.name})" for p in plots] + ["", "## Notes", ""]
    md += [f"- {n}" for n in NOTES]
    return "\n".join(md) + "\n"


def _html(d: ReportData, roots: Sequence[Path], built: Sequence[Section], plots: Sequence[Path], title: str,
          now: str) -> str:
    """``report.html``: one self-contained page, the plots embedded."""
    parts = [
        (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{CSS}</style></head><body><h1>{html.escape(title)}</h1>"
        f"<p class='note'>{len(d.runs)} runs from {html.escape(', '.join(str(r) for r in roots))}; "
        f"generated {now}.</p>")
    ]
    parts += [f"<p class='warn'><b>Warning:</b> {html.escape(w)}</p>" for w in d.warnings]
    for s in built:
        parts.append(f"<h2>{html.escape(s.title)}</h2>" + "".join(html_table(t) for t in s.tables))
        parts += [f"<p class='note'>{html.escape(n)}</p>" for n in s.notes]
    parts.append("<h2>Plots</h2>")
    for p in plots:
        b64 = base64.b64encode(p.read_bytes()).decode()
        parts.append(f"<img alt='{p.stem}' src='data:image/png;base64,{b64}'>")
    parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in NOTES) + "</ul>")
    parts.append("</body></html>")
    return "".join(parts)
