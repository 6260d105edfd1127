"""The run directory writer (format: docs/ARCHITECTURE.md, "Run directory").

::

    RUN_DIR/
      trajectory.jsonl   one JSON event a line, flushed after every event (fsync'd at the end)
      result.json        written last, atomically: its presence means the run finished
      workspace/         the question's cache (the profile writes it; the recorder only makes the dir)

Every event has ``type`` and ``t`` (seconds since the recorder was opened).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, Self

TRAJECTORY = "trajectory.jsonl"
RESULT = "result.json"
WORKSPACE = "workspace"

EventListener = Callable[[dict[str, Any]], None]


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, default=str)


def write_json_atomic(path: Path, obj: Any) -> None:
    """Write ``obj`` as JSON to ``path`` via a temporary file, fsync and rename (readers never see half)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(json.dumps(obj, ensure_ascii=False, indent=2, default=str) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class Recorder:
    """Appends trajectory events and writes ``result.json`` for one run.

    Opening a recorder on a directory that holds an earlier, unfinished or finished run starts it over:
    the old trajectory and result are replaced (the workspace is left as it is)."""

    def __init__(self, run_dir: Path, *, listener: EventListener | None = None):
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.workspace_dir.mkdir(exist_ok=True)
        (self.run_dir / RESULT).unlink(missing_ok=True)
        self._f: IO[str] | None = open(self.run_dir / TRAJECTORY, "w", encoding="utf-8")  # noqa: SIM115 - held until close()
        self._t0 = time.monotonic()
        self._lock = threading.Lock()
        self._listener = listener

    @property
    def result_path(self) -> Path:
        return self.run_dir / RESULT

    @property
    def workspace_dir(self) -> Path:
        return self.run_dir / WORKSPACE

    def elapsed(self) -> float:
        """Seconds since the recorder was opened."""
        return time.monotonic() - self._t0

    def event(self, type_: str, **fields: Any) -> dict[str, Any]:
        """Append one event (``type``, ``t``, then ``fields``) and flush it to the file."""
        ev: dict[str, Any] = {"type": type_, "t": round(self.elapsed(), 4), **fields}
        line = _dumps(ev)
        with self._lock:
            if self._f is None:
                raise ValueError(f"recorder for {self.run_dir} is closed")
            self._f.write(line + "\n")
            self._f.flush()
            if type_ == "end":
                os.fsync(self._f.fileno())
        if self._listener is not None:
            with contextlib.suppress(Exception):  # a display problem never stops a run (the event is on disk)
                self._listener(ev)
        return ev

    def write_result(self, result: dict[str, Any]) -> None:
        """Write ``result.json`` atomically (call last)."""
        write_json_atomic(self.result_path, result)

    def close(self) -> None:
        """Flush, fsync and close the trajectory file (idempotent)."""
        with self._lock:
            if self._f is not None:
                self._f.flush()
                os.fsync(self._f.fileno())
                self._f.close()
                self._f = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_trajectory(run_dir: Path) -> list[dict[str, Any]]:
    """Parse ``trajectory.jsonl`` of a run directory (raises ``ValueError`` naming a bad line)."""
    events = []
    path = Path(run_dir) / TRAJECTORY
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{i}: not a JSON event: {e}") from e
    return events
