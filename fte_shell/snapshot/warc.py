"""WARC 1.1 writing and reading with warcio's manual API (sha256 digests, one gzip member per record).

One :class:`WarcFile` per writer process: ``fte-<UTC stamp>-<host>-<pid>-<random>.warc.gz`` in the
snapshot directory, opened on first write, written under a lock (threads of the process share it), flushed
after every capture so another process can read it at once.
"""

from __future__ import annotations

import io
import json
import os
import secrets
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders
from warcio.utils import Digester
from warcio.warcwriter import WARCWriter

from ..version import __version__ as _fte_version

WARC_VERSION = "1.1"
SUFFIX = ".warc.gz"


class Sha256WARCWriter(WARCWriter):
    """warcio's writer with sha256 block and payload digests (its default is sha1)."""

    @staticmethod
    def _create_digester() -> Digester:
        return Digester("sha256")


def warc_date(ts: datetime) -> str:
    """WARC 1.1 date with microseconds (``2026-12-01T09:41:29.123456Z``)."""
    return ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class Rec:
    """One record to write."""

    type: str
    """WARC-Type: request, response, resource, conversion, metadata."""
    uri: str
    """WARC-Target-URI."""
    payload: bytes
    content_type: str | None = None
    """Content-Type of a non-HTTP record (HTTP records: warcio sets application/http)."""
    http: StatusAndHeaders | None = None
    """Status line and headers of a request/response record."""
    headers: tuple[tuple[str, str], ...] = ()
    """Extra WARC headers (WARC-Refers-To, WARC-Concurrent-To, WARC-IP-Address, …)."""
    record_id: str | None = None


def new_record_id() -> str:
    """A fresh ``<urn:uuid:…>`` record id."""
    from warcio.statusandheaders import StatusAndHeadersParser

    return StatusAndHeadersParser.make_warc_id()


@dataclass(frozen=True)
class Written:
    """Where a record went: ``offset`` and ``length`` of its gzip member in ``file``."""

    record_id: str
    file: str
    offset: int
    length: int


class WarcFile:
    """This process's WARC file in ``directory`` (created on the first write)."""

    def __init__(self, directory: Path):
        self.dir = directory
        self._lock = threading.Lock()
        self._fh: BinaryIO | None = None
        self._writer: Sha256WARCWriter | None = None
        self._pid = -1
        self.name: str | None = None

    def _open(self) -> None:
        if self._fh is not None and self._pid == os.getpid():
            return
        stamp = datetime.now(UTC).strftime("%Y%m%d%H%M%S")
        host = "".join(c if c.isalnum() else "-" for c in socket.gethostname())[:40] or "host"
        self.name = f"fte-{stamp}-{host}-{os.getpid()}-{secrets.token_hex(3)}{SUFFIX}"
        self._fh = open(self.dir / self.name, "xb")  # noqa: SIM115 - lives as long as the store
        self._pid = os.getpid()
        self._writer = Sha256WARCWriter(self._fh, gzip=True, warc_version=WARC_VERSION)
        info = {
            "software": f"fte-shell/{_fte_version}",
            "format": "WARC File Format 1.1",
            "description": "fte-shell snapshot: request/response per hop, conversion = the text written to /work, "
            "metadata = JSON provenance; searches as request/resource/metadata",
        }
        self._writer.write_record(self._writer.create_warcinfo_record(self.name, info))
        self._fh.flush()

    def write(self, recs: list[Rec], when: datetime) -> list[Written]:
        """Append ``recs`` (one capture) and flush; returns where each went."""
        with self._lock:
            self._open()
            assert self._fh is not None and self._writer is not None and self.name is not None
            out: list[Written] = []
            date = warc_date(when)
            for r in recs:
                rid = r.record_id or new_record_id()
                hdrs = {"WARC-Record-ID": rid, "WARC-Date": date, **dict(r.headers)}
                if r.content_type and not r.http:
                    hdrs["Content-Type"] = r.content_type
                rec = self._writer.create_warc_record(
                    r.uri,
                    r.type,
                    payload=io.BytesIO(r.payload),
                    length=len(r.payload),
                    warc_content_type=r.content_type or "",
                    warc_headers_dict=hdrs,
                    http_headers=r.http,
                )
                start = self._fh.tell()
                self._writer.write_record(rec)
                out.append(Written(rid, self.name, start, self._fh.tell() - start))
            self._fh.flush()
            os.fsync(self._fh.fileno())
            return out

    def close(self) -> None:
        with self._lock:
            if self._fh is not None and self._pid == os.getpid():
                self._fh.close()
            self._fh = self._writer = None


def read_record(path: Path, offset: int) -> tuple[dict[str, str], bytes]:
    """``(WARC headers, payload)`` of the record at ``offset`` of ``path`` (the HTTP headers stripped)."""
    with open(path, "rb") as fh:
        fh.seek(offset)
        for rec in ArchiveIterator(fh):
            return dict(rec.rec_headers.headers), rec.content_stream().read()
    raise ValueError(f"no WARC record at offset {offset} of {path}")


def iter_records(path: Path, *, check_digests: bool = False) -> Iterator[tuple[int, int, Any, bytes]]:
    """``(offset, length, record, payload)`` for every record of ``path``."""
    with open(path, "rb") as fh:
        it = ArchiveIterator(fh, check_digests=check_digests)
        for rec in it:
            payload = rec.content_stream().read()
            offset = it.get_record_offset()
            it.read_to_end(rec)
            yield offset, it.get_record_length(), rec, payload


def json_bytes(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, sort_keys=True, indent=1).encode("utf-8")
