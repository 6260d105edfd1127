"""What benchmarks with a local corpus share: where indexes are built, a content stamp of data files,
and a lock so threads and processes building the same index wait for one another."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path


def default_cache_root() -> Path:
    """``$FTE_CACHE_DIR``, else ``~/.cache/fte-shell``."""
    env = os.environ.get("FTE_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "fte-shell"


def content_stamp(files: list[Path]) -> str:
    """First 16 hex digits of SHA-256 over the names and bytes of ``files`` (a copy or a ``touch`` of the
    data does not change it; an edit does)."""
    h = hashlib.sha256()
    for p in files:
        h.update(p.name.encode() + b"\0")
        with p.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        h.update(b"\0")
    return h.hexdigest()[:16]


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``path`` (other processes building the same corpus wait)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
