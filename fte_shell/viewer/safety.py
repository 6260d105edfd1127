"""The one check every file the viewer reads or serves goes through: it must lie under a viewed root."""

from __future__ import annotations

from pathlib import Path, PurePosixPath


class UnsafePath(Exception):
    """A path that leaves the viewed directories (``..``, an absolute path, a symlink pointing out)."""


def safe_file(root: Path, rel: str) -> Path:
    """The regular file ``root/rel``. Refuses ``..`` components, absolute and empty paths, backslashes,
    NUL bytes, and any path whose resolved location (symlinks followed) is not under ``root``'s."""
    if not rel or "\x00" in rel or "\\" in rel:
        raise UnsafePath(f"bad path: {rel!r}")
    parts = PurePosixPath(rel).parts
    if rel.startswith("/") or any(p in ("..", "") for p in parts):
        raise UnsafePath(f"path leaves the viewed directory: {rel!r}")
    base = Path(root).resolve()
    target = (base / rel).resolve()
    if target != base and base not in target.parents:
        raise UnsafePath(f"path leaves the viewed directory (a symlink?): {rel!r}")
    if not target.is_file():
        raise UnsafePath(f"no such file: {rel!r}")
    return target
