"""A run directory as bytes (gzip-compressed tar) and back, placed atomically into the sweep directory.

The driver unpacks into a hidden sibling ``.<name>.part-<random>`` and renames it into place, so a run
directory either does not exist or is complete; :func:`remove_parts` deletes the hidden leftovers of a
driver killed mid-unpack (they never match the ``r*`` pattern readers use).
"""

from __future__ import annotations

import io
import os
import shutil
import tarfile
import uuid
from pathlib import Path

from ..safetar import extract_all

PART = ".part-"


def pack_dir(path: Path) -> bytes:
    """The tree under ``path`` as gzip-compressed tar bytes (member names relative to ``path``)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=6) as tar:
        tar.add(str(path), arcname=".")
    return buf.getvalue()


def unpack_into(data: bytes, dest: Path) -> None:
    """Extract ``data`` (from :func:`pack_dir`) so that ``dest`` appears complete or not at all.

    An existing ``dest`` is replaced. Member paths are confined to ``dest`` (:mod:`fte_shell.safetar`'s
    ``data`` rules: no absolute paths, no ``..``, no links out, no device files; on every Python)."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.parent / f".{dest.name}{PART}{uuid.uuid4().hex[:12]}"
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            extract_all(tar, part, kind="data")
        if dest.exists():
            shutil.rmtree(dest)
        os.rename(part, dest)
    finally:
        if part.exists():
            shutil.rmtree(part, ignore_errors=True)


def remove_parts(runs_dir: Path) -> int:
    """Delete the hidden ``.<name>.part-*`` directories under ``runs_dir/<profile>/<qid>/``."""
    n = 0
    for p in Path(runs_dir).glob(f"*/*/.*{PART}*"):
        shutil.rmtree(p, ignore_errors=True)
        n += 1
    return n
