"""Downloaded bytes -> which converter, and bytes -> text.

* :func:`classify`: the converter for a response (``html``, ``pdf``, ``text``) from its Content-Type,
  sniffing the body when the type is missing or generic; any other type is refused, naming it.
* :func:`decode_text`: BOM, then the Content-Type charset, then (HTML) the ``<meta charset>``, then UTF-8,
  then charset detection (charset-normalizer). Labels follow browsers (WHATWG): ``iso-8859-1`` is read as
  windows-1252, ``Shift_JIS`` as cp932.

The converters themselves are :mod:`fte_shell.fetch.convert`; the process pool that runs them is
:mod:`fte_shell.fetch.pool`.
"""

from __future__ import annotations

import codecs
import re
from typing import Literal

from ..errors import FetchRefused

Kind = Literal["html", "pdf", "text"]

_HTML_TYPES = {"text/html", "application/xhtml+xml"}
_PDF_TYPES = {"application/pdf", "application/x-pdf"}
_TEXT_TYPES = {
    "application/json",
    "application/xml",
    "application/javascript",
    "application/x-ndjson",
    "application/ld+json",
}
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:\-]+)""", re.IGNORECASE)
_WHATWG_ALIASES = {
    "iso8859-1": "cp1252",
    "latin-1": "cp1252",
    "ascii": "cp1252",
    "shift_jis": "cp932",
    "euc_kr": "cp949",
}


# --- content type -------------------------------------------------------------------------------------
def classify(content_type: str | None, body_head: bytes, url: str = "") -> Kind:
    """Which converter handles this response; raises :class:`FetchRefused` naming an unsupported type.

    ``content_type`` is the bare MIME type (lower-case, no parameters) or None; ``body_head`` the first
    bytes of the body, used to sniff a missing or generic type; ``url`` is named in the refusal.
    """
    ct = (content_type or "").strip().lower()
    if ct in _HTML_TYPES:
        return "html"
    if ct in _PDF_TYPES:
        return "pdf"
    if ct.startswith("text/") or ct in _TEXT_TYPES or ct.endswith(("+json", "+xml")):
        return "text"
    if ct in ("", "application/octet-stream", "binary/octet-stream", "application/unknown"):
        head = body_head.lstrip()[:2048]
        if head.startswith(b"%PDF-"):
            return "pdf"
        lowered = head[:1024].lower()
        if lowered.startswith((b"<!doctype html", b"<html")) or b"<html" in lowered:
            return "html"
        if ct == "" and body_head and b"\x00" not in body_head[:8192]:
            return "text"
    where = f" from {url if len(url) <= 200 else url[:199] + '…'}" if url else ""
    ct = ct if len(ct) <= 100 else ct[:99] + "…"  # the server's header, quoted back in one short line
    raise FetchRefused(
        f"unsupported content type {ct or '(none, binary body)'}{where} (only HTML, PDF, text, JSON and XML are converted)"
    )


# --- text decoding ------------------------------------------------------------------------------------
_NOT_CHARSETS = frozenset(
    {"unicode-escape", "raw-unicode-escape", "punycode", "idna", "undefined", "charmap", "utf-7"}
)
"""Python codecs that are not web page charsets: a server naming one (``charset=unicode_escape`` rewrites
``\\x41`` into ``A``; ``undefined`` always fails) is ignored like an unknown label."""


def _codec(label: str | None) -> str | None:
    """Python codec for a charset label; None for unknown labels, bytes-to-bytes codecs (``zlib``,
    ``base64``, ``rot13``) and Python-only codecs (:data:`_NOT_CHARSETS`)."""
    if not label:
        return None
    try:
        info = codecs.lookup(label.strip().strip("\"'").lower())
    except LookupError:
        return None
    if not getattr(info, "_is_text_encoding", True) or info.name in _NOT_CHARSETS:
        return None
    return _WHATWG_ALIASES.get(info.name, info.name)


def meta_charset(body: bytes) -> str | None:
    """Charset declared by an HTML ``<meta charset>`` / ``http-equiv`` tag in the first 4 KB."""
    m = _META_CHARSET.search(body[:4096])
    return m.group(1).decode("ascii", "replace") if m else None


def decode_text(body: bytes, charset: str | None, *, html: bool) -> str:
    """Decode a body: BOM, then the Content-Type charset, then (HTML) the meta charset, then UTF-8, then
    charset detection (charset-normalizer); undecodable bytes become U+FFFD."""
    for bom, enc in (
        (codecs.BOM_UTF8, "utf-8-sig"),
        (codecs.BOM_UTF16_LE, "utf-16"),
        (codecs.BOM_UTF16_BE, "utf-16"),
    ):
        if body.startswith(bom):
            return body.decode(enc, errors="replace")
    declared = [_codec(charset)]
    if html:
        declared.append(_codec(meta_charset(body)))
    for enc in declared:
        if enc is None:
            continue
        try:
            return body.decode(enc)
        except UnicodeDecodeError:
            if enc == "cp1252":
                return body.decode("latin-1")
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        pass
    from charset_normalizer import from_bytes

    best = from_bytes(body[:500_000]).best()
    enc = _codec(best.encoding) if best is not None else None
    return body.decode(enc or declared[0] or "cp1252", errors="replace")
