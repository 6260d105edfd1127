"""JSON files written so that no reader ever sees half of one, and JSON-lines read with errors that name
the file and line. Every JSON file fte-shell writes goes through :func:`write_json_atomic` or
:func:`write_jsonl_atomic`; a full disk raises :class:`DiskFull` (naming the file) and leaves the old file as
it was."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ..errors import ConfigError, FteError
from ..stops import FULL_ERRNOS, exception_chain


class DiskFull(FteError):
    """A write failed because the device holding ``path`` is full (stop reason ``disk_full``)."""

    stop_reason = "disk_full"

    def __init__(self, path: Path | str):
        self.path = Path(path)
        super().__init__(f"disk full: no space left on the device holding {self.path}; free space there, then "
                         "rerun the same command to resume")


def is_disk_full(e: BaseException) -> bool:
    """True when ``e`` (or an exception in its cause/context chain) is a full device."""
    return any(isinstance(x, DiskFull) or (isinstance(x, OSError) and x.errno in FULL_ERRNOS)
               for x in exception_chain(e))


def raise_if_full(e: OSError, path: Path | str) -> None:
    """Raise :class:`DiskFull` naming ``path`` (from ``e``) when ``e`` is a full device; else return."""
    if e.errno in FULL_ERRNOS:
        raise DiskFull(path) from e


@contextlib.contextmanager
def naming_full_disk(path: Path | str) -> Iterator[None]:
    """Turn an ``OSError`` of a full device inside the block into :class:`DiskFull` naming ``path``."""
    try:
        yield
    except OSError as e:
        raise_if_full(e, path)
        raise


def dumps(obj: Any) -> str:
    """One-line JSON (UTF-8 kept, unknown types as ``str``)."""
    return json.dumps(obj, ensure_ascii=False, default=str)


def write_lines_atomic(path: Path, lines: Iterable[str]) -> int:
    """Write ``lines`` (each with its newline) to ``path`` via a temporary file beside it, fsync and rename,
    streaming (nothing held in memory); returns how many were written. An exception raised while the lines
    are produced leaves ``path`` as it was; a full disk is :class:`DiskFull` naming the file."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    n = 0
    try:
        with naming_full_disk(path), open(tmp, "w", encoding="utf-8") as f:
            for line in lines:
                f.write(line)
                n += 1
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return n


def _write_atomic(path: Path, text: str) -> None:
    write_lines_atomic(path, [text])


def write_json_atomic(path: Path, obj: Any) -> None:
    """Write ``obj`` as indented JSON to ``path`` via a temporary file, fsync and rename."""
    _write_atomic(path, json.dumps(obj, ensure_ascii=False, indent=2, default=str) + "\n")


def write_jsonl_atomic(path: Path, rows: Iterable[Any]) -> None:
    """Write ``rows`` as JSON lines to ``path`` via a temporary file, fsync and rename."""
    _write_atomic(path, "".join(dumps(r) + "\n" for r in rows))


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object file, or None when missing or unreadable."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None


def iter_lines(path: Path, error: type[FteError] = ConfigError) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, line)`` for each non-blank line of a UTF-8 text file (1-based numbers); an
    unreadable file raises ``error`` naming it."""
    path = Path(path)
    try:
        fh = path.open(encoding="utf-8")
    except OSError as e:
        raise error(f"cannot read {path}: {e.strerror or e}") from e
    with fh:
        for no, line in enumerate(fh, 1):
            if line.strip():
                yield no, line


def iter_jsonl(path: Path, error: type[FteError] = ConfigError) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, object)`` for each non-blank line of ``path`` (1-based numbers).

    An unreadable file or a line that is not JSON raises ``error`` with ``path:line`` in its message."""
    for no, line in iter_lines(path, error):
        try:
            yield no, json.loads(line)
        except json.JSONDecodeError as e:
            raise error(f"{path}:{no}: not valid JSON ({e.msg})") from e


def read_jsonl_lenient(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSON-lines file, skipping blank, torn or non-object lines ([] when missing)."""
    out: list[dict[str, Any]] = []
    try:
        lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return out
    for line in lines:
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out
