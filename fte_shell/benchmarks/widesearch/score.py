"""Scoring one table answer against its gold table: the benchmark's two steps.

Alignment: the answer's columns must be the required ones (names normalized; names that differ are
mapped by the judge model); both tables are de-duplicated on the unique columns (first row kept); the
response's values of each key column scored by ``exact_match`` or ``llm_judge`` that are not already in the
gold column are mapped by the judge onto the gold values (the original is kept for the cell report); then
every column's preprocessors run on both sides.

Scoring: inner join on the unique columns (every response row with every gold row of the same key); a key
cell scores 1; every other cell scores by each of its column's metrics. A row's score is the minimum of
its cell scores; ``precision_by_row = Σ row scores / response rows``, ``recall_by_row = … / gold rows``;
by item the same with ``Σ cell scores`` over ``rows × required columns``; F1 = 2PR/(P+R) (0 when P+R is
0). ``score`` (success) is 1 when both tables hold the same rows after preprocessing, or when all six
values are 1.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from ...errors import FteError
from .align import JudgeCall, TableJudge, judge_column, map_values
from .cells import CELL_METRICS, PREPROCESSORS
from .spec import Evaluation
from .table import Table, extract_markdown_table


class NeedsJudge(FteError):
    """Scoring this answer needs the judge model and none was given."""


class Cell(BaseModel):
    """One scored (or unmatched) cell, for the per-cell CSV."""

    model_config = ConfigDict(extra="forbid")

    row_key: str
    column: str
    response: str | None
    gold: str | None
    metric: str
    score: float | None
    note: str = ""


class TableScore(BaseModel):
    """The benchmark's result for one answer (its names), plus what explains it."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    score: float = 0.0
    """Success: 1 when the tables are identical or all six values below are 1."""

    precision_by_row: float = 0.0
    recall_by_row: float = 0.0
    f1_by_row: float = 0.0
    precision_by_item: float = 0.0
    recall_by_item: float = 0.0
    f1_by_item: float = 0.0

    msg: str = ""
    """Why the table scored 0 before any cell was compared (no table, columns do not match), else empty."""

    response_rows: int = 0
    """Rows of the answer after de-duplication."""

    gold_rows: int = 0
    """Rows of the gold table after de-duplication."""

    column_map: dict[str, str] = Field(default_factory=dict)
    """Answer column -> required column, as the judge mapped them."""

    key_map: dict[str, dict[str, str]] = Field(default_factory=dict)
    """Per key column: answer value -> gold value, as the judge mapped them."""

    judge_calls: list[JudgeCall] = Field(default_factory=list)
    """Every judge call made (prompt and reply)."""

    cells: list[Cell] = Field(default_factory=list, exclude=True)
    """Per-cell results (written to the CSV, not to judgement.json)."""


def f1(p: float, r: float) -> float:
    return 2 * p * r / (p + r) if p + r > 1e-9 else 0.0


def _need(judge: TableJudge | None, what: str) -> TableJudge:
    if judge is None:
        raise NeedsJudge(f"scoring needs the judge model ({what}): pass --judge-model")
    return judge


def dedupe(t: Table, key: Sequence[str]) -> Table:
    idx = [t.columns.index(k) for k in key]
    seen: set[tuple[str, ...]] = set()
    rows = []
    for r in t.rows:
        k = tuple(r[i] for i in idx)
        if k not in seen:
            seen.add(k)
            rows.append(r)
    return Table(list(t.columns), rows)


def align_columns(resp: Table, ev: Evaluation, judge: TableJudge | None, out: TableScore) -> Table | None:
    """The answer with exactly the required columns in order, or None (``out.msg`` says why)."""
    required = ev.required
    cols = list(resp.columns)
    if Counter(cols) != Counter(required):
        unmatched = [c for c in cols if c not in required]
        missing = [r for r in required if r not in cols]
        if unmatched and missing:
            mapping = map_values(_need(judge, "column names differ"), "columns", None, unmatched, missing,
                                 out.judge_calls)
            used: set[str] = set()
            for c, target in mapping.items():
                if target not in used:
                    used.add(target)
                    out.column_map[c] = target
            cols = [out.column_map.get(c, c) for c in cols]
    if Counter(cols) != Counter(required):
        out.msg = f"the answer's columns {cols} are not the required {required}"
        return None
    return Table(cols, resp.rows).select(required)


