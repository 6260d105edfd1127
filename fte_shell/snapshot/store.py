"""SnapshotStore: a directory of WARC files (one per writer process) plus the index that finds captures.

A *page capture* is written as: a ``request`` and a ``response`` record per hop (redirects included; a hop
that got no answer has only its request), a ``conversion`` record holding exactly the text written to
/work (the workspace file, header included), and a ``metadata`` record (JSON provenance). A refused or
failed fetch is a capture too: its hops and a metadata record with ``status: "refused"`` and the message.
A *search capture* is a ``request`` record (the parameters sent, JSON), a ``resource`` record (the
results, JSON) and a ``metadata`` record. The capture's id is its metadata record's WARC-Record-ID.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import zlib
from datetime import UTC, datetime
from importlib import metadata as _md
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from warcio.statusandheaders import StatusAndHeaders

from ..workspace import Document, render
from .index import Capture, Index
from .warc import Rec, WarcFile, json_bytes, new_record_id, read_record, warc_date

if TYPE_CHECKING:  # pragma: no cover
    from ..fetch.http import Hop

_CONTENT_LENGTH = re.compile(rb"\r\nContent-Length: *(\d+)", re.IGNORECASE)

_HOP_DROP = {"content-encoding", "transfer-encoding", "content-length"}
"""Response headers replaced: the stored body is the decoded one, so its length is set anew."""


def search_key(backend: str, params: dict[str, Any]) -> str:
    """The key of a search: backend + every parameter sent, sorted."""
    return json.dumps({"backend": backend, "params": params}, sort_keys=True, ensure_ascii=False)


def search_uri(backend: str, params: dict[str, Any]) -> str:
    """``urn:x-fte-search:<backend>?<sorted parameters>``: the WARC-Target-URI of a search capture."""
    return f"urn:x-fte-search:{quote(backend, safe='')}?" + urlencode(sorted((k, str(v)) for k, v in params.items()))


def _version(dist: str) -> str | None:
    try:
        return _md.version(dist)
    except _md.PackageNotFoundError:
        return None


def converter_info(content_type: str | None, body: bytes, url: str) -> dict[str, Any]:
    """Which converter made the text, its version and options (for the metadata record)."""
    from ..fetch import convert as c
    from ..fetch.decode import classify

    try:
        kind = classify(content_type, body[:8192], url)
    except Exception:  # noqa: BLE001 - provenance only
        kind = None
    info: dict[str, Any] = {"kind": kind}
    if kind == "html":
        info.update(name="crawl4ai html2text", version=_version("crawl4ai"),
                    options={"html2text": c.HTML2TEXT_OPTIONS, "excluded_tags": list(c.EXCLUDED_TAGS),
                             "content_selector": c.CONTENT_SELECTOR})
    elif kind == "pdf":
        info.update(name="crawl4ai pdf (pypdf)", version=_version("pypdf"), options={"max_pages": c.MAX_PDF_PAGES})
    elif kind == "text":
        info.update(name="decoded text", version=None, options={})
    return info


def _request_rec(hop: Hop) -> Rec:
    req = hop.request
    target = req.url.raw_path.decode("ascii", "replace") or "/"
    headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in req.headers.raw]
    if not any(k.lower() == "host" for k, _ in headers):
        headers.insert(0, ("Host", req.url.netloc.decode("ascii", "replace")))
    http = StatusAndHeaders(f"{req.method} {target} HTTP/1.1", headers, protocol="HTTP/1.1", is_http_request=True)
    return Rec("request", str(req.url), b"", http=http, record_id=new_record_id())


def _response_rec(hop: Hop, request_id: str) -> Rec:
    resp = hop.response
    assert resp is not None
    headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in resp.headers.raw
               if k.decode("latin-1").lower() not in _HOP_DROP]
    headers.append(("Content-Length", str(len(hop.body))))
    status = f"{resp.status_code} {resp.reason_phrase or ''}".strip()
    http = StatusAndHeaders(status, headers, protocol=resp.http_version or "HTTP/1.1")
    extra: list[tuple[str, str]] = [("WARC-Concurrent-To", request_id)]
    if hop.address:
        extra.append(("WARC-IP-Address", hop.address))
    return Rec("response", str(hop.request.url), hop.body, http=http, headers=tuple(extra), record_id=new_record_id())


_SECRET_HEADERS = {"x-api-key", "authorization", "cookie", "proxy-authorization"}


def _search_http(exchange: tuple[Any, Any], req_id: str) -> list[Rec]:
    """``request`` + ``response`` records of a search backend's HTTP exchange; credentials redacted."""
    req, resp = exchange
    headers = [(k.decode("latin-1"), "REDACTED" if k.decode("latin-1").lower() in _SECRET_HEADERS else v.decode("latin-1"))
               for k, v in req.headers.raw]
    body = req.content or b""
    http = StatusAndHeaders(f"{req.method} {req.url.raw_path.decode('ascii', 'replace') or '/'} HTTP/1.1", headers,
                            protocol="HTTP/1.1", is_http_request=True)
    rheaders = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in resp.headers.raw
                if k.decode("latin-1").lower() not in _HOP_DROP | {"set-cookie"}]
    content = resp.content or b""
    rheaders.append(("Content-Length", str(len(content))))
    rhttp = StatusAndHeaders(f"{resp.status_code} {resp.reason_phrase or ''}".strip(), rheaders,
                             protocol=resp.http_version or "HTTP/1.1")
    return [Rec("request", str(req.url), body, http=http, record_id=req_id),
            Rec("response", str(req.url), content, http=rhttp, headers=(("WARC-Concurrent-To", req_id),),
                record_id=new_record_id())]


