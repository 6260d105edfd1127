"""``fte-shell snapshot ls | show | verify | merge | export``: what a snapshot holds, its text and
provenance, whether its digests and index agree, combining snapshots, and cutting out what one run (or
one sweep) used — a small archive to publish beside a paper."""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from warcio.exceptions import ArchiveLoadFailed

from ..errors import FteError
from ..workspace import canonical_url
from .index import INDEX, Capture, Index, scan_file
from .store import SnapshotStore
from .warc import SUFFIX, WARC_VERSION, Sha256WARCWriter, iter_records


def _open(directory: Path) -> SnapshotStore:
    directory = Path(directory)
    if not directory.is_dir() or not (any(directory.glob("*" + SUFFIX)) or (directory / INDEX).exists()):
        raise FteError(f"{directory} is not a snapshot directory (no WARC files, no {INDEX})")
    return SnapshotStore(directory)


@dataclass
class Resource:
    """One resource (page URL or search) and its captures."""

    kind: str
    uri: str
    key: str
    captures: list[Capture] = field(default_factory=list)

    @property
    def size(self) -> int:
        return sum(c.size for c in self.captures)


def list_resources(directory: Path) -> list[Resource]:
    """Every resource of the snapshot with its captures (oldest first)."""
    store = _open(directory)
    try:
        out: dict[tuple[str, str], Resource] = {}
        for c in store.index.all():
            out.setdefault((c.kind, c.key), Resource(c.kind, c.uri, c.key)).captures.append(c)
        return sorted(out.values(), key=lambda r: (r.kind, r.uri))
    finally:
        store.close()


def show(directory: Path, what: str, capture: str | None = None) -> tuple[Capture, dict[str, Any], str]:
    """``(capture, metadata, stored text)`` of a URL (its newest capture unless ``capture`` names one),
    a search target URI or key, or a capture id."""
    store = _open(directory)
    try:
        cap = store.index.get(capture or what)
        if cap is None:
            key = canonical_url(what) if "://" in what else what
            caps = [c for c in store.index.all() if c.key in (key, what) or c.uri == what]
            if not caps:
                raise FteError(f"{what} is not in the snapshot {directory}")
            cap = max(caps, key=lambda c: c.time)
        return cap, store.metadata(cap), store.body(cap).decode("utf-8", "replace")
    finally:
        store.close()


@dataclass
class Verification:
    files: int = 0
    records: int = 0
    captures: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def verify(directory: Path) -> Verification:
    """Check every record's block and payload digests, every indexed capture against its WARC records
    (ids, offsets, sha256 of the text), and that every capture in the files is indexed."""
    store = _open(directory)
    v = Verification()
    try:
        indexed = {c.id: c for c in store.index.all()}
        v.captures = len(indexed)
        seen: set[str] = set()
        for path in sorted(Path(directory).glob("*" + SUFFIX)):
            v.files += 1
            try:
                for offset, _length, rec, _payload in iter_records(path, check_digests=True):
                    v.records += 1
                    if rec.digest_checker.passed is False:
                        v.problems.append(f"{path.name} offset {offset}: " + "; ".join(map(str, rec.digest_checker.problems)))
            except (ArchiveLoadFailed, EOFError, OSError, ValueError) as e:
                v.problems.append(f"{path.name}: unreadable after record {v.records}: {e}")
            for cap in scan_file(path):
                seen.add(cap.id)
                got = indexed.get(cap.id)
                if got is None:
                    v.problems.append(f"{path.name}: capture {cap.id} ({cap.uri}) is not in the index")
                elif (got.file, got.meta_offset, got.body_offset, got.sha256) != (cap.file, cap.meta_offset, cap.body_offset, cap.sha256):
                    v.problems.append(f"index entry of {cap.id} ({cap.uri}) does not match {path.name}")
        for cid, cap in indexed.items():
            if cid not in seen:
                v.problems.append(f"index names capture {cid} ({cap.uri}) that no WARC file holds")
            elif cap.sha256 is not None and hashlib.sha256(store.body(cap)).hexdigest() != cap.sha256:
                v.problems.append(f"text of {cid} ({cap.uri}) does not match its sha256")
        return v
    finally:
        store.close()


def merge(dest: Path, sources: list[Path]) -> int:
    """Copy the WARC files of ``sources`` into ``dest`` (files it already has are skipped) and index
    them; returns the captures added."""
    Path(dest).mkdir(parents=True, exist_ok=True)
    for src in sources:
        files = sorted(Path(src).glob("*" + SUFFIX))
        if not files:
            raise FteError(f"{src} holds no WARC files")
        for f in files:
            target = Path(dest) / f.name
            if not target.exists():
                shutil.copyfile(f, target.with_suffix(".part"))
                target.with_suffix(".part").rename(target)
    index = Index(Path(dest))
    try:
        return index.scan_new()
    finally:
        index.close()


def used_captures(run: Path) -> list[str]:
    """Capture ids a run used (its ``snapshot.jsonl``), or every run of a sweep (its manifest and runs)."""
    logs = [run / "snapshot.jsonl"] if (run / "snapshot.jsonl").exists() else []
    logs += sorted(run.glob("shared/snapshot-manifest.jsonl")) + sorted(run.glob("runs/**/snapshot.jsonl"))
    if not logs:
        raise FteError(f"{run} has no snapshot.jsonl: it was not run with a snapshot")
    ids: list[str] = []
    for log in logs:
        for line in log.read_text(encoding="utf-8").splitlines():
            try:
                cid = json.loads(line).get("capture")
            except ValueError:
                continue
            if cid and cid not in ids:
                ids.append(cid)
    return ids


def export(directory: Path, run: Path, out: Path) -> tuple[int, Path]:
    """Write the captures ``run`` used into a new snapshot ``out`` (one WARC file + its index); the
    records are copied byte for byte, so their digests hold. Returns ``(captures, WARC file)``."""
    store = _open(directory)
    try:
        caps = []
        for cid in used_captures(Path(run)):
            cap = store.index.get(cid)
            if cap is None:
                raise FteError(f"capture {cid} used by {run} is not in the snapshot {directory}")
            caps.append(cap)
    finally:
        store.close()
    Path(out).mkdir(parents=True, exist_ok=True)
    name = f"fte-export-{Path(run).resolve().name}{SUFFIX}"
    target = Path(out) / name
    with open(target, "wb") as fh:
        writer = Sha256WARCWriter(fh, gzip=True, warc_version=WARC_VERSION)
        writer.write_record(writer.create_warcinfo_record(name, {
            "software": "fte-shell", "description": f"the captures used by {Path(run).resolve()}"}))
        for cap in sorted(caps, key=lambda c: (c.file, c.start_offset)):
            with open(Path(directory) / cap.file, "rb") as src:
                src.seek(cap.start_offset)
                fh.write(src.read(cap.meta_offset + cap.meta_length - cap.start_offset))
    index = Index(Path(out))
    index.close()
    return len(caps), target