def score_table(ev: Evaluation, gold: Table, answer: str | None, judge: TableJudge | None = None) -> TableScore:
    """Score ``answer`` (the agent's final answer text) against ``gold`` (required columns only): parse its
    table, align its columns, map its key values to the gold vocabulary, preprocess, join on the key, score
    every cell, then the row and item totals."""
    out = TableScore()
    if answer is None:
        out.msg = "no answer"
        return out
    parsed = extract_markdown_table(answer)
    if parsed is None:
        out.msg = "no Markdown table in the answer"
        return out
    resp = align_columns(parsed, ev, judge, out)
    if resp is None:
        return out
    gold, resp = dedupe(gold.select(ev.required), ev.unique_columns), dedupe(resp, ev.unique_columns)
    before = _map_keys(ev, gold, resp, judge, out)
    for col, spec in ev.eval_pipeline.items():
        for t in (resp, gold):
            i = t.columns.index(col)
            for r in t.rows:
                for name in spec.preprocess:
                    r[i] = PREPROCESSORS[name](r[i])
    out.response_rows, out.gold_rows = len(resp.rows), len(gold.rows)
    identical = sorted(map(tuple, resp.rows)) == sorted(map(tuple, gold.rows))
    kidx = [ev.required.index(k) for k in ev.unique_columns]
    by_key: dict[tuple[str, ...], list[int]] = {}
    for j, r in enumerate(resp.rows):
        by_key.setdefault(tuple(r[i] for i in kidx), []).append(j)
    pairs = [(g, j) for g, gr in enumerate(gold.rows) for j in by_key.get(tuple(gr[i] for i in kidx), [])]
    row_min, tp_item = _record_cells(ev, gold, resp, pairs, _score_cells(ev, gold, resp, pairs, judge, out),
                                     before, out)
    _record_unmatched(ev, gold, resp, pairs, kidx, out)
    _totals(out, sum(row_min), tp_item, len(ev.required), len(resp.rows), len(gold.rows), identical)
    return out


def _map_keys(ev: Evaluation, gold: Table, resp: Table, judge: TableJudge | None,
              out: TableScore) -> dict[str, list[str]]:
    """Map the answer's key values that are not in the gold vocabulary onto it (the judge), in place;
    returns each mapped key column as it was before."""
    before: dict[str, list[str]] = {}
    for col in ev.unique_columns:
        spec = ev.eval_pipeline.get(col)
        if spec is None or not ({"exact_match", "llm_judge"} & set(spec.metric)):
            continue
        i = resp.columns.index(col)
        vocab = list(dict.fromkeys(gold.column(col)))
        unknown = [v for v in dict.fromkeys(resp.column(col)) if v not in set(vocab)]
        if not unknown:
            continue
        mapping = map_values(_need(judge, f"key values of {col!r} differ"), "keys", col, unknown, vocab,
                             out.judge_calls)
        out.key_map[col] = mapping
        before[col] = resp.column(col)
        for r in resp.rows:
            r[i] = mapping.get(r[i], r[i])
    return before


