"""THE sweep directory (format: docs/bench.md): every reader and writer of its files goes through here.

::

    OUT/
      sweep.json        manifest: dataset, profiles, runs, config snapshot (secrets masked), digests, status
      questions.jsonl   the selected questions with their gold answers (the judge and the report read them)
      failures.jsonl    one line per attempt that ended for an infrastructure reason (not a result)
      runs/<profile>/<qid>/r<k>/   one run directory each (:mod:`.rundir`)
      shared/           caches shared by the sweep's runs (pages, searches, corpus index, snapshot)
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from .jsonio import (
    dumps,
    naming_full_disk,
    read_json,
    read_jsonl_lenient,
    write_json_atomic,
    write_jsonl_atomic,
)
from .rundir import find_runs

MANIFEST = "sweep.json"
QUESTIONS = "questions.jsonl"
FAILURES = "failures.jsonl"
RUNS = "runs"
SHARED = "shared"


class SweepDir:
    """One sweep directory ``OUT``. Thread-safe appends to ``failures.jsonl``."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self._lock = threading.Lock()

    # --- paths ------------------------------------------------------------------------------------------
    @property
    def manifest_path(self) -> Path:
        return self.root / MANIFEST

    @property
    def questions_path(self) -> Path:
        return self.root / QUESTIONS

    @property
    def failures_path(self) -> Path:
        return self.root / FAILURES

    @property
    def shared(self) -> Path:
        return self.root / SHARED

    @property
    def runs_dir(self) -> Path:
        return self.root / RUNS

    def run_dir(self, profile: str, qid: str, rep: int) -> Path:
        """``OUT/runs/<profile>/<qid>/r<rep>``."""
        return self.runs_dir / profile / qid / f"r{rep}"

    def runs(self) -> list[tuple[Path, str | None, str | None, int]]:
        """Every run directory: (dir, profile, qid, rep)."""
        return find_runs(self.root)

    # --- the manifest -----------------------------------------------------------------------------------
    def manifest(self) -> dict[str, Any] | None:
        """``sweep.json``, or None when there is none (or it is unreadable)."""
        return read_json(self.manifest_path)

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        """Write ``sweep.json`` atomically."""
        write_json_atomic(self.manifest_path, manifest)

    def dataset_kind(self) -> str | None:
        """The manifest's ``dataset.kind`` (which benchmark wrote the sweep), or None."""
        ds = (self.manifest() or {}).get("dataset")
        kind = ds.get("kind") if isinstance(ds, dict) else None
        return str(kind) if kind else None

    # --- questions --------------------------------------------------------------------------------------
    def questions(self) -> dict[str, dict[str, Any]]:
        """``{qid: row}`` of ``questions.jsonl`` (rows as written: ``id``, ``question``, ``answer``, ``meta``…)."""
        return {str(r["id"]): r for r in read_jsonl_lenient(self.questions_path) if "id" in r}

    def write_questions(self, rows: list[dict[str, Any]]) -> None:
        """Merge ``rows`` into ``questions.jsonl`` by ``id`` (atomically)."""
        known = self.questions()
        for r in rows:
            known[str(r["id"])] = r
        self.root.mkdir(parents=True, exist_ok=True)
        write_jsonl_atomic(self.questions_path, known.values())

    # --- failures ---------------------------------------------------------------------------------------
    def add_failure(self, row: dict[str, Any]) -> None:
        """Append one line to ``failures.jsonl`` (thread-safe)."""
        with self._lock, naming_full_disk(self.failures_path), self.failures_path.open("a", encoding="utf-8") as f:
            f.write(dumps(row) + "\n")


def sweep_root(path: Path) -> Path | None:
    """The sweep directory (holding ``sweep.json``) that is ``path`` or lies above it, if any."""
    for p in [path, *path.parents]:
        if SweepDir(p).manifest_path.exists():
            return p
    return None
