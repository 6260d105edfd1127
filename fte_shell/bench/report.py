"""Reports: ``report.md`` and one self-contained ``report.html`` (plots embedded as base64 PNG), plus
``metrics.json`` (every number shown) and the PNG files, from one or more sweep / run directories.

Tables follow the paper's shape: main results per profile (accuracy, #Search, #Select, #Extract, tokens),
the tool-call distribution, and the behavioural metrics (revisit rate, grep:read, whole-cache greps, fetch
repeats, cache size). Plots (matplotlib, Agg): accuracy, calls per question by kind, revisit rate, cache
size, tokens per question — the shell and structured profiles side by side.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from ..errors import ConfigError
from .metrics import ProfileSummary, RunMetrics, collect, summarize

PROFILE_ORDER = ["shell", "fte", "open-find", "visit-snippet", "visit-summary", "snippet-only"]
COLORS = {"shell": "#d95f02", "fte": "#1b9e77", "open-find": "#7570b3", "visit-snippet": "#8da0cb",
          "visit-summary": "#a6a6d9", "snippet-only": "#999999"}
OPS = ["search", "fetch", "visit", "open", "grep", "read", "find", "list", "other"]
PLOTS = ["accuracy", "calls", "revisit", "cache", "tokens"]


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

    plots: list[Path]
    """The PNG files."""

    profiles: list[ProfileSummary]
    """The per-profile summaries shown."""


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


def ordered(profiles: Sequence[ProfileSummary]) -> list[ProfileSummary]:
    """Shell first, then the structured profile, then the baselines, then anything else."""
    rank = {p: i for i, p in enumerate(PROFILE_ORDER)}
    return sorted(profiles, key=lambda s: (rank.get(base_profile(s.profile), len(rank)), s.profile))


def base_profile(label: str) -> str:
    """``shell`` of a ``shell · model`` row label."""
    return label.split(" · ", 1)[0]


Table = tuple[list[str], list[list[str]]]


def has_reader_tokens(ps: Sequence[ProfileSummary]) -> bool:
    """Whether any profile spent reader-model tokens (visit-summary): only then are they shown."""
    return any(p.summary_tokens for p in ps)


def main_table(ps: Sequence[ProfileSummary]) -> Table:
    reader = has_reader_tokens(ps)
    head = ["Profile", "Runs", "Failed", "Judged", "Accuracy", "F1", "Answered", "#Search", "#Select",
            "#Extract", "Calls", "Tokens", *(["Reader tokens"] if reader else []), "Wall s"]
    rows = [[p.profile, str(p.runs), str(p.failed), str(p.judged), pct(p.accuracy), num(p.f1), pct(p.answered),
             num(p.search), num(p.select), num(p.extract), num(p.calls), integer(p.tokens),
             *([integer(p.summary_tokens)] if reader else []), num(p.wall_s, 1)]
            for p in ps]
    return head, rows


def distribution_table(ps: Sequence[ProfileSummary]) -> Table:
    used = [op for op in OPS if any(p.distribution.get(op) for p in ps)]
    head = ["Profile", *used]
    rows = [[p.profile, *[pct(p.distribution.get(op, 0.0)) for op in used]] for p in ps]
    return head, rows


def behaviour_table(ps: Sequence[ProfileSummary]) -> Table:
    head = ["Profile", "Revisit rate", "grep:read", "Whole-cache grep", "Fetch repeat", "Cache files",
            "Cache chars", "#grep", "#read"]
    rows = [[p.profile, pct(p.revisit_rate), num(p.grep_read_ratio), pct(p.whole_cache_grep_share),
             "–" if p.fetch_repeat_pct is None else f"{p.fetch_repeat_pct:.1f}%", num(p.cache_files, 1),
             integer(p.cache_chars), num(p.grep), num(p.read)] for p in ps]
    return head, rows


def ngram_table(ps: Sequence[ProfileSummary]) -> Table:
    head = ["Profile", "Top bigrams", "Top trigrams"]
    rows = [[p.profile, ", ".join(f"{k} ({v})" for k, v in p.bigrams[:5]) or "–",
             ", ".join(f"{k} ({v})" for k, v in p.trigrams[:5]) or "–"] for p in ps]
    return head, rows


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


# --- plots --------------------------------------------------------------------------------------------
def _bar(ax: Any, ps: Sequence[ProfileSummary], values: list[float | None], fmt: Callable[[float], str]) -> None:
    xs = range(len(ps))
    vals = [v if v is not None else 0.0 for v in values]
    bars = ax.bar(xs, vals, color=[COLORS.get(base_profile(p.profile), "#666666") for p in ps])
    for b, v in zip(bars, values):
        ax.annotate("n/a" if v is None else fmt(v), (b.get_x() + b.get_width() / 2, b.get_height()),
                    ha="center", va="bottom", fontsize=9, xytext=(0, 2), textcoords="offset points")
    ax.set_xticks(list(xs), [p.profile for p in ps], rotation=20, ha="right")
    ax.spines[["top", "right"]].set_visible(False)


def make_plots(ps: Sequence[ProfileSummary], out: Path) -> list[Path]:
    """Write the five PNGs; returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths: list[Path] = []

    def save(fig: Any, name: str) -> None:
        fig.tight_layout()
        p = out / f"{name}.png"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        paths.append(p)

    w = max(5.0, 1.2 * len(ps) + 2)
    fig, ax = plt.subplots(figsize=(w, 3.6))
    _bar(ax, ps, [p.accuracy for p in ps], lambda v: f"{100 * v:.1f}%")
    ax.set_ylim(0, 1.1)
    ax.set_ylabel("accuracy")
    ax.set_title("Accuracy per profile")
    save(fig, "accuracy")

    fig, ax = plt.subplots(figsize=(w + 1, 3.6))
    kinds = [("search", "#Search", "#4c72b0"), ("select", "#Select", "#dd8452"), ("extract", "#Extract", "#55a868"),
             ("list", "list", "#c4ad66"), ("other", "other", "#8c8c8c")]
    width = 0.8 / len(kinds)
    for i, (attr, label, color) in enumerate(kinds):
        xs = [j + (i - (len(kinds) - 1) / 2) * width for j in range(len(ps))]
        ax.bar(xs, [getattr(p, attr) or 0.0 for p in ps], width, label=label, color=color)
    ax.set_xticks(range(len(ps)), [p.profile for p in ps], rotation=20, ha="right")
    ax.set_ylabel("calls per question")
    ax.set_title("Calls per question by kind")
    ax.legend(fontsize=8, frameon=False, ncol=len(kinds), loc="upper center", bbox_to_anchor=(0.5, -0.25))
    ax.spines[["top", "right"]].set_visible(False)
    save(fig, "calls")

    fig, ax = plt.subplots(figsize=(w, 3.6))
    _bar(ax, ps, [p.revisit_rate for p in ps], lambda v: f"{100 * v:.1f}%")
    ax.set_ylim(0, 1.1)
    ax.set_ylabel("revisit rate")
    ax.set_title("Revisit rate (materialized docs extracted again)")
    save(fig, "revisit")

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(min(2 * w, 13.0), 4.0))
    _bar(a1, ps, [p.cache_files for p in ps], lambda v: f"{v:.1f}")
    a1.set_ylabel("files")
    a1.set_title("End-of-run cache: files")
    _bar(a2, ps, [None if p.cache_chars is None else p.cache_chars / 1000 for p in ps], lambda v: f"{v:,.1f}k")
    a2.set_ylabel("thousand characters")
    a2.set_title("End-of-run cache: characters")
    save(fig, "cache")

    fig, ax = plt.subplots(figsize=(w, 3.6))
    xs = range(len(ps))
    prompt = [(p.prompt_tokens or 0) / 1000 for p in ps]
    comp = [(p.completion_tokens or 0) / 1000 for p in ps]
    ax.bar(xs, prompt, color=[COLORS.get(base_profile(p.profile), "#666666") for p in ps], label="prompt")
    ax.bar(xs, comp, bottom=prompt, color="#333333", label="completion")
    reader = [(p.summary_tokens or 0) / 1000 for p in ps]
    if any(reader):
        ax.bar(xs, reader, bottom=[a + b for a, b in zip(prompt, comp)], color="#bbbbbb", hatch="//",
               label="reader model (visit)")
    for x, a, b, r in zip(xs, prompt, comp, reader):
        ax.annotate(f"{a + b + r:,.1f}k", (x, a + b + r), ha="center", va="bottom", fontsize=9, xytext=(0, 2),
                    textcoords="offset points")
    ax.set_xticks(list(xs), [p.profile for p in ps], rotation=20, ha="right")
    ax.set_ylabel("thousand tokens per question")
    ax.set_title("Tokens per question")
    ax.legend(fontsize=8, frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    save(fig, "tokens")
    return paths


# --- the report ---------------------------------------------------------------------------------------
CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:14px}th,td{border:1px solid #ccc;padding:4px 8px;
text-align:right}th:first-child,td:first-child{text-align:left}thead{background:#f3f3f3}
img{max-width:100%;margin:.5em 0}code{background:#f3f3f3;padding:0 3px}.note{color:#555;font-size:13px}"""

NOTES = [
    "Accuracy: share of judged runs judged correct (LLM judge when present, else normalized exact match).",
    "Counts are means per question; failed/incomplete runs are counted but left out of the means.",
    (
        "Tokens are the agent model's (prompt + completion); visit-summary's reader-model tokens are "
        "counted apart (Reader tokens, shown when any run spent some)."
    ),
    (
        "#Select = fetch/visit/open; #Extract = grep/read/find (shell: grep-like and read-like commands "
        "with document operands). Revisit rate: share of materialized documents extracted from again "
        "after a different document was touched in between (docs/metrics.md)."
    ),
]


def write_report(roots: Sequence[Path], out: Path, *, title: str = "fte-shell benchmark report") -> Report:
    """Collect every run under ``roots`` and write the report files into ``out``."""
    for r in roots:
        if not Path(r).exists():
            raise ConfigError(f"run directory not found: {r}")
    runs: list[RunMetrics] = collect([Path(r) for r in roots])
    if not runs:
        raise ConfigError(f"no run directories under {', '.join(str(r) for r in roots)}")
    ps = ordered(summarize(runs))
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    plots = make_plots(ps, out)
    metrics_path = out / "metrics.json"
    from .tool_use import tool_free_warnings

    warnings = tool_free_warnings(runs)
    metrics_path.write_text(json.dumps({
        "sources": [str(Path(r).resolve()) for r in roots],
        "warnings": warnings,
        "profiles": [p.model_dump(mode="json") for p in ps],
        "runs": [r.model_dump(mode="json") for r in runs],
    }, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    tables = [
        ("Main results (per question, averaged)", main_table(ps)),
        ("Tool-call distribution (share of actions)", distribution_table(ps)),
        ("Behaviour", behaviour_table(ps)),
        ("Most frequent action sequences", ngram_table(ps)),
    ]
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    sources = ", ".join(f"`{r}`" for r in roots)
    md = [f"# {title}", "", f"{len(runs)} runs from {sources}; generated {now}.", ""]
    md += [f"**Warning:** {w}" for w in warnings] + ([""] if warnings else [])
    for name, t in tables:
        md += [f"## {name}", "", md_table(t), ""]
    md += ["## Plots", ""] + [f"![{p.stem}]({p.name})" for p in plots] + ["", "## Notes", ""]
    md += [f"- {n}" for n in NOTES]
    md_path = out / "report.md"
    md_path.write_text("\n".join(md) + "\n", encoding="utf-8")

    intro = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{CSS}</style></head><body><h1>{html.escape(title)}</h1>"
        f"<p class='note'>{len(runs)} runs from {html.escape(', '.join(str(r) for r in roots))}; "
        f"generated {now}.</p>"
    )
    parts = [intro] + [f"<p class='note'><b>Warning:</b> {html.escape(w)}</p>" for w in warnings]
    for name, t in tables:
        parts.append(f"<h2>{html.escape(name)}</h2>{html_table(t)}")
    parts.append("<h2>Plots</h2>")
    for p in plots:
        b64 = base64.b64encode(p.read_bytes()).decode()
        parts.append(f"<img alt='{p.stem}' src='data:image/png;base64,{b64}'>")
    parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in NOTES) + "</ul>")
    parts.append("</body></html>")
    html_path = out / "report.html"
    html_path.write_text("".join(parts), encoding="utf-8")
    return Report(out=out, markdown=md_path, html=html_path, metrics=metrics_path, plots=plots, profiles=ps)
