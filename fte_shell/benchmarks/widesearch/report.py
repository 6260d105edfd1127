"""The WideSearch section of ``fte-shell report``: the paper's Table 2 columns per profile.

For each profile (``profile · model`` when the runs used several models) and each of the benchmark's
seven values (``score`` = success, ``precision/recall/f1_by_row``, ``…_by_item``): per task, the mean,
maximum and minimum over its scored repetitions; then each averaged over the tasks — ``avg_n``,
``max_n`` and ``min_n`` as the public scorer's summary computes them (with one repetition all three are
the plain mean). Runs without a ``widesearch`` entry in ``judgement.json`` (infrastructure failures,
unfinished or not yet judged runs) are counted as not scored and left out.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...metrics import RunMetrics, group_label
from ...record.rundir import read_judgement
from ..sections import ReportData, Section
from .runs import ENTRY

VALUES = ["score", "precision_by_row", "recall_by_row", "f1_by_row", "precision_by_item", "recall_by_item",
          "f1_by_item"]
SHOWN = [("Success", "score"), ("Row-F1", "f1_by_row"), ("Item-F1", "f1_by_item")]
SECTION_FILE = "widesearch.json"
Table = tuple[list[str], list[list[str]]]


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def summarize(runs: Sequence[RunMetrics]) -> list[dict[str, Any]]:
    """One dict per group: ``profile``, ``tasks``, ``scored``, ``not_scored``, ``max_reps`` and, per value,
    ``{avg_n, max_n, min_n}`` (None without scored runs)."""
    several = len({r.model for r in runs if r.model}) > 1
    groups: dict[str, dict[str, list[dict[str, Any]]]] = {}
    unscored: dict[str, int] = {}
    for r in runs:
        label = group_label(r, several)
        per_task = groups.setdefault(label, {})
        unscored.setdefault(label, 0)
        e = (read_judgement(Path(r.run_dir)) or {}).get(ENTRY)
        if isinstance(e, dict) and all(isinstance(e.get(v), (int, float)) for v in VALUES):
            per_task.setdefault(r.qid, []).append(e)
        else:
            unscored[label] += 1
    out = []
    for label, per_task in groups.items():
        row: dict[str, Any] = {"profile": label, "tasks": len(per_task),
                               "scored": sum(len(v) for v in per_task.values()), "not_scored": unscored[label],
                               "max_reps": max((len(v) for v in per_task.values()), default=0)}
        for v in VALUES:
            vals = [[float(e[v]) for e in es] for es in per_task.values()]
            row[v] = None if not vals else {
                "avg_n": _mean([sum(x) / len(x) for x in vals]),
                "max_n": _mean([max(x) for x in vals]),
                "min_n": _mean([min(x) for x in vals]),
            }
        out.append(row)
    return out


def widesearch_section(runs: Sequence[RunMetrics], out: Path, order: Sequence[str] = ()) -> list[tuple[str, Table]]:
    """The report tables of the WideSearch runs among ``runs`` ([] when none was scored), rows in the order
    of the labels in ``order`` (then first appearance); writes every number to ``out/widesearch.json``."""
    rank = {label: i for i, label in enumerate(order)}
    rows = sorted((g for g in summarize(runs) if g["scored"]), key=lambda g: rank.get(g["profile"], len(rank)))
    if not rows:
        return []
    (Path(out) / SECTION_FILE).write_text(json.dumps({"profiles": rows}, indent=1, ensure_ascii=False) + "\n",
                                          encoding="utf-8")
    reps = max(g["max_reps"] for g in rows)
    head = ["Profile", "Tasks", "Scored runs", "Not scored", *[name for name, _ in SHOWN]]
    if reps > 1:
        head += [f"{name} {k}" for name, _ in SHOWN for k in ("avg_n", "max_n", "min_n")]
    body = []
    for g in rows:
        line = [g["profile"], str(g["tasks"]), str(g["scored"]), str(g["not_scored"]),
                *[_pct(g[v]["avg_n"]) for _, v in SHOWN]]
        if reps > 1:
            line += [_pct(g[v][k]) for _, v in SHOWN for k in ("avg_n", "max_n", "min_n")]
        body.append(line)
    return [("WideSearch (table answers; Success, Row-F1 and Item-F1 averaged over tasks)", (head, body))]


def widesearch_report_section(d: ReportData) -> Section | None:
    """The report's WideSearch section: None when the report holds no scored WideSearch run."""
    tables = widesearch_section(d.runs, d.out or Path("."), order=[p.label for p in d.profiles])
    if not tables:
        return None
    title, table = tables[0]
    return Section(title, [table], [f"Every number is also in {SECTION_FILE}; per cell: RUN_DIR/widesearch_cells.csv."])
