"""Tables as the WideSearch scorer sees them: a list of normalized column names and rows of cell text.

Two readers: :func:`extract_markdown_table` takes the agent's answer apart the way the benchmark does (the
first fenced ```markdown block, else the span from the first to the last ``|``), :func:`read_gold_csv`
reads a gold CSV. Both then type every column the way pandas' CSV reader does in the public scorer
(:func:`type_column`), so the text compared later is the text the public scorer compares: ``12`` stays
``12``, an integer column with an empty cell becomes ``12.0`` / ``nan``, the usual NA markers become
``nan``.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field

_FENCE = re.compile(r"```markdown(.*?)```", re.DOTALL)
_PIPE_RUN = re.compile(r"((?:\|.*\n?)+)")
_SEPARATOR_CHARS = frozenset("|- :")
_INT = re.compile(r"^[+-]?\d+$")
_FLOAT = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$|^[+-]?(?:inf|Inf|INF|infinity|Infinity)$")
NA_VALUES = frozenset({
    "", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN", "<NA>",
    "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null",
})
"""Cells pandas' CSV reader turns into a missing value (its default ``na_values``); they compare as ``nan``."""
_BOOL = {"True": "True", "true": "True", "TRUE": "True", "False": "False", "false": "False", "FALSE": "False"}


def norm_column(name: str) -> str:
    """A column name as the benchmark compares it: stripped, lower-cased, spaces removed."""
    return name.strip().lower().replace(" ", "")


@dataclass
class Table:
    """Column names (normalized) and rows of cell text, one cell per column."""

    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)

    def column(self, name: str) -> list[str]:
        i = self.columns.index(name)
        return [r[i] for r in self.rows]

    def select(self, names: list[str]) -> Table:
        """The table with exactly ``names`` as columns, in that order (each must exist once)."""
        idx = [self.columns.index(n) for n in names]
        return Table(list(names), [[r[i] for i in idx] for r in self.rows])


def type_column(values: list[str]) -> list[str]:
    """The cells of one column as text after pandas-style typing: all integers -> ``str(int)`` (with a
    missing cell the column is float: ``12.0`` and ``nan``); all numbers -> ``str(float)``; all
    booleans -> ``True``/``False``; anything else is kept, missing cells become ``nan``."""
    present = [v for v in values if v not in NA_VALUES]
    missing = len(present) < len(values)
    if present and all(_INT.match(v) for v in present) and all(abs(int(v)) < 2**63 for v in present):
        if not missing:
            return [str(int(v)) for v in values]
        return ["nan" if v in NA_VALUES else str(float(int(v))) for v in values]
    if present and all(_FLOAT.match(v) for v in present):
        return ["nan" if v in NA_VALUES else str(float(v)) for v in values]
    if present and all(v in _BOOL for v in present):
        return ["nan" if v in NA_VALUES else _BOOL[v] for v in values]
    return ["nan" if v in NA_VALUES else v for v in values]


def _mangle(names: list[str]) -> list[str]:
    """Duplicate names get ``.1``, ``.2`` … as pandas does (so they never silently merge)."""
    seen: dict[str, int] = {}
    out = []
    for n in names:
        k = seen.get(n, 0)
        seen[n] = k + 1
        out.append(n if k == 0 else f"{n}.{k}")
    return out


def build_table(header: list[str], body: list[list[str]]) -> Table:
    """Normalize the header, drop columns whose name is empty (pandas' ``Unnamed`` columns the public
    scorer drops), pad short rows, cut long ones, and type every column."""
    names = _mangle([norm_column(h) for h in header])
    keep = [i for i, n in enumerate(names) if n and not n.startswith(".")]
    width = len(header)
    rows = [(r + [""] * width)[:width] for r in body]
    cols = [type_column([r[i] for r in rows]) for i in keep]
    return Table([names[i] for i in keep], [list(t) for t in zip(*cols)] if cols else [[] for _ in rows])


def markdown_block(text: str) -> str | None:
    """The table text of an answer: the first fenced ```markdown block, else the run of ``|`` lines that
    starts at the first ``|`` (looked for between the line of the first ``|`` and the line of the last one,
    when the text has at least four). None when there is neither."""
    m = _FENCE.search(text)
    if m:
        return m.group(1)
    pipes = [i for i, ch in enumerate(text) if ch == "|"]
    if len(pipes) < 4:
        return None
    start = max(0, text.rfind("\n", 0, pipes[0]))
    end = text.find("\n", pipes[-1])
    run = _PIPE_RUN.search(text[start : len(text) if end == -1 else end])
    return run.group(1) if run else None


def _unquote(cell: str) -> str:
    """A cell wrapped in double quotes loses them (``""`` inside is one quote), as pandas reads it."""
    if len(cell) >= 2 and cell[0] == cell[-1] == '"':
        return cell[1:-1].replace('""', '"')
    return cell


def extract_markdown_table(text: str | None) -> Table | None:
    """The agent's table, or None when the answer holds none. Separator rows (only ``|``, ``-``, ``:`` and
    spaces) and lines without ``|`` are dropped; the first remaining line is the header; cells are
    stripped; an outer ``|`` at either end of a line does not make a cell."""
    block = markdown_block(text or "")
    if block is None:
        return None
    lines = [ln.strip() for ln in block.strip().split("\n")]
    kept = [ln for ln in lines if "|" in ln and not set(ln) <= _SEPARATOR_CHARS]
    if not kept:
        return None
    split = [[_unquote(c.strip()) for c in ln.split("|")] for ln in kept]
    return build_table(split[0], split[1:])


def read_gold_csv(text: str) -> Table:
    """A gold table from CSV text (header row first)."""
    rows = [r for r in csv.reader(io.StringIO(text.lstrip("\ufeff")))]
    rows = [r for r in rows if r]  # pandas skips blank lines
    if not rows:
        return Table([], [])
    return build_table(rows[0], rows[1:])
