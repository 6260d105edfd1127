"""Generic JSONL (``jsonl:FILE``, or any other plain path): ``{id?, question, answer?, ...}`` one object
a line, other keys kept as meta; searched on the open web; graded by exact match + F1 (or the LLM judge).
Also the grading of a run directory outside any sweep."""

from __future__ import annotations

from pathlib import Path

from ..config import BenchmarkOptions
from ..errors import ConfigError
from ..record.jsonio import iter_jsonl
from .base import Log, Question, QuestionAnswer, question_id, safe_id


def load_jsonl(path: Path) -> list[Question]:
    """Read ``{id?, question, answer?, ...}`` one object a line; other keys go to ``meta``."""
    out: list[Question] = []
    for i, row in iter_jsonl(path):
        if not isinstance(row, dict) or not isinstance(row.get("question"), str):
            raise ConfigError(f"{path}:{i}: each line needs a string field 'question'")
        qid = row.get("id", row.get("_id"))
        answer = row.get("answer")
        meta = {k: v for k, v in row.items() if k not in ("id", "_id", "question", "answer")}
        out.append(
            Question(
                id=safe_id(qid) if qid not in (None, "") else question_id(row["question"]),
                question=row["question"],
                answer=None if answer is None else str(answer),
                meta=meta,
            )
        )
    return out


class Jsonl(QuestionAnswer):
    kind = "jsonl"
    summary = "jsonl:FILE — one {id?, question, answer?} object a line"

    def claims(self, path: Path) -> bool:
        return True  # the last resort of a bare path

    def load(self, source: Path, split: str, options: BenchmarkOptions, log: Log | None) -> list[Question]:
        return load_jsonl(source)


BENCHMARK = Jsonl()
