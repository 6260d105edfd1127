"""BrowseComp-ZH (Zhou et al., 2025; ``browsecomp-zh:FILE.xlsx``): the publisher's Excel file (``Topic``,
``Question``, ``Answer``, ``canary``) whose question and answer are encrypted as BrowseComp's (base64 of
XOR with SHA-256 of the row's canary, repeated); read with openpyxl (the ``bench`` extra, imported
lazily); searched on the open web; graded by the Chinese grader (preset ``llm-equivalence-zh``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..config import BenchmarkOptions
from ..errors import ConfigError
from .base import Log, Question, QuestionAnswer, question_id, require_fields
from .cipher import decrypt

REQUIRED = ("Topic", "Question", "Answer", "canary")


def _cell(v: Any) -> str:
    return "" if v is None else str(v).strip()


def load_browsecomp_zh(path: Path) -> list[Question]:
    """Read and decrypt BrowseComp-ZH's first worksheet (row 1: the column names)."""
    try:
        import openpyxl
    except ImportError as e:  # pragma: no cover - the test extra has it
        raise ConfigError("browsecomp-zh needs openpyxl (pip install 'fte-shell[bench]')") from e
    try:
        wb = openpyxl.load_workbook(path, read_only=True, data_only=True)
    except Exception as e:  # openpyxl raises many kinds on a file that is not xlsx
        raise ConfigError(f"{path}: not a readable .xlsx file ({e.__class__.__name__}: {e})") from e
    try:
        rows = wb.worksheets[0].iter_rows(values_only=True)
        head = [_cell(c) for c in next(rows, ())]
        require_fields(head, REQUIRED, f"{path}:1", "a BrowseComp-ZH file")
        col = {name: head.index(name) for name in REQUIRED}
        out: list[Question] = []
        for i, row in enumerate(rows, start=2):
            cells = {name: _cell(row[j]) if j < len(row) else "" for name, j in col.items()}
            if not any(cells.values()):
                continue  # a blank row
            if not cells["canary"]:
                raise ConfigError(f"{path}:{i}: empty 'canary' (the row's decryption key)")
            try:
                q = decrypt(cells["Question"], cells["canary"])
                a = decrypt(cells["Answer"], cells["canary"])
            except (ValueError, UnicodeDecodeError) as e:
                raise ConfigError(f"{path}:{i}: cannot decrypt row ({e.__class__.__name__}: {e})") from e
            out.append(Question(id=question_id(q), question=q, answer=a,
                                meta={"topic": cells["Topic"]} if cells["Topic"] else {}))
        return out
    finally:
        wb.close()


class BrowseCompZh(QuestionAnswer):
    kind = "browsecomp-zh"
    summary = "browsecomp-zh:FILE.xlsx — BrowseComp-ZH's encrypted Excel file (Chinese grader)"
    judge_preset = "llm-equivalence-zh"

    def load(self, source: Path, split: str, options: BenchmarkOptions, log: Log | None) -> list[Question]:
        return load_browsecomp_zh(source)


BENCHMARK = BrowseCompZh()
