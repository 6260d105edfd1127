"""The snapshot's index: a sqlite file (``index.sqlite``, WAL mode) of every capture, kept by the store and
rebuilt from the WARC files when it is lost (or when WARC files it has never seen appear, e.g. after a
merge or a copy). Several processes may write it at once (sqlite's locking; a busy timeout); opening it is
one process at a time (an advisory lock on the directory), because sqlite answers "database is locked" at
once, without waiting, to a second process that opens the file while the first is making it a WAL database."""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from warcio.exceptions import ArchiveLoadFailed

from .warc import SUFFIX, iter_records

INDEX = "index.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS captures (
  id TEXT PRIMARY KEY,          -- WARC-Record-ID of the capture's metadata record
  kind TEXT NOT NULL,           -- page | search
  key TEXT NOT NULL,            -- page: canonical URL; search: JSON {backend, params} (sorted)
  uri TEXT NOT NULL,            -- WARC-Target-URI
  time TEXT NOT NULL,           -- capture time, ISO-8601 UTC with microseconds (sortable)
  status TEXT NOT NULL,         -- ok | refused
  file TEXT NOT NULL,           -- WARC file name in the snapshot directory
  start_offset INTEGER NOT NULL,  -- the capture's first record (its records are contiguous)
  meta_offset INTEGER NOT NULL, meta_length INTEGER NOT NULL,
  body_offset INTEGER NOT NULL, body_length INTEGER NOT NULL,  -- conversion/resource record; -1 when refused
  body_id TEXT,                 -- its WARC-Record-ID
  sha256 TEXT,                  -- hex sha256 of that record's payload
  size INTEGER NOT NULL         -- its payload bytes
);
CREATE INDEX IF NOT EXISTS captures_key ON captures (kind, key, time);
CREATE TABLE IF NOT EXISTS files (name TEXT PRIMARY KEY);
"""


@dataclass(frozen=True)
class Capture:
    """One indexed capture."""

    id: str
    kind: str
    key: str
    uri: str
    time: str
    status: str
    file: str
    start_offset: int
    meta_offset: int
    meta_length: int
    body_offset: int
    body_length: int
    body_id: str | None
    sha256: str | None
    size: int

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


_COLS = "id, kind, key, uri, time, status, file, start_offset, meta_offset, meta_length, body_offset, body_length, body_id, sha256, size"


@contextmanager
def _one_opener(directory: Path) -> Iterator[None]:
    """Hold an exclusive advisory lock on the snapshot directory while an index is opened (and a lost one
    rebuilt), so that concurrent processes open it one after another. Where the file system has no
    ``flock`` for a directory (NFS emulates it with byte-range locks, which a directory cannot take), the
    open goes on unlocked, as sqlite alone would."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


class Index:
    """The capture index of one snapshot directory. Thread-safe."""

    def __init__(self, directory: Path):
        self.dir = directory
        self.path = directory / INDEX
        self._lock = threading.Lock()
        with _one_opener(directory):
            fresh = not self.path.exists()
            self._db = sqlite3.connect(self.path, timeout=60.0, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA busy_timeout=60000")
            self._db.executescript(_SCHEMA)
            self.rebuilt = fresh and any(directory.glob("*" + SUFFIX))
            """True when this open rebuilt a lost index from the WARC files."""
            self.scan_new()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # --- write ---------------------------------------------------------------------------------------
    def add(self, cap: Capture) -> None:
        with self._lock:
            self._db.execute(
                f"INSERT OR IGNORE INTO captures ({_COLS}) VALUES ({', '.join('?' * 15)})",
                tuple(cap.__dict__.values()),
            )

    def register_file(self, name: str) -> None:
        with self._lock:
            self._db.execute("INSERT OR IGNORE INTO files (name) VALUES (?)", (name,))

    def scan_new(self) -> int:
        """Index every WARC file of the directory this index has not seen; returns captures added."""
        with self._lock:
            known = {r[0] for r in self._db.execute("SELECT name FROM files")}
        added = 0
        for path in sorted(self.dir.glob("*" + SUFFIX)):
            if path.name in known:
                continue
            self.register_file(path.name)
            for cap in scan_file(path):
                self.add(cap)
                added += 1
        return added

    # --- read ----------------------------------------------------------------------------------------
    def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[Capture]:
        with self._lock:
            return [Capture(*r) for r in self._db.execute(f"SELECT {_COLS} FROM captures {sql}", args)]

    def latest(self, kind: str, key: str) -> Capture | None:
        rows = self._rows("WHERE kind = ? AND key = ? ORDER BY time DESC, rowid DESC LIMIT 1", (kind, key))
        return rows[0] if rows else None

    def get(self, capture_id: str) -> Capture | None:
        rows = self._rows("WHERE id = ?", (capture_id,))
        return rows[0] if rows else None

    def all(self) -> list[Capture]:
        return self._rows("ORDER BY kind, key, time")

    def for_key(self, kind: str, key: str) -> list[Capture]:
        return self._rows("WHERE kind = ? AND key = ? ORDER BY time", (kind, key))


def scan_file(path: Path) -> list[Capture]:
    """The captures of one WARC file, read from its metadata records (a cut last record is skipped)."""
    import hashlib

    bodies: dict[str, tuple[int, int, str]] = {}
    metas: list[tuple[int, int, int, str, str, str, dict[str, Any]]] = []
    start = -1  # first record after the previous capture
    try:
        for offset, length, rec, payload in iter_records(path):
            h = rec.rec_headers
            if start < 0:
                start = offset
            rid = h.get_header("WARC-Record-ID")
            rtype = h.get_header("WARC-Type")
            if rtype == "warcinfo":
                start = -1
            elif rtype in ("conversion", "resource"):
                bodies[rid] = (offset, length, hashlib.sha256(payload).hexdigest())
            elif rtype == "metadata" and (h.get_header("Content-Type") or "").startswith("application/json"):
                try:
                    meta = json.loads(payload)
                except ValueError:
                    continue
                if isinstance(meta, dict) and isinstance(meta.get("capture"), dict):
                    metas.append((start, offset, length, rid, h.get_header("WARC-Target-URI") or "",
                                  h.get_header("WARC-Date") or "", meta))
                start = -1
    except (ArchiveLoadFailed, EOFError, OSError, ValueError):
        pass  # a record cut by a crash at the end of the file: the captures before it count
    out = []
    for first, offset, length, rid, uri, date, meta in metas:
        cap = meta["capture"]
        body_id = cap.get("body_record")
        body = bodies.get(body_id) if body_id else None
        if body_id and body is None:
            continue  # its text never made it to disk
        out.append(Capture(
            id=rid, kind=str(cap.get("kind")), key=str(cap.get("key")), uri=uri, time=date,
            status=str(cap.get("status")), file=path.name, start_offset=first, meta_offset=offset, meta_length=length,
            body_offset=body[0] if body else -1, body_length=body[1] if body else -1, body_id=body_id,
            sha256=body[2] if body else None, size=int(cap.get("size") or 0),
        ))
    return out
