"""WideSearch tasks in the benchmark's published layout.

``DIR/widesearch.jsonl`` holds one task a line: ``instance_id``, ``query``, ``language`` and
``evaluation`` — a JSON string (an object is accepted too) with ``required`` (the output columns),
``unique_columns`` (the primary key) and ``eval_pipeline`` ``{column: {preprocess, metric, criterion}}``.
``DIR/widesearch_gold/<instance_id>.csv`` is the gold table. Column names are compared normalized
(stripped, lower-cased, spaces removed).

Each task becomes a :class:`~fte_shell.benchmarks.base.Question` whose text is the query followed by the
table-answer instructions of ``fte_shell/prompts/widesearch_table.md`` (filled with the required columns),
whose ``answer`` is the gold CSV text and whose ``evaluation`` is the checked evaluation spec.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from ...errors import ConfigError
from ...record.jsonio import iter_jsonl
from ..base import Question, safe_id
from .cells import METRICS, PREPROCESSORS
from .table import Table, norm_column, read_gold_csv

TASKS_FILE = "widesearch.jsonl"
GOLD_DIR = "widesearch_gold"
TABLE_PROMPT = "widesearch_table.md"
HEADER_MARK = "| "


class ColumnEval(BaseModel):
    """How one column is scored."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    preprocess: list[str] = Field(default_factory=list)
    """Preprocessors run in order on both tables' cells (``norm_str``, ``extract_number``, ``norm_date``)."""

    metric: list[str] = Field(default_factory=list)
    """Metrics scoring the column (``exact_match``, ``number_near``, ``date_near``, ``url_match``,
    ``in_match``, ``llm_judge``); each is one score per cell."""

    criterion: float | str | None = None
    """``number_near``: the relative tolerance; ``llm_judge``: the grading instructions."""

    @field_validator("preprocess", "metric")
    @classmethod
    def _known(cls, v: list[str], info: ValidationInfo) -> list[str]:
        known = PREPROCESSORS if info.field_name == "preprocess" else METRICS
        bad = [name for name in v if name not in known]
        if bad:
            raise ValueError(f"unknown {info.field_name} {bad} (known: {', '.join(sorted(known))})")
        return v


class Evaluation(BaseModel):
    """A task's evaluation spec (the benchmark's ``evaluation`` field), column names normalized."""

    model_config = ConfigDict(extra="ignore", use_attribute_docstrings=True)

    required: list[str]
    """The output columns, in order."""

    unique_columns: list[str]
    """The primary key: rows are de-duplicated and joined on these columns."""

    eval_pipeline: dict[str, ColumnEval] = Field(default_factory=dict)
    """Per-column preprocessing and metrics."""

    @model_validator(mode="after")
    def _consistent(self) -> Evaluation:
        self.required = [norm_column(c) for c in self.required]
        self.unique_columns = [norm_column(c) for c in self.unique_columns]
        self.eval_pipeline = {norm_column(k): v for k, v in self.eval_pipeline.items()}
        if not self.required or len(set(self.required)) != len(self.required):
            raise ValueError("'required' must list distinct column names")
        if not self.unique_columns or not set(self.unique_columns) <= set(self.required):
            raise ValueError("'unique_columns' must be a non-empty subset of 'required'")
        extra = [c for c in self.eval_pipeline if c not in self.required]
        if extra:
            raise ValueError(f"eval_pipeline names columns that are not required: {extra}")
        unscored = [c for c in self.required if c not in self.unique_columns
                    and not (c in self.eval_pipeline and self.eval_pipeline[c].metric)]
        if unscored:
            raise ValueError(f"columns without a metric in eval_pipeline: {unscored}")
        for c, e in self.eval_pipeline.items():
            if "number_near" in e.metric and not isinstance(e.criterion, (int, float)):
                raise ValueError(f"column {c!r}: number_near needs a numeric criterion")
        return self


def table_instructions(required: list[str]) -> str:
    """The table-answer instructions for ``required`` columns (this project's own words)."""
    from ...prompts import read_prompt

    header = "| " + " | ".join(required) + " |"
    return read_prompt(TABLE_PROMPT).replace("{header}", header)


