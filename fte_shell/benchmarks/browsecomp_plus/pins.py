"""Which data a BrowseComp-Plus sweep ran on (``sweep.json``'s ``dataset.revisions``; the report shows it).

- ``dataset``: the queries file and the qrels files;
- ``corpus``: the corpus files (the queries file when the corpus is embedded in it);
- ``benchmark``: the git commit of the benchmark's clone when the dataset directory is one (its
  ``search_agent/prompts.py`` holds the templates).

Each of ``dataset`` and ``corpus`` is the Hugging Face revision (``hf_repo``, ``hf_revision``) when its
files lie in a Hugging Face cache snapshot (``…/datasets--OWNER--NAME/snapshots/REVISION/…``, the path
itself or a directory on the way linked there), else a content hash: ``sha256`` over every file's name,
size and SHA-256, with the ``files`` (relative to the dataset directory) it covers. A file's SHA-256 is
remembered under the cache root (``sha256/``, one entry per path: its device, inode, size, modification time
and SHA-256), so a bench start or a resume does not read an unchanged corpus again (seconds per GB); a
changed file has a new modification time, so it is hashed anew and its entry replaced.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...digest import file_sha256
from ..corpora import default_cache_root


def hf_snapshot(path: Path) -> tuple[str, str] | None:
    """(repo, revision) when ``path`` lies in a Hugging Face cache snapshot (its directories resolved,
    the file itself not: the cache links each file to a blob without the revision in its path)."""
    real = Path(os.path.realpath(path.parent)) / path.name
    parts = real.parts
    for i in range(1, len(parts) - 1):
        if parts[i] == "snapshots" and parts[i - 1].startswith("datasets--"):
            return parts[i - 1].removeprefix("datasets--").replace("--", "/"), parts[i + 1]
    return None


def remembered_sha256(path: Path) -> str:
    """:func:`~fte_shell.digest.file_sha256` of ``path``, remembered by its path and stat (module docstring)."""
    resolved = path.resolve()
    st = resolved.stat()
    stamp = f"{st.st_dev} {st.st_ino} {st.st_size} {st.st_mtime_ns}"
    memo = default_cache_root() / "sha256" / hashlib.sha256(str(resolved).encode()).hexdigest()
    with contextlib.suppress(OSError, ValueError):
        known_stamp, known = memo.read_text().rsplit(" ", 1)
        if known_stamp == stamp and len(known.strip()) == 64:
            return known.strip()
    digest = file_sha256(resolved)
    with contextlib.suppress(OSError):  # a cache that cannot be written only costs the next start a read
        memo.parent.mkdir(parents=True, exist_ok=True)
        tmp = memo.with_name(f".{memo.name}.{os.getpid()}")
        tmp.write_text(f"{stamp} {digest}\n")
        os.replace(tmp, memo)
    return digest


def content_pin(root: Path, files: Sequence[Path]) -> dict[str, Any]:
    """The pin of ``files``: the Hugging Face snapshot they share, else their content hash."""
    snaps = {hf_snapshot(f) for f in files}
    if len(snaps) == 1 and (snap := snaps.pop()) is not None:
        return {"hf_repo": snap[0], "hf_revision": snap[1]}
    names = sorted(_rel(root, f) for f in files)
    by_name = {_rel(root, f): f for f in files}
    h = hashlib.sha256()
    for name in names:
        f = by_name[name]
        h.update(f"{name}\0{f.stat().st_size}\0{remembered_sha256(f)}\n".encode())
    return {"sha256": h.hexdigest(), "files": names}


def _rel(root: Path, f: Path) -> str:
    try:
        return str(f.relative_to(root))
    except ValueError:
        return str(f)


def git_commit(root: Path) -> str | None:
    """The commit checked out in ``root`` when it is a git clone (``.git/HEAD``, a loose or packed ref)."""
    git = root / ".git"
    try:
        head = (git / "HEAD").read_text().strip()
    except OSError:
        return None
    if not head.startswith("ref: "):
        return head or None
    ref = head.removeprefix("ref: ")
    try:
        return (git / ref).read_text().strip() or None
    except OSError:
        pass
    try:
        for line in (git / "packed-refs").read_text().splitlines():
            if line.endswith(" " + ref):
                return line.split()[0]
    except OSError:
        return None
    return None


def data_revisions(root: Path, queries: Path, qrels: Sequence[Path], corpus: Sequence[Path]) -> dict[str, Any]:
    """``{dataset, corpus[, benchmark]}`` of a BrowseComp-Plus directory (see the module docstring)."""
    out: dict[str, Any] = {"dataset": content_pin(root, [queries, *qrels]),
                           "corpus": content_pin(root, list(corpus) or [queries])}
    if (commit := git_commit(root)) is not None:
        out["benchmark"] = {"git_commit": commit}
    return out


def describe(revisions: dict[str, Any]) -> list[str]:
    """One line per pinned part, for the report."""
    out = []
    for part in ("dataset", "corpus", "benchmark"):
        pin = revisions.get(part)
        if not isinstance(pin, dict):
            continue
        if pin.get("hf_revision"):
            out.append(f"{part}: Hugging Face {pin.get('hf_repo')} at revision {pin['hf_revision']}")
        elif pin.get("sha256"):
            out.append(f"{part}: content sha256 {pin['sha256']} over {', '.join(pin.get('files') or [])}")
        elif pin.get("git_commit"):
            out.append(f"{part}: the clone's git commit {pin['git_commit']}")
    return out
