"""The report's plots (matplotlib, Agg): accuracy (with its Wilson interval), calls per question by kind,
revisit rate, cache size, tokens per question — the shell and structured profiles side by side."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..metrics import ProfileSummary

COLORS = {"shell": "#d95f02", "fte": "#1b9e77", "open-find": "#7570b3", "visit-snippet": "#8da0cb",
          "visit-summary": "#a6a6d9", "snippet-only": "#999999", "fte-no-grep": "#66c2a5",
          "fte-no-read": "#a6d854", "fte-single-grep": "#b3de69"}


def base_profile(label: str) -> str:
    """``shell`` of a ``shell · model`` row label."""
    return label.split(" · ", 1)[0]



def _bar(ax: Any, ps: Sequence[ProfileSummary], values: list[float | None], fmt: Callable[[float], str]) -> None:
    xs = range(len(ps))
    vals = [v if v is not None else 0.0 for v in values]
    bars = ax.bar(xs, vals, color=[COLORS.get(base_profile(p.profile), "#666666") for p in ps])
    for b, v in zip(bars, values):
        ax.annotate("n/a" if v is None else fmt(v), (b.get_x() + b.get_width() / 2, b.get_height()),
                    ha="center", va="bottom", fontsize=9, xytext=(0, 2), textcoords="offset points")
    ax.set_xticks(list(xs), [p.label or p.profile for p in ps], rotation=20, ha="right")
    ax.spines[["top", "right"]].set_visible(False)


def make_plots(ps: Sequence[ProfileSummary], out: Path) -> list[Path]:
    """Write the five PNGs; returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    w = max(5.0, 1.2 * len(ps) + 2)
    paths: list[Path] = []
    for name, draw in _PLOTS:
        fig = draw(plt, ps, w)
        fig.tight_layout()
        p = out / f"{name}.png"
        fig.savefig(p, dpi=110)
        plt.close(fig)
        paths.append(p)
    return paths


def _accuracy(plt: Any, ps: Sequence[ProfileSummary], w: float) -> Any:
    fig, ax = plt.subplots(figsize=(w, 3.6))
    _bar(ax, ps, [p.accuracy for p in ps], lambda v: f"{100 * v:.1f}%")
    for x, p in enumerate(ps):
        if p.accuracy is not None and p.accuracy_ci95 is not None:
            lo, hi = p.accuracy_ci95
            ax.errorbar([x], [p.accuracy], yerr=[[p.accuracy - lo], [hi - p.accuracy]], color="#333333", capsize=4)
    ax.set_ylim(0, 1.1)
    ax.set_ylabel("accuracy (Wilson 95% CI)")
    ax.set_title("Accuracy per profile")
    return fig


def _calls(plt: Any, ps: Sequence[ProfileSummary], w: float) -> Any:
    fig, ax = plt.subplots(figsize=(w + 1, 3.6))
    kinds = [("search", "#Search", "#4c72b0"), ("select", "#Select", "#dd8452"), ("extract", "#Extract", "#55a868"),
             ("list", "list", "#c4ad66"), ("other", "other", "#8c8c8c")]
    width = 0.8 / len(kinds)
    for i, (attr, label, color) in enumerate(kinds):
        xs = [j + (i - (len(kinds) - 1) / 2) * width for j in range(len(ps))]
        ax.bar(xs, [getattr(p, attr) or 0.0 for p in ps], width, label=label, color=color)
    ax.set_xticks(range(len(ps)), [p.label or p.profile for p in ps], rotation=20, ha="right")
    ax.set_ylabel("calls per question")
    ax.set_title("Calls per question by kind")
    ax.legend(fontsize=8, frameon=False, ncol=len(kinds), loc="upper center", bbox_to_anchor=(0.5, -0.25))
    ax.spines[["top", "right"]].set_visible(False)
    return fig


def _revisit(plt: Any, ps: Sequence[ProfileSummary], w: float) -> Any:
    fig, ax = plt.subplots(figsize=(w, 3.6))
    _bar(ax, ps, [p.revisit_rate for p in ps], lambda v: f"{100 * v:.1f}%")
    ax.set_ylim(0, 1.1)
    ax.set_ylabel("revisit rate")
    ax.set_title("Revisit rate (materialized docs extracted again)")
    return fig


def _cache(plt: Any, ps: Sequence[ProfileSummary], w: float) -> Any:
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(min(2 * w, 13.0), 4.0))
    _bar(a1, ps, [p.cache_files for p in ps], lambda v: f"{v:.1f}")
    a1.set_ylabel("files")
    a1.set_title("End-of-run cache: files")
    _bar(a2, ps, [None if p.cache_chars is None else p.cache_chars / 1000 for p in ps], lambda v: f"{v:,.1f}k")
    a2.set_ylabel("thousand characters")
    a2.set_title("End-of-run cache: characters")
    return fig


def _tokens(plt: Any, ps: Sequence[ProfileSummary], w: float) -> Any:
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
    ax.set_xticks(list(xs), [p.label or p.profile for p in ps], rotation=20, ha="right")
    ax.set_ylabel("thousand tokens per question")
    ax.set_title("Tokens per question")
    ax.legend(fontsize=8, frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    return fig


_PLOTS: tuple[tuple[str, Callable[[Any, Sequence[ProfileSummary], float], Any]], ...] = (
    ("accuracy", _accuracy), ("calls", _calls), ("revisit", _revisit), ("cache", _cache), ("tokens", _tokens))
"""The plots in order: file name (``NAME.png``) and what draws the figure."""