def task_prompt(query: str, required: list[str]) -> str:
    """What the agent is asked: the benchmark's query, then the table-answer instructions."""
    return f"{query.rstrip()}\n\n{table_instructions(required)}"


def split_task_prompt(question_text: str) -> tuple[str, list[str] | None]:
    """``(query, required columns)`` of a task prompt made by :func:`task_prompt`; ``(text, None)`` for
    any other text. The scripted policies use it to research the query and answer with a table."""
    from ...prompts import read_prompt

    before = read_prompt(TABLE_PROMPT).split("{header}", 1)[0].strip()
    at = question_text.find(before)
    if at < 0:
        return question_text, None
    for line in question_text[at + len(before):].splitlines():
        if line.startswith(HEADER_MARK) and line.rstrip().endswith("|"):
            return question_text[:at].rstrip(), [c.strip() for c in line.strip().strip("|").split("|")]
    return question_text, None


def table_answer(turn: Any, columns: list[str]) -> Any:
    """A scripted policy's final turn (a :class:`fte_shell.standins.server.ScriptTurn` holding
    ``<answer>SPAN</answer>``) with the answer turned into a one-row table of ``columns`` (SPAN in the
    first column, the others empty); any other turn unchanged."""
    import re

    m = re.search(r"<answer>(.*?)</answer>", turn.content or "", re.DOTALL)
    if m is None or turn.tool_calls:
        return turn
    span = " ".join(m.group(1).split()).replace("|", "/")
    table = "\n".join(["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns),
                       "| " + " | ".join([span] + [""] * (len(columns) - 1)) + " |"])
    content = (turn.content or "")[: m.start()] + f"<answer>\n{table}\n</answer>" + (turn.content or "")[m.end():]
    return turn.model_copy(update={"content": content})


def read_gold(path: Path, ev: Evaluation) -> tuple[str, Table]:
    """The gold CSV's text and its table restricted to the required columns."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as e:
        raise ConfigError(f"cannot read the gold table {path}: {e.strerror or e}") from e
    table = read_gold_csv(text)
    missing = [c for c in ev.required if c not in table.columns]
    if missing:
        raise ConfigError(f"{path}: the gold table lacks required column(s) {missing} (has {table.columns})")
    return text, table.select(ev.required)


def parse_evaluation(raw: Any, where: str) -> tuple[Evaluation, list[str]]:
    """The ``evaluation`` field (a JSON string or an object), checked, and its ``required`` column names
    as written (shown to the agent); errors name ``where``."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as e:
            raise ConfigError(f"{where}: 'evaluation' is not valid JSON ({e.msg})") from e
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: 'evaluation' must be a JSON object (or a string holding one)")
    try:
        ev = Evaluation.model_validate(raw)
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(x) for x in first["loc"])
        raise ConfigError(f"{where}: bad 'evaluation'{' at ' + loc if loc else ''}: {first['msg']}") from e
    return ev, [" ".join(str(c).split()) for c in raw["required"]]


def load_widesearch(data_dir: Path) -> list[Question]:
    """Every task of ``data_dir`` as a Question (file order)."""
    data_dir = Path(data_dir)
    path = data_dir / TASKS_FILE
    if not path.exists():
        raise ConfigError(f"not a WideSearch directory: {path} not found")
    out = []
    for no, row in iter_jsonl(path):
        where = f"{path}:{no}"
        if not isinstance(row, dict):
            raise ConfigError(f"{where}: each line must be a JSON object")
        for key in ("instance_id", "query", "evaluation"):
            if row.get(key) in (None, ""):
                raise ConfigError(f"{where}: missing field '{key}'")
        iid, query = str(row["instance_id"]), row["query"]
        if not isinstance(query, str):
            raise ConfigError(f"{where}: 'query' must be a string")
        ev, shown = parse_evaluation(row["evaluation"], where)
        gold_text, _ = read_gold(data_dir / GOLD_DIR / f"{iid}.csv", ev)
        out.append(Question(
            id=safe_id(iid),
            question=task_prompt(query, shown),
            answer=gold_text,
            evaluation=ev.model_dump(mode="json"),
            meta={"instance_id": iid, "language": str(row.get("language") or ""), "query": query},
        ))
    return out
