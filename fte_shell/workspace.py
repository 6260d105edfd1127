"""The workspace: THE one module that knows the on-disk format of fetched documents.

Every writer (the gateway behind the shell ``fetch`` helper, the structured ``fetch`` tool) goes through
:class:`Workspace`, so the same page snapshot produces byte-identical files under every interface.

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

Record line (what ``fetch`` prints, tab-free and greppable; two spaces between fields)
    ``/work/docs-python-org-1f0c2a9b3d4e5f60.txt  12,345 chars  new  https://docs.python.org/3/  "Title"``
    where the third field is ``new`` (downloaded now) or ``held`` (already in the workspace; nothing was
    downloaded).
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import threading
import unicodedata
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict

from .errors import FetchRefused, ToolError

Kind = Literal["url", "docid"]

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


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class Document(_Frozen):
    """What one fetch produced (before it is stored)."""

    source: str
    """The canonical URL (``kind == "url"``) or the local-corpus docid (``kind == "docid"``)."""

    kind: Kind
    """``url`` for web pages, ``docid`` for local-corpus documents."""

    title: str
    """Page title (may be empty)."""

    text: str
    """Normalized plain-text body."""

    retrieved_at: datetime
    """When the page was downloaded (UTC); a shared page snapshot keeps its original time."""


class FetchRecord(_Frozen):
    """The result of materializing one document, as the caller reports it."""

    path: str
    """Path as the agent sees it, e.g. ``/work/example-com-a1b2c3d4e5f6a7b8.txt``."""

    chars: int
    """Characters of the body (header excluded)."""

    new: bool
    """True if this call wrote the file; False if the workspace already held it."""

    source: str
    """Canonical URL or docid."""

    title: str
    """Title from the header."""

    def line(self) -> str:
        """The one-line record printed to the agent (see the module docstring)."""
        state = "new" if self.new else "held"
        return f'{self.path}  {self.chars:,} chars  {state}  {self.source}  "{self.title}"'


class Entry(_Frozen):
    """One document held by the workspace."""

    path: str
    """Path as the agent sees it."""

    source: str
    """Canonical URL or docid."""

    title: str
    """Title from the header."""

    chars: int
    """Characters of the body."""

    def line(self) -> str:
        """One listing line: ``path  N chars  source  "title"``."""
        return f'{self.path}  {self.chars:,} chars  {self.source}  "{self.title}"'


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


def _parse(content: str) -> tuple[str, str, int]:
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
    source, title, _ = _parse(content)
    lines = content.split("\n", 4)
    retrieved = datetime.fromisoformat(lines[2][len("Retrieved: "):])  # the "%Y-%m-%dT%H:%M:%SZ" _iso writes
    kind: Kind = "url" if lines[0].startswith("URL: ") else "docid"
    return Document(source=source, kind=kind, title=title, text=lines[4] if len(lines) == 5 else "", retrieved_at=retrieved)


class Workspace:
    """A directory of fetched documents, mounted in the container at ``mount`` (read-only there).

    Writes are atomic (temporary file in the same directory, then an exclusive hard link), idempotent
    (a document already held is never rewritten) and thread-safe. Files are mode 0644 and the directory
    is made world-searchable, so the container's non-root user can read them.
    """

    def __init__(self, root: Path | str, mount: str = "/work"):
        self.root = Path(root)
        self.mount = mount.rstrip("/") or "/"
        self.root.mkdir(parents=True, exist_ok=True)
        mode = self.root.stat().st_mode & 0o7777
        if mode & 0o755 != 0o755:
            try:
                os.chmod(self.root, mode | 0o755)
            except PermissionError:
                pass
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self._entry_cache: dict[str, tuple[tuple[int, int], Entry | None]] = {}

    # --- names -----------------------------------------------------------------------------------------
    def filename_for(self, source: str, kind: Kind) -> str:
        return filename_for(source, kind)

    def agent_path(self, name: str) -> str:
        return f"{self.mount}/{name}" if self.mount != "/" else f"/{name}"

    def _lock(self, name: str) -> threading.Lock:
        with self._locks_guard:
            lock = self._locks.get(name)
            if lock is None:
                lock = self._locks[name] = threading.Lock()
            return lock

    # --- read ------------------------------------------------------------------------------------------
    def lookup(self, source: str, kind: Kind) -> FetchRecord | None:
        """The record (``new=False``) of a document already held, else None."""
        name = filename_for(source, kind)
        entry = self._entry(name)
        if entry is None:
            return None
        return FetchRecord(
            path=entry.path, chars=entry.chars, new=False, source=entry.source, title=entry.title
        )

    def _entry(self, name: str) -> Entry | None:
        p = self.root / name
        try:
            st = p.stat()
        except FileNotFoundError:
            return None
        key = (st.st_mtime_ns, st.st_size)
        cached = self._entry_cache.get(name)
        if cached is not None and cached[0] == key:
            return cached[1]
        try:
            source, title, chars = _parse(p.read_text(encoding="utf-8", errors="replace"))
            entry: Entry | None = Entry(path=self.agent_path(name), source=source, title=title, chars=chars)
        except (ValueError, OSError):
            entry = None
        self._entry_cache[name] = (key, entry)
        return entry

    def entries(self) -> list[Entry]:
        """Every document held, in the order they were stored (then by name)."""
        found: list[tuple[int, str]] = []
        with os.scandir(self.root) as it:
            for de in it:
                if (
                    de.name.startswith(".")
                    or not de.name.endswith(".txt")
                    or not de.is_file(follow_symlinks=False)
                ):
                    continue
                found.append((de.stat(follow_symlinks=False).st_mtime_ns, de.name))
        out = []
        for _, name in sorted(found):
            e = self._entry(name)
            if e is not None:
                out.append(e)
        return out

    def listing_text(self) -> str:
        """The listing shown by ``list_fetched``: one :meth:`Entry.line` per document and a total line."""
        entries = self.entries()
        if not entries:
            return "(no documents fetched yet)"
        total = sum(e.chars for e in entries)
        n = len(entries)
        lines = [e.line() for e in entries]
        lines.append(f"{n} document{'s' if n != 1 else ''}, {total:,} chars")
        return "\n".join(lines)

    def host_path(self, agent_path: str) -> Path:
        """Host path of a workspace file given as the agent sees it (``/work/x.txt``) or by bare name.

        Raises :class:`ToolError` for anything that is not a file directly in the workspace.
        """
        p = agent_path.strip()
        prefix = self.mount + "/" if self.mount != "/" else "/"
        p = p.removeprefix(prefix)
        if not p or "/" in p or "\\" in p or p in (".", "..") or "\x00" in p:
            raise ToolError(f"not a workspace file: {agent_path!r} (expected {prefix}<name>.txt)")
        host = self.root / p
        root = self.root.resolve()
        if host.resolve().parent != root:
            raise ToolError(f"not a workspace file: {agent_path!r}")
        return host

    def body(self, agent_path: str) -> str:
        """The body (header removed) of a held document; ToolError if it is not held."""
        host = self.host_path(agent_path)
        try:
            content = host.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            raise ToolError(
                f"no such document: {agent_path} (use list_fetched to see what is held)"
            ) from None
        except IsADirectoryError:
            raise ToolError(f"not a workspace file: {agent_path!r}") from None
        parts = content.split("\n", 4)
        return parts[4] if len(parts) == 5 and parts[3] == "" else content

    # --- write -----------------------------------------------------------------------------------------
    def store(self, doc: Document) -> FetchRecord:
        """Write ``doc`` atomically unless already held; returns its record (``new`` says which)."""
        name, content, body = render(doc)
        with self._lock(name):
            held = self._entry(name)
            if held is not None:
                return FetchRecord(
                    path=held.path, chars=held.chars, new=False, source=held.source, title=held.title
                )
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".part", dir=self.root)
            try:
                with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
                    f.write(content)
                    f.flush()
                    os.fsync(f.fileno())
                os.chmod(tmp, 0o644)
                final = self.root / name
                try:
                    os.link(tmp, final)  # exclusive: never replaces a file another process wrote
                    created = True
                except FileExistsError:
                    created = False
                except OSError:  # file system without hard links
                    os.replace(tmp, final)
                    created = True
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
            if not created:
                held = self._entry(name)
                if held is None:  # never report a file as ours that is not (it is left as it is)
                    raise ToolError(f"cannot store {self.agent_path(name)}: a file that is not a fetched document is in the way")
                return FetchRecord(
                    path=held.path, chars=held.chars, new=False, source=held.source, title=held.title
                )
            source, title, _ = _parse(content)
            return FetchRecord(
                path=self.agent_path(name), chars=len(body), new=True, source=source, title=title
            )
