"""Humanity's Last Exam (Phan et al., 2025; ``hle:FILE``): the publisher's parquet file (read with pyarrow,
imported lazily) or the same rows as JSON lines (``id``, ``question``, ``image``, ``answer``,
``answer_type``, ``category``). Text-only: questions with an image are dropped (the sweep says how
many). Graded by an LLM judge whose reply carries the extracted answer, reasoning, correct yes/no and a
confidence 0-100 (preset ``llm-equivalence-confidence``); the report adds HLE's RMS calibration error beside accuracy."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ..config import BenchmarkOptions
from ..errors import ConfigError
from ..metrics.scores import calibration_error
from ..record.jsonio import iter_jsonl
from .base import Log, Question, QuestionAnswer, require_fields, safe_id
from .sections import Placed, ReportData, Section, num, pct, rows_of, verdict_of

REQUIRED = ("id", "question", "image", "answer", "answer_type", "category")

CONFIDENCE_PROMPT = ("\n\nAfter your answer, state how confident you are in it as a percentage from 0% to 100% "
                     "(for example: Confidence: 80%).")
"""Appended to every HLE question: the judge reads the agent's confidence from its response."""

BIN_SIZE = 100
"""HLE's calibration bins: 100 answers each, by confidence."""


def _rows(path: Path) -> Iterator[tuple[int, Any]]:
    if path.suffix.lower() == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError as e:  # pragma: no cover - the test extra has it
            raise ConfigError("hle: a .parquet file needs pyarrow (pip install 'fte-shell[parquet]')") from e
        try:
            table = pq.read_table(path)
        except Exception as e:  # pyarrow raises several kinds on a bad file
            raise ConfigError(f"{path}: not a readable parquet file ({e.__class__.__name__}: {e})") from e
        yield from enumerate(table.to_pylist(), start=1)  # parquet rows are numbered from 1
    else:
        yield from iter_jsonl(path)


def load_hle(path: Path, log: Log | None = None) -> list[Question]:
    """The text-only questions of HLE (rows with an empty ``image``)."""
    path = Path(path)
    out: list[Question] = []
    dropped = 0
    for i, row in _rows(path):
        if not isinstance(row, dict):
            raise ConfigError(f"{path}:{i}: not an object")
        require_fields(row, REQUIRED, f"{path}:{i}", "an HLE row")
        if not isinstance(row["question"], str) or not str(row["id"] or ""):
            raise ConfigError(f"{path}:{i}: 'question' must be a string and 'id' not empty")
        if row["image"]:
            dropped += 1
            continue
        out.append(Question(id=safe_id(row["id"]), question=row["question"] + CONFIDENCE_PROMPT,
                            answer=None if row["answer"] is None else str(row["answer"]),
                            meta={"answer_type": row["answer_type"], "category": row["category"]}))
    if log:
        log(f"HLE: {len(out)} text-only question(s) kept; {dropped} with an image dropped")
    return out


def calibration_section(d: ReportData) -> Section | None:
    """Accuracy and RMS calibration error per row of the HLE runs (None without judged HLE runs)."""
    rows = rows_of(d, BENCHMARK.kind)
    stats = []
    for label, runs in rows.items():
        judged = [(r, v) for r in runs if not r.infra_failure and (v := verdict_of(r)) is not None]
        if not judged:
            continue
        pairs = [(v["confidence"] / 100, bool(v["correct"])) for _, v in judged if isinstance(v.get("confidence"), int)]
        stats.append({"profile": label, "judged": len(judged), "accuracy": sum(bool(v["correct"]) for _, v in judged) / len(judged),
                      "with_confidence": len(pairs),
                      "calibration_error": calibration_error([c for c, _ in pairs], [k for _, k in pairs], BIN_SIZE)})
    if not stats:
        return None
    head = ["Profile", "Judged runs", "Accuracy", "With confidence", "Calibration error (RMS)"]
    body = [[s["profile"], str(s["judged"]), pct(s["accuracy"]), str(s["with_confidence"]),
             "–" if s["calibration_error"] is None else num(100 * s["calibration_error"], 1)] for s in stats]
    notes = [(f"Calibration error: HLE's RMS calibration error in percent, over bins of {BIN_SIZE} runs sorted by "
              "the confidence the judge read from the response (fewer runs make one bin); runs whose verdict has "
              "no confidence are left out of it (docs/metrics.md).")]
    return Section("HLE accuracy and calibration", [(head, body)], notes, metrics={"hle_calibration": stats})


class Hle(QuestionAnswer):
    kind = "hle"
    summary = "hle:FILE — Humanity's Last Exam (parquet or JSONL), text-only; LLM judge with calibration error"
    judge_preset = "llm-equivalence-confidence"

    def load(self, source: Path, split: str, options: BenchmarkOptions, log: Log | None) -> list[Question]:
        return load_hle(source, log)

    def report_sections(self) -> Sequence[Placed]:
        return (Placed(calibration_section, "results"),)


BENCHMARK = Hle()
