"""GAIA (Mialon et al., 2023; ``gaia:DIR``, or a directory holding ``metadata.jsonl``): one split's
``metadata.jsonl`` as the publisher ships it (``task_id``, ``Question``, ``Level``, ``Final answer``,
``file_name``). By default only the tasks without an attached file are kept (``--gaia-text-only``; the
sweep says how many it dropped). Graded by GAIA's own rule, no model (:func:`question_scorer`: the
plugin's preset ``gaia``, its default); the report adds accuracy per level."""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from pathlib import Path

from ..config import BenchmarkOptions
from ..errors import ConfigError
from ..record.jsonio import iter_jsonl
from .answers import Verdict
from .base import Log, Question, QuestionAnswer, require_fields, safe_id
from .presets import Preset
from .sections import Placed, ReportData, Section, accuracy_tables

PRESET = "gaia"
"""The grading preset name of GAIA's rule."""

METADATA = "metadata.jsonl"
"""The file of a GAIA split directory."""

FIELDS = ("task_id", "Question", "Level", "Final answer", "file_name")

ANSWER_FORMAT = (
    "\n\nGive as your final answer only the answer itself: a number, as few words as possible, or a "
    "comma-separated list of numbers and/or strings. Write a number with digits and without thousands "
    "separators or units such as $ or % unless the question asks for them; write a string without articles "
    "or abbreviations; apply these rules to each element of a list."
)
"""Appended to every GAIA question: the answer shape GAIA's rule compares (this project's words)."""


# --- GAIA's rule ------------------------------------------------------------------------------------------
def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def normalize_number(text: str) -> float:
    """A model answer as a number: ``$``, ``%`` and ``,`` removed, then read as a float (infinity when it
    is not a number, which equals no gold number)."""
    for ch in "$%,":
        text = text.replace(ch, "")
    n = _number(text)
    return float("inf") if n is None else n


def normalize_text(text: str, *, punctuation: bool = True) -> str:
    """White space removed, lower case, and (``punctuation``) ASCII punctuation removed."""
    s = re.sub(r"\s", "", text).lower()
    return s.translate(str.maketrans("", "", string.punctuation)) if punctuation else s


def question_scorer(answer: str | None, gold: str) -> bool:
    """GAIA's rule. A gold that reads as a number: the answer compared as a number
    (:func:`normalize_number`). A gold holding ``,`` or ``;``: both split on them, the same number of
    elements, each compared as a number when the gold element is one, else as text without white space,
    case-insensitive (punctuation kept). Any other gold: compared as text without white space and
    punctuation, case-insensitive. No answer compares as the text ``None``."""
    answer = "None" if answer is None else answer
    if _number(gold) is not None:
        return normalize_number(answer) == float(gold)
    if "," in gold or ";" in gold:
        gs, ans = re.split(r"[,;]", gold), re.split(r"[,;]", answer)
        if len(gs) != len(ans):
            return False
        return all(
            normalize_number(a) == float(g) if _number(g) is not None
            else normalize_text(a, punctuation=False) == normalize_text(g, punctuation=False)
            for a, g in zip(ans, gs)
        )
    return normalize_text(answer) == normalize_text(gold)


def gaia_verdict(answer: str | None, gold: str) -> Verdict:
    """The verdict of GAIA's rule on one answer (preset ``gaia``, a model-free rule)."""
    return Verdict(method="rule", correct=question_scorer(answer, gold), gold=gold, answer=answer, preset=PRESET)


GAIA_PRESET = Preset(PRESET, "GAIA's rule: numbers as numbers, lists element by element, strings normalized; no model",
                     rule=gaia_verdict)
"""GAIA's grading as a preset (``Benchmark.presets``): the dataset's default, usable on any sweep."""


# --- reading -------------------------------------------------------------------------------------------
def metadata_file(source: Path) -> Path:
    """``DIR/metadata.jsonl`` (or ``source`` itself when it is that file)."""
    return source if source.is_file() else source / METADATA


def load_gaia(source: Path, text_only: bool = True, log: Log | None = None) -> list[Question]:
    """The tasks of a GAIA split; ``text_only`` keeps those with an empty ``file_name``. A test split's
    hidden answer (``?``) is no gold answer."""
    path = metadata_file(Path(source))
    if not path.is_file():
        raise ConfigError(f"GAIA: {path} not found (gaia:DIR reads DIR/{METADATA} of one split, e.g. 2023/validation)")
    out: list[Question] = []
    dropped = total = 0
    for i, row in iter_jsonl(path):
        if not isinstance(row, dict):
            raise ConfigError(f"{path}:{i}: not a JSON object")
        require_fields(row, FIELDS, f"{path}:{i}", "a GAIA task")
        if not isinstance(row["Question"], str) or not str(row["task_id"]):
            raise ConfigError(f"{path}:{i}: 'Question' must be a string and 'task_id' not empty")
        try:
            level = int(row["Level"])
        except (TypeError, ValueError):
            raise ConfigError(f"{path}:{i}: 'Level' must be 1, 2 or 3 (got {row['Level']!r})") from None
        total += 1
        if text_only and row["file_name"]:
            dropped += 1
            continue
        gold = row["Final answer"]
        out.append(Question(
            id=safe_id(row["task_id"]), question=row["Question"] + ANSWER_FORMAT,
            answer=None if gold in (None, "", "?") else str(gold),
            meta={"level": level, **({"file_name": row["file_name"]} if row["file_name"] else {})},
        ))
    if log and text_only:
        log(f"GAIA: {len(out)} of {total} task(s) kept; {dropped} with an attached file dropped "
            "(--no-gaia-text-only keeps them)")
    return out


# --- grading and report ----------------------------------------------------------------------------------
def level_section(d: ReportData) -> Section | None:
    """GAIA's accuracy per level (None without judged GAIA runs)."""
    tables, metrics = accuracy_tables(d, BENCHMARK.kind, [("Level", lambda m: [f"Level {m['level']}"] if "level" in m else [])])
    if not tables:
        return None
    return Section("GAIA accuracy by level", tables,
                   ["Accuracy: share of judged runs correct by GAIA's rule, per level (docs/metrics.md)."],
                   metrics={"gaia_levels": metrics.get("Level", {})})


class Gaia(QuestionAnswer):
    kind = "gaia"
    summary = "gaia:DIR — GAIA's metadata.jsonl of one split (text-only tasks by default), graded by GAIA's rule"
    judge_preset = PRESET
    presets = (GAIA_PRESET,)

    def claims(self, path: Path) -> bool:
        return path.is_dir() and (path / METADATA).is_file()

    def load(self, source: Path, split: str, options: BenchmarkOptions, log: Log | None) -> list[Question]:
        return load_gaia(source, options.gaia_text_only, log)

    def report_sections(self) -> Sequence[Placed]:
        return (Placed(level_section, "results"),)


BENCHMARK = Gaia()
