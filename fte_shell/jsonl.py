"""Reading JSON-lines input files (datasets, corpora) with errors that name the file and line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .errors import ConfigError, FteError


def iter_jsonl(path: Path, error: type[FteError] = ConfigError) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, object)`` for each non-blank line of ``path`` (1-based numbers).

    An unreadable file or a line that is not JSON raises ``error`` with ``path:line`` in its message."""
    path = Path(path)
    try:
        fh = path.open(encoding="utf-8")
    except OSError as e:
        raise error(f"cannot read {path}: {e.strerror or e}") from e
    with fh:
        for no, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                yield no, json.loads(line)
            except json.JSONDecodeError as e:
                raise error(f"{path}:{no}: not valid JSON ({e.msg})") from e