class SnapshotStore:
    """The WARC files and index of one snapshot directory. Thread-safe; several processes may share it."""

    def __init__(self, directory: Path | str):
        self.dir = Path(directory).expanduser()
        self.dir.mkdir(parents=True, exist_ok=True)
        self.index = Index(self.dir)
        self._warc = WarcFile(self.dir)
        self._lock = threading.Lock()

    def close(self) -> None:
        self._warc.close()
        self.index.close()

    # --- write ---------------------------------------------------------------------------------------
    def _write(self, recs: list[Rec], *, kind: str, key: str, uri: str, status: str, when: datetime,
               body_id: str | None, size: int) -> Capture:
        with self._lock:
            written = self._warc.write(recs, when)
            assert self._warc.name is not None
            self.index.register_file(self._warc.name)
        by_id = {w.record_id: w for w in written}
        meta_w = written[-1]
        body_w = by_id.get(body_id) if body_id else None
        body = next((r for r in recs if r.record_id == body_id), None)
        cap = Capture(
            id=meta_w.record_id, kind=kind, key=key, uri=uri, time=warc_date(when), status=status,
            file=meta_w.file, start_offset=written[0].offset, meta_offset=meta_w.offset, meta_length=meta_w.length,
            body_offset=body_w.offset if body_w else -1, body_length=body_w.length if body_w else -1,
            body_id=body_id, sha256=hashlib.sha256(body.payload).hexdigest() if body else None, size=size,
        )
        self.index.add(cap)
        return cap

    def add_page(self, canon: str, hops: list[Hop], *, doc: Document | None, error: str | None,
                 provenance: dict[str, Any]) -> Capture:
        """Write one page capture: ``doc`` (what went to /work) or ``error`` (the refusal's one line)."""
        when = doc.retrieved_at if doc is not None else datetime.now(UTC)
        recs: list[Rec] = []
        last_response: str | None = None
        for hop in hops:
            req = _request_rec(hop)
            recs.append(req)
            if hop.response is not None:
                assert req.record_id is not None
                resp = _response_rec(hop, req.record_id)
                recs.append(resp)
                last_response = resp.record_id
        final = next((h for h in reversed(hops) if h.response is not None), None)
        meta: dict[str, Any] = {
            "status": final.response.status_code if final and final.response else None,
            "final_url": str(final.request.url) if final else None,
            "redirects": [str(h.request.url) for h in hops],
            "retrieved": warc_date(when),
            "address": final.address if final else None,
            "body_sha256": hashlib.sha256(final.body).hexdigest() if final and doc is not None else None,
            "body_bytes": len(final.body) if final and doc is not None else None,
            "truncated": False,  # a body over max_bytes is refused, never cut
            "content_type": final.response.headers.get("content-type") if final and final.response else None,
            **provenance,
        }
        body_id = None
        size = 0
        if doc is not None:
            content = render(doc)[1].encode("utf-8")
            body_id = new_record_id()
            refers = (("WARC-Refers-To", last_response),) if last_response else ()
            recs.append(Rec("conversion", canon, content, content_type="text/plain; charset=utf-8",
                            headers=refers, record_id=body_id))
            size = len(content)
            if final is not None:
                meta["converter"] = converter_info(
                    final.response.headers.get("content-type", "").split(";")[0].strip().lower() or None
                    if final.response else None, final.body, canon)
        else:
            meta["error"] = error
        status = "ok" if doc is not None else "refused"
        meta["capture"] = {"kind": "page", "key": canon, "status": status, "body_record": body_id, "size": size}
        refer = body_id or last_response
        recs.append(Rec("metadata", canon, json_bytes(meta), content_type="application/json",
                        headers=(("WARC-Refers-To", refer),) if refer else (), record_id=new_record_id()))
        return self._write(recs, kind="page", key=canon, uri=canon, status=status, when=when,
                           body_id=body_id, size=size)

    def add_search(self, backend: str, params: dict[str, Any], results: list[dict[str, Any]],
                   provenance: dict[str, Any], exchange: tuple[Any, Any] | None = None) -> Capture:
        """Write one search capture: the backend's HTTP request and response when it made one (Serper; the
        API key redacted), else the parameters as a JSON ``request`` record; the results; metadata."""
        when = datetime.now(UTC)
        key, uri = search_key(backend, params), search_uri(backend, params)
        req_id, body_id = new_record_id(), new_record_id()
        payload = json_bytes({"backend": backend, "results": results})
        if exchange is not None:
            recs = _search_http(exchange, req_id)
        else:
            recs = [Rec("request", uri, json_bytes({"backend": backend, "params": params}),
                        content_type="application/json", record_id=req_id)]
        recs.append(Rec("resource", uri, payload, content_type="application/json",
                        headers=(("WARC-Concurrent-To", req_id),), record_id=body_id))
        meta = {"backend": backend, "params": params, "results": len(results), "retrieved": warc_date(when),
                **provenance,
                "capture": {"kind": "search", "key": key, "status": "ok", "body_record": body_id, "size": len(payload)}}
        recs.append(Rec("metadata", uri, json_bytes(meta), content_type="application/json",
                        headers=(("WARC-Refers-To", body_id),), record_id=new_record_id()))
        return self._write(recs, kind="search", key=key, uri=uri, status="ok", when=when, body_id=body_id,
                           size=len(payload))

    # --- read ----------------------------------------------------------------------------------------
    def body(self, cap: Capture) -> bytes:
        """The payload of a capture's conversion/resource record (``b""`` for a refusal): its one gzip
        member read and inflated directly (the replay path), warcio's reader if that fails."""
        if cap.body_offset < 0:
            return b""
        path = self.dir / cap.file
        try:
            with open(path, "rb") as fh:
                fh.seek(cap.body_offset)
                raw = zlib.decompress(fh.read(cap.body_length), 16 + zlib.MAX_WBITS)
            head, sep, block = raw.partition(b"\r\n\r\n")
            m = _CONTENT_LENGTH.search(head)
            if sep and m and head.startswith(b"WARC/") and len(block) >= int(m.group(1)):
                return block[: int(m.group(1))]
        except (OSError, zlib.error, ValueError):
            pass
        return read_record(path, cap.body_offset)[1]

    def metadata(self, cap: Capture) -> dict[str, Any]:
        """The capture's metadata record (JSON)."""
        data = json.loads(read_record(self.dir / cap.file, cap.meta_offset)[1])
        return data if isinstance(data, dict) else {}
