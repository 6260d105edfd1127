"""The hand check of a sweep's verdicts: ``audit.jsonl``, one line per mark a reviewer gave a run in
``fte-shell view``. Append-only: a new mark of a run is a new line, and the latest line of a run is its
mark; nothing is ever rewritten. The file lives in the sweep directory holding the runs (or, for a run
that is in no sweep, in the run directory itself), and names each run by its path relative to that
directory, so a sweep that is moved or copied keeps its marks.
"""

from __future__ import annotations

import datetime as _dt
import fcntl
import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from .jsonio import dumps, raise_if_full, read_jsonl_lenient
from .sweepdir import sweep_root

AUDIT = "audit.jsonl"
AUDIT_SCHEMA = 1
NOTE_MAX = 2_000
"""Characters of a reviewer's note kept (longer notes are refused, not cut)."""


Mark = Literal["correct", "wrong"]
"""A reviewer's mark of a run's answer."""


class AuditMark(BaseModel):
    """One reviewer's mark of one run's answer."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    schema_version: int = AUDIT_SCHEMA
    """The version of this line's layout."""

    run: str
    """The run directory relative to the directory holding ``audit.jsonl`` (``.`` for that directory)."""

    mark: Mark
    """The reviewer's verdict on the run's final answer."""

    note: str | None = None
    """The reviewer's note (plain text; shown as text, never as markup)."""

    who: str
    """The reviewer (``fte-shell view --reviewer``, default the login name)."""

    at: str
    """When, ISO 8601 in UTC."""

    judge_correct: bool | None = None
    """The judge's verdict the reviewer saw when marking (None: the run was not judged)."""

    judge: str | None = None
    """Which judge gave that verdict (preset and model when known, else its method)."""


def audit_home(path: Path) -> Path:
    """Where the marks of runs under ``path`` are kept: the sweep directory holding ``path`` (itself
    included), else ``path``."""
    path = Path(path).resolve()
    return sweep_root(path) or path


def now_iso() -> str:
    """The current time as :attr:`AuditMark.at` writes it."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def append_mark(home: Path, mark: AuditMark) -> None:
    """Append one mark to ``home/audit.jsonl`` (created when missing), under an exclusive lock and
    synced to disk before returning; a full disk raises :class:`.jsonio.DiskFull`."""
    if mark.note is not None and len(mark.note) > NOTE_MAX:
        raise ValueError(f"a note holds at most {NOTE_MAX} characters (got {len(mark.note)})")
    path = Path(home) / AUDIT
    line = (dumps(mark.model_dump()) + "\n").encode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as e:
        raise_if_full(e, path)
        raise


def read_marks(home: Path) -> list[AuditMark]:
    """Every mark in ``home/audit.jsonl`` in the order given (torn or foreign lines skipped)."""
    out: list[AuditMark] = []
    for row in read_jsonl_lenient(Path(home) / AUDIT):
        try:
            out.append(AuditMark.model_validate(row))
        except ValueError:
            continue
    return out


def latest_marks(home: Path) -> dict[str, AuditMark]:
    """``{run path relative to home: its latest mark}``."""
    return {m.run: m for m in read_marks(home)}


def run_key(home: Path, run_dir: Path) -> str:
    """The :attr:`AuditMark.run` of ``run_dir`` under ``home``."""
    rel = Path(run_dir).resolve().relative_to(Path(home).resolve()).as_posix()
    return rel or "."