def _score_cells(ev: Evaluation, gold: Table, resp: Table, pairs: list[tuple[int, int]],
                 judge: TableJudge | None, out: TableScore) -> dict[tuple[int, str, str], tuple[float, str]]:
    """(pair, column, metric) -> (score, why) for every non-key cell of every joined row pair."""
    scores: dict[tuple[int, str, str], tuple[float, str]] = {}
    for col in ev.required:
        if col in ev.unique_columns:
            continue
        spec = ev.eval_pipeline[col]
        c = ev.required.index(col)
        for metric in spec.metric:
            if metric == "llm_judge":
                if not pairs:
                    continue
                cells = [(resp.rows[j][c], gold.rows[g][c]) for g, j in pairs]
                graded = judge_column(_need(judge, f"column {col!r} is scored by llm_judge"), col, cells,
                                      spec.criterion, out.judge_calls)
                for p, s in enumerate(graded):
                    scores[(p, col, metric)] = s
            else:
                fn = CELL_METRICS[metric]
                for p, (g, j) in enumerate(pairs):
                    scores[(p, col, metric)] = fn(resp.rows[j][c], gold.rows[g][c], spec.criterion)
    return scores


def _record_cells(ev: Evaluation, gold: Table, resp: Table, pairs: list[tuple[int, int]],
                  scores: dict[tuple[int, str, str], tuple[float, str]], before: dict[str, list[str]],
                  out: TableScore) -> tuple[list[float], float]:
    """Every joined pair's cells into ``out.cells``; returns each row's minimum score and the item total."""
    kidx = [ev.required.index(k) for k in ev.unique_columns]
    row_min = [1.0] * len(pairs)
    tp_item = 0.0
    for p, (g, j) in enumerate(pairs):
        rk = " | ".join(gold.rows[g][i] for i in kidx)
        for c, col in enumerate(ev.required):
            if col in ev.unique_columns:
                tp_item += 1.0
                was = before.get(col, [None] * len(resp.rows))[j]
                note = f"key mapped from {was!r}" if was is not None and was != resp.rows[j][c] else "key"
                out.cells.append(Cell(row_key=rk, column=col, response=resp.rows[j][c], gold=gold.rows[g][c],
                                      metric="key", score=1.0, note=note))
                continue
            for metric in ev.eval_pipeline[col].metric:
                s, why = scores[(p, col, metric)]
                row_min[p] = min(row_min[p], s)
                tp_item += s
                out.cells.append(Cell(row_key=rk, column=col, response=resp.rows[j][c], gold=gold.rows[g][c],
                                      metric=metric, score=s, note=why))
    return row_min, tp_item


def _record_unmatched(ev: Evaluation, gold: Table, resp: Table, pairs: list[tuple[int, int]], kidx: list[int],
                      out: TableScore) -> None:
    """The gold rows missing from the answer and the answer's extra rows, cell by cell."""
    matched_gold = {g for g, _ in pairs}
    matched_resp = {j for _, j in pairs}
    for g, gr in enumerate(gold.rows):
        if g not in matched_gold:
            rk = " | ".join(gr[i] for i in kidx)
            out.cells += [Cell(row_key=rk, column=col, response=None, gold=gr[c], metric="missing", score=None,
                               note="gold row not in the answer") for c, col in enumerate(ev.required)]
    for j, r in enumerate(resp.rows):
        if j not in matched_resp:
            rk = " | ".join(r[i] for i in kidx)
            out.cells += [Cell(row_key=rk, column=col, response=r[c], gold=None, metric="extra", score=None,
                               note="answer row not in the gold table") for c, col in enumerate(ev.required)]


def _totals(out: TableScore, tp_row: float, tp_item: float, n_cols: int, np_: int, ng: int,
            identical: bool) -> None:
    """Precision, recall and F1 by row and by item, and success (identical tables or all six at 1)."""
    out.precision_by_row = tp_row / np_ if np_ else 0.0
    out.recall_by_row = tp_row / ng if ng else 0.0
    out.precision_by_item = tp_item / (np_ * n_cols) if np_ else 0.0
    out.recall_by_item = tp_item / (ng * n_cols) if ng else 0.0
    out.f1_by_row = f1(out.precision_by_row, out.recall_by_row)
    out.f1_by_item = f1(out.precision_by_item, out.recall_by_item)
    six = (out.precision_by_row, out.recall_by_row, out.f1_by_row, out.precision_by_item, out.recall_by_item,
           out.f1_by_item)
    out.score = 1.0 if identical or all(v == 1.0 for v in six) else 0.0
