"""Runs that ended for an infrastructure reason: the ``failures.jsonl`` log of every such attempt (the
stop reason of an exception is :func:`fte_shell.stops.stop_of_exception`, the resource it blames
:data:`fte_shell.stops.RESOURCE_OF`).

A run is not a result when its ``stop_reason`` is an infrastructure stop (:mod:`fte_shell.stops`), or
when the harness raised instead of finishing it. Such an attempt is one line of ``OUT/failures.jsonl``
(``{"qid", "profile", "rep", "stop_reason", "error", "when", "run_dir"}``); its ``result.json`` keeps the
infrastructure stop reason, so the judge and the report leave it out and a resume redoes it.
"""

from __future__ import annotations

import json
import threading
import traceback
from pathlib import Path
from typing import Any

from ...errors import FteError
from ...record.jsonio import write_json_atomic
from .config import Task
from .state import RESULT, now

FAILURES = "failures.jsonl"

GIVE_UP_STATUS: dict[str, str] = {
    "endpoint": "endpoint_unavailable",
    "sandbox": "sandbox_unavailable",
    "search": "search_unavailable",
}
"""The sweep's status (``sweep.json``) when it gave up waiting for a resource."""


def describe_exception(e: BaseException) -> str:
    """``Class: message`` (plus the last frames of the traceback for unexpected exceptions)."""
    text = f"{e.__class__.__name__}: {e}"
    if not isinstance(e, FteError):
        text += "\n" + "".join(traceback.format_exception(e)[-3:])
    return text


def last_error(run_dir: Path) -> str | None:
    """The message of the last ``error`` event of a run's trajectory (why it ended), if any."""
    path = run_dir / "trajectory.jsonl"
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            ev = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(ev, dict) and ev.get("type") == "error":
            return str(ev.get("message") or "")
    return None


def read_result(run_dir: Path) -> dict[str, Any] | None:
    """A run's ``result.json``, or None."""
    try:
        data = json.loads((run_dir / RESULT).read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def record_raised(t: Task, stop: str, error: str) -> None:
    """Give a run whose harness raised a ``result.json`` naming the infrastructure stop: the runner's
    own record (``crashed``) is kept, with ``stop_reason`` set to the resource when the exception named
    one; otherwise a minimal record is written."""
    old = read_result(t.run_dir)
    if old is not None:
        if stop != "failed":
            old["stop_reason"] = stop
        old.setdefault("error", error)
        write_json_atomic(t.run_dir / RESULT, old)
        return
    t.run_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(t.run_dir / RESULT, {
        "question": t.question.question, "answer": None, "profile": t.profile, "stop_reason": stop,
        "error": error, "qid": t.question.id, "rep": t.rep, "finished_at": now(),
    })


class FailureLog:
    """Appends one line per infrastructure-failed attempt to ``OUT/failures.jsonl`` (thread-safe)."""

    def __init__(self, out: Path):
        self.out = Path(out)
        self.path = self.out / FAILURES
        self._lock = threading.Lock()

    def add(self, t: Task, stop_reason: str, error: str | None) -> dict[str, Any]:
        """Append the line for ``t`` and return it."""
        try:
            rel = str(t.run_dir.relative_to(self.out))
        except ValueError:
            rel = str(t.run_dir)
        row = {"qid": t.question.id, "profile": t.profile, "rep": t.rep, "stop_reason": stop_reason,
               "error": error, "when": now(), "run_dir": rel}
        with self._lock, self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
        return row
