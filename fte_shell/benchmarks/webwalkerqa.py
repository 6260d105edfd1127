"""WebWalkerQA (Wu et al., 2025; ``webwalkerqa:FILE.jsonl``): the publisher's JSON lines (``question``,
``answer``, ``root_url``, ``info`` with ``difficulty_level``, ``lang``, ``domain``…). Each question is
asked with its website's root address (the benchmark's start page); searched and fetched on the open web;
graded by an LLM judge; difficulty, language and domain are kept in meta and are report groupings."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..config import BenchmarkOptions
from ..errors import ConfigError
from ..record.jsonio import iter_jsonl
from .base import Log, Question, QuestionAnswer, question_id, require_fields, safe_id
from .sections import Placed, ReportData, Section, accuracy_tables

REQUIRED = ("question", "answer", "root_url", "info")
GROUPS = (("Difficulty", "difficulty"), ("Language", "lang"), ("Domain", "domain"))
"""The report's groupings: (heading, meta key)."""

START = "\n\nStart from the website {root_url} ."
"""Appended to every question: the website it is about (this project's words)."""


def _info(info: dict[str, Any]) -> dict[str, Any]:
    return {"difficulty": info.get("difficulty_level", info.get("difficulty")), "lang": info.get("lang"),
            "domain": info.get("domain"), **({"type": info["type"]} if "type" in info else {})}


def load_webwalkerqa(path: Path) -> list[Question]:
    """Read WebWalkerQA's JSONL; ``id`` when a row has one, else a hash of the question."""
    out: list[Question] = []
    for i, row in iter_jsonl(Path(path)):
        if not isinstance(row, dict):
            raise ConfigError(f"{path}:{i}: not a JSON object")
        require_fields(row, REQUIRED, f"{path}:{i}", "a WebWalkerQA row")
        if not isinstance(row["question"], str) or not isinstance(row["info"], dict):
            raise ConfigError(f"{path}:{i}: 'question' must be a string and 'info' an object")
        root = str(row["root_url"] or "")
        meta = {"root_url": root, **{k: v for k, v in _info(row["info"]).items() if v not in (None, "")}}
        rid = row.get("id")
        out.append(Question(id=safe_id(rid) if rid else question_id(row["question"] + root),
                            question=row["question"] + (START.format(root_url=root) if root else ""),
                            answer=None if row["answer"] is None else str(row["answer"]), meta=meta))
    return out


def groups_section(d: ReportData) -> Section | None:
    """Accuracy by difficulty, language and domain."""
    dims = [(title, lambda m, k=key: [str(m[k])] if m.get(k) not in (None, "") else []) for title, key in GROUPS]
    tables, metrics = accuracy_tables(d, BENCHMARK.kind, dims)
    if not tables:
        return None
    return Section("WebWalkerQA accuracy by difficulty, language and domain", tables,
                   ["Accuracy per group of the question's info (docs/metrics.md)."], metrics={"webwalkerqa_groups": metrics})


class WebWalkerQA(QuestionAnswer):
    kind = "webwalkerqa"
    summary = "webwalkerqa:FILE.jsonl — WebWalkerQA (question, answer, root_url, info)"

    def load(self, source: Path, split: str, options: BenchmarkOptions, log: Log | None) -> list[Question]:
        return load_webwalkerqa(source)

    def report_sections(self) -> Sequence[Placed]:
        return (Placed(groups_section, "analysis"),)


BENCHMARK = WebWalkerQA()
