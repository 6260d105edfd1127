"""The on-disk format of fetched documents: file names, canonical URLs, and the file content.

File name
    ``{host_slug}-{sha256(canonical_url)[:16]}.txt`` for web pages, where ``host_slug`` is the host
    lower-cased with every run of non-alphanumeric characters replaced by one ``-`` (ends trimmed), e.g.
    ``docs-python-org-1f0c2a9b3d4e5f60.txt``. For local-corpus documents:
    ``{docid_prefix}-{sha256(docid)[:16]}.txt`` where ``docid_prefix`` is the docid with every run of
    characters outside ``[A-Za-z0-9-]`` replaced by one ``-``, ends trimmed, cut to its first 32
    characters (case kept), e.g. ``Barack-Obama-3-…``.

Content
    ``URL: <canonical url>`` (or ``Docid: <docid>``), ``Title: <title>``, ``Retrieved: <ISO-8601 UTC>``,
    a blank line, then the normalized plain-text body (line ends ``\\n``, trailing whitespace trimmed, one
    final newline).

:func:`render` gives the exact bytes of a file, :func:`parse_header` and :func:`parse_document` read one
back; :class:`fte_shell.workspace.store.Workspace` is the only writer.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from datetime import UTC, datetime
from urllib.parse import unquote, urlsplit, urlunsplit

from ..errors import FetchRefused, ToolError
from .document import Document, Kind

_DEFAULT_PORTS = {"http": 80, "https": 443}
_NON_ALNUM = re.compile(r"[^a-z0-9]+")
_NON_DOCID = re.compile(r"[^A-Za-z0-9-]+")
_WS = re.compile(r"\s+")
_SURROGATE = re.compile("[\ud800-\udfff]")
_HEADER_KEYS = {"url": "URL", "docid": "Docid"}
_TITLE_MAX = 300
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
"""Bidirectional-text controls: they can make a title or URL read differently from its bytes."""
_UNPRINTABLE_IN_URL = frozenset({"Cc", "Zs", "Zl", "Zp"})
"""Unicode categories percent-encoded in a canonical URL (controls, spaces, line/paragraph separators)."""



def _encode_unprintable(part: str) -> str:
    """``part`` with control characters, spaces, line/paragraph separators and bidi controls
    percent-encoded as UTF-8 (what a browser sends for them), so a URL is one printable line."""
    if part.isprintable() and " " not in part and not any(c in _BIDI for c in part):
        return part  # the common case: nothing to look at per character
    out = []
    for c in part:
        if c in _BIDI or unicodedata.category(c) in _UNPRINTABLE_IN_URL:
            out.append("".join(f"%{b:02X}" for b in c.encode("utf-8", "surrogatepass")))
        else:
            out.append(c)
    return "".join(out)


def url_title(url: str) -> str:
    """The last segment of a URL's path, percent-decoded (``…/wiki/Ars_Electronica`` -> ``Ars_Electronica``):
    the title of a page that names none; ``""`` when the path has no segment."""
    return unquote(urlsplit(url).path.rstrip("/").rsplit("/", 1)[-1])


def canonical_url(url: str) -> str:
    """Canonical form of an http(s) URL: scheme and host lower-cased, default port dropped, fragment
    dropped, empty path becomes ``/``; user info, path and query are kept as given, except that control
    characters, spaces, line/paragraph separators and bidi controls in them are percent-encoded (so the
    ``URL:`` header line and the record line stay one printable line each; ``/a b`` is ``/a%20b``).

    Raises :class:`FetchRefused` if ``url`` has no scheme or host.
    """
    raw = url.strip()
    try:
        parts = urlsplit(raw)
        port = parts.port
    except ValueError as e:
        raise FetchRefused(f"refused {raw!r}: not a valid URL ({e})") from None
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if not scheme or not host:
        raise FetchRefused(f"refused {raw!r}: not an absolute URL (expected http:// or https://)")
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = host
    if port is not None and _DEFAULT_PORTS.get(scheme) != port:
        netloc = f"{host}:{port}"
    if parts.username is not None or parts.password is not None:
        userinfo = _encode_unprintable(parts.netloc.rsplit("@", 1)[0])
        netloc = f"{userinfo}@{netloc}"
    path, query = _encode_unprintable(parts.path or "/"), _encode_unprintable(parts.query)
    return urlunsplit((scheme, netloc, path, query, ""))


def host_slug(host: str) -> str:
    """``host`` lower-cased, runs of non-alphanumerics replaced by ``-``, ends trimmed (``host`` if empty)."""
    return _NON_ALNUM.sub("-", host.lower()).strip("-") or "host"


def docid_prefix(docid: str) -> str:
    """First ≤32 characters of ``docid`` after mapping runs outside ``[A-Za-z0-9-]`` to ``-`` (``doc`` if
    nothing is left)."""
    return _NON_DOCID.sub("-", docid).strip("-")[:32].rstrip("-") or "doc"


def filename_for(source: str, kind: Kind) -> str:
    """File name of a document (see the module docstring). ``source`` of a URL is canonicalized first."""
    if kind == "url":
        canon = canonical_url(source)
        digest = hashlib.sha256(canon.encode("utf-8")).hexdigest()[:16]
        return f"{host_slug(urlsplit(canon).hostname or '')}-{digest}.txt"
    if kind == "docid":
        if not source:
            raise ToolError("empty docid")
        digest = hashlib.sha256(source.encode("utf-8")).hexdigest()[:16]
        return f"{docid_prefix(source)}-{digest}.txt"
    raise ValueError(f"unknown document kind {kind!r} (expected 'url' or 'docid')")


def _no_surrogates(text: str) -> str:
    """``text`` with unpaired surrogates (a converter's broken output, not writable as UTF-8) replaced by
    U+FFFD; cheap when there are none."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


def one_line(text: str) -> str:
    """One printable line: whitespace runs (line breaks included) become one space; other control
    characters (ESC, BEL, backspace, DEL, C1) and bidi controls are dropped. Used for every line the
    agent sees that quotes outside text (titles, search results), so none can forge another line."""
    t = _WS.sub(" ", _no_surrogates(text))
    if not t.isprintable() or any(c in _BIDI for c in t):
        t = "".join(c for c in t if c not in _BIDI and unicodedata.category(c) != "Cc")
    return t.strip()


def _clean_title(title: str) -> str:
    t = one_line(title)
    return t if len(t) <= _TITLE_MAX else t[: _TITLE_MAX - 1] + "…"


def _clean_body(text: str) -> str:
    body = _no_surrogates(text).replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")
    body = "\n".join(line.rstrip() for line in body.split("\n")).strip("\n")
    return body + "\n" if body else ""


def _iso(ts: datetime) -> str:
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=UTC)
    return ts.astimezone(UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def render(doc: Document) -> tuple[str, str, str]:
    """``(file name, file content, body)`` for ``doc``: the exact bytes a store writes (UTF-8)."""
    source = canonical_url(doc.source) if doc.kind == "url" else doc.source
    if any(c in _BIDI or unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in source):
        raise ToolError(f"invalid document source {source!r}: contains a line break or control character")
    body = _clean_body(doc.text)
    header = f"{_HEADER_KEYS[doc.kind]}: {source}\nTitle: {_clean_title(doc.title)}\nRetrieved: {_iso(doc.retrieved_at)}\n\n"
    return filename_for(source, doc.kind), header + body, body


def parse_header(content: str) -> tuple[str, str, int]:
    """``(source, title, body chars)`` of a stored file's content; raises ValueError if not our format."""
    lines = content.split("\n", 4)
    if len(lines) < 4 or lines[3] != "":
        raise ValueError("no provenance header")
    first, title, retrieved = lines[0], lines[1], lines[2]
    if first.startswith("URL: "):
        source = first[5:]
    elif first.startswith("Docid: "):
        source = first[7:]
    else:
        raise ValueError("first line is neither 'URL:' nor 'Docid:'")
    if not title.startswith("Title: ") or not retrieved.startswith("Retrieved: "):
        raise ValueError("missing Title:/Retrieved: line")
    return source, title[7:], len(lines[4]) if len(lines) == 5 else 0


def parse_document(content: str) -> Document:
    """The :class:`Document` a stored file's ``content`` holds (the inverse of :func:`render`:
    ``render(parse_document(c))[1] == c`` for every file :func:`render` wrote). Used to replay a
    snapshot's ``conversion`` record (the exact text once written to /work) byte for byte."""
    source, title, _ = parse_header(content)
    lines = content.split("\n", 4)
    retrieved = datetime.fromisoformat(lines[2][len("Retrieved: "):])  # the "%Y-%m-%dT%H:%M:%SZ" _iso writes
    kind: Kind = "url" if lines[0].startswith("URL: ") else "docid"
    return Document(source=source, kind=kind, title=title, text=lines[4] if len(lines) == 5 else "", retrieved_at=retrieved)
