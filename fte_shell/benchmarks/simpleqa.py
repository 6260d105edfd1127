"""SimpleQA (Wei et al., 2024; ``simpleqa:FILE.csv``): ``simple_qa_test_set.csv`` as published
(``metadata``, ``problem``, ``answer``; ``metadata`` is a Python dict literal with ``topic``,
``answer_type`` and ``urls``). Graded three-way — CORRECT, INCORRECT, NOT_ATTEMPTED — by an LLM judge
(preset ``llm-three-way``); the report adds the benchmark's summary: correct, not attempted, correct given
attempted and their F-score."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..config import BenchmarkOptions
from ..errors import ConfigError
from ..metrics.scores import GRADES, grade_summary
from .base import Log, Question, QuestionAnswer, question_id, read_csv, require_fields
from .sections import Placed, ReportData, Section, pct, rows_of, verdict_of

REQUIRED = ("metadata", "problem", "answer")


def _metadata(text: str, where: str) -> dict[str, Any]:
    if not text.strip():
        return {}
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError) as e:
        raise ConfigError(f"{where}: 'metadata' is not a dict literal ({e.__class__.__name__})") from None
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: 'metadata' is not a dict literal")
    return {k: value[k] for k in ("topic", "answer_type", "urls") if k in value}


def load_simpleqa(path: Path) -> list[Question]:
    """Read SimpleQA's CSV; ids are hashes of the problem text (the file has none)."""
    out: list[Question] = []
    names, rows = read_csv(path, "simpleqa")
    require_fields(names, REQUIRED, f"{path}:1", "SimpleQA's CSV")
    for i, row in rows:
        if not (row.get("problem") or "").strip():
            raise ConfigError(f"{path}:{i}: empty 'problem'")
        out.append(Question(id=question_id(row["problem"]), question=row["problem"], answer=row["answer"],
                            meta=_metadata(row.get("metadata") or "", f"{path}:{i}")))
    return out


def summary_section(d: ReportData) -> Section | None:
    """SimpleQA's summary per row, from the verdicts' ``grade`` (None without graded SimpleQA runs)."""
    stats = []
    ungraded = 0
    for label, runs in rows_of(d, BENCHMARK.kind).items():
        grades = []
        for r in runs:
            v = None if r.infra_failure else verdict_of(r)
            if v is None:
                continue
            if v.get("grade") in GRADES:
                grades.append(v["grade"])
            else:
                ungraded += 1
        if grades:
            stats.append({"profile": label, **grade_summary(grades)})
    if not stats:
        return None
    head = ["Profile", "Graded runs", "Correct", "Not attempted", "Correct given attempted", "F-score"]
    body = [[s["profile"], str(s["n"]), pct(s["correct"]), pct(s["not_attempted"]), pct(s["correct_given_attempted"]),
             pct(s["f_score"])] for s in stats]
    notes = ["SimpleQA's summary over the runs graded CORRECT / INCORRECT / NOT_ATTEMPTED (docs/metrics.md)."]
    if ungraded:
        notes.append(f"{ungraded} judged run(s) have no three-way grade (graded by another preset) and are left out.")
    return Section("SimpleQA summary", [(head, body)], notes, metrics={"simpleqa": stats})


class SimpleQA(QuestionAnswer):
    kind = "simpleqa"
    summary = "simpleqa:FILE.csv — SimpleQA's simple_qa_test_set.csv (three-way grade, F-score)"
    judge_preset = "llm-three-way"

    def load(self, source: Path, split: str, options: BenchmarkOptions, log: Log | None) -> list[Question]:
        return load_simpleqa(source)

    def report_sections(self) -> Sequence[Placed]:
        return (Placed(summary_section, "results"),)


BENCHMARK = SimpleQA()
