"""BrowseComp (``browsecomp:FILE.csv``, or a plain ``*.csv``): the encrypted CSV of the public evaluation
(``problem, answer, problem_topic, canary``), decrypted row by row; searched on the open web; graded by
exact match + F1 or, as the benchmark intends, the LLM judge (BrowseComp protocol)."""

from __future__ import annotations

from pathlib import Path

from ..config import BenchmarkOptions
from ..errors import ConfigError
from .base import Log, Question, QuestionAnswer, question_id, read_csv, require_fields
from .cipher import decrypt


def load_browsecomp(path: Path) -> list[Question]:
    """Read BrowseComp's CSV (``problem, answer, problem_topic, canary``) and decrypt each row."""
    out: list[Question] = []
    names, rows = read_csv(path, "BrowseComp")
    require_fields(names, ("answer", "canary", "problem"), f"{path}:1", "a BrowseComp CSV")
    for i, row in rows:
        try:
            problem = decrypt(row["problem"], row["canary"])
            answer = decrypt(row["answer"], row["canary"])
        except (ValueError, UnicodeDecodeError) as e:
            raise ConfigError(f"{path}:{i}: cannot decrypt row ({e.__class__.__name__}: {e})") from e
        meta = {"problem_topic": row.get("problem_topic", "")} if row.get("problem_topic") else {}
        out.append(Question(id=question_id(problem), question=problem, answer=answer, meta=meta))
    return out


class BrowseComp(QuestionAnswer):
    kind = "browsecomp"
    summary = "browsecomp:FILE.csv — BrowseComp's encrypted CSV"

    def claims(self, path: Path) -> bool:
        return path.suffix.lower() == ".csv"

    def load(self, source: Path, split: str, options: BenchmarkOptions, log: Log | None) -> list[Question]:
        return load_browsecomp(source)


BENCHMARK = BrowseComp()
