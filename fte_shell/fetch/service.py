"""FetchService: one question's fetch pipeline (held? -> local corpus -> page cache -> download+convert).

``fetch(ref)`` materializes a page in the workspace and returns its record; ``get_document(ref)`` runs the
same pipeline without writing the workspace (for the visit/open baselines). A ``ref`` is an http(s) URL
or, when a local corpus is attached, a docid.

Order for a URL:
1. the workspace already holds it -> its record, ``new=False``, no request at all;
2. the local corpus (``PageSource``) knows the URL -> its document (a ``Docid:`` file), no HTTP;
3. the page cache holds the canonical URL -> that snapshot (so every profile of a sweep sees the same text);
4. otherwise: policy check, download, convert; the result goes to the page cache, then the workspace.

Budgets per question (per service): ``max_fetches`` new pages, ``max_total_bytes`` downloaded bytes,
``max_requests`` download attempts (failed ones included) ->
:class:`BudgetExceeded`. Concurrent calls for one key share ONE lock: one download, one file. Nothing is
written when a fetch fails.
"""

from __future__ import annotations

import threading
import time
import unicodedata
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Self
from urllib.parse import urlsplit

from ..config import FetchPolicy
from ..errors import BudgetExceeded, ConfigError, FetchRefused
from ..keyed_lock import KeyedLocks
from ..workspace import Document, FetchRecord, Workspace, canonical_url
from .decode import classify
from .http import Hop, HttpFetcher, HttpResult, shown_url
from .pages import PageArchive, PageCache, PageSource
from .policy import check_host_patterns
from .pool import convert

MAX_REF_CHARS = 4096
"""Longest URL or docid accepted (the gateway has the same cap); a longer one is refused in one line."""

MEMO_SIZE = 32
"""Converted documents a service keeps in memory (least recently used dropped first) for ``get_document``."""


def _is_url(ref: str) -> bool:
    return "://" in ref or ref.lower().startswith(
        ("http:", "https:", "file:", "ftp:", "data:", "javascript:")
    )


class FetchService:
    """One question's fetch pipeline over ``workspace`` under ``policy``. Thread-safe."""

    def __init__(
        self,
        workspace: Workspace,
        policy: FetchPolicy,
        *,
        local: PageSource | None = None,
        page_cache: PageCache | None = None,
    ):
        _validate(policy)
        if policy.render_js:
            from .render import find_chromium

            find_chromium()  # a missing browser is a configuration error now, not a refusal later
        self.workspace = workspace
        self.policy = policy
        self.local = local
        self.page_cache = page_cache
        self._http: HttpFetcher | None = None
        self._guard = threading.Lock()
        self._key_locks: KeyedLocks[str] = KeyedLocks()
        self._memo: OrderedDict[str, Document] = OrderedDict()
        self._new_pages = 0
        self._reserved = 0
        self.bytes_downloaded = 0
        """Network bytes downloaded so far (all hops)."""
        self.downloads = 0
        """Successful downloads so far."""
        self.attempts = 0
        """Downloads attempted so far, failed ones included (bounded by ``max_requests``)."""

    # --- public ----------------------------------------------------------------------------------------
    @property
    def new_pages(self) -> int:
        """Pages newly materialized (or newly downloaded by ``get_document``) so far."""
        return self._new_pages

    def fetch(self, ref: str) -> FetchRecord:
        """Materialize ``ref`` (URL or docid) in the workspace; ``new=False`` if it was already held.

        Raises :class:`FetchRefused` (one line) or :class:`BudgetExceeded`.
        """
        ref = self._clean(ref)
        if not _is_url(ref):
            return self._fetch_docid(ref)
        canon = self._canonical(ref)
        held = self.workspace.lookup(canon, "url")
        if held is not None:
            return held
        with self._key_locks[canon]:
            held = self.workspace.lookup(canon, "url")
            if held is not None:
                return held
            doc, counted = self._document(ref, canon)
            if counted:  # a download already took its page slot
                return self.workspace.store(doc)
            return self._store_counted(doc)

    def get_document(self, ref: str) -> Document:
        """The document for ``ref`` through the same pipeline, without writing the workspace."""
        ref = self._clean(ref)
        if not _is_url(ref):
            doc = self.local.lookup(ref) if self.local is not None else None
            if doc is None:
                raise FetchRefused(self._unknown_ref(ref))
            return doc
        canon = self._canonical(ref)
        with self._key_locks[canon]:
            return self._document(ref, canon)[0]

    def close(self) -> None:
        """Close the HTTP connection pool (the shared conversion pool stays up)."""
        with self._guard:
            http, self._http = self._http, None
        if http is not None:
            http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- pipeline --------------------------------------------------------------------------------------
    def _document(self, ref: str, canon: str) -> tuple[Document, bool]:
        """``(document, counted)``: counted = a page slot was already taken by a download."""
        with self._guard:
            memo = self._memo.get(canon)
            if memo is not None:
                self._memo.move_to_end(canon)
        if memo is not None:
            return memo, False
        if self.local is not None:
            doc = self.local.lookup(ref) or (self.local.lookup(canon) if canon != ref else None)
            if doc is not None:
                return doc, False
            if getattr(self.local, "closed_world", False):
                raise FetchRefused(
                    f"refused {shown_url(ref)}: not in the local corpus (this run is a closed world over the "
                    "corpus; [search] open_web = true lets it fetch other URLs)"
                )
        if isinstance(self.page_cache, PageArchive):  # a snapshot: it records every hop, replays refusals too
            with self.page_cache.capture(canon) as cap:
                if cap.document is not None:
                    self._remember(canon, cap.document)
                    return cap.document, False
                doc = cap.store(self._download(ref, canon, on_hop=cap.hop))
            self._remember(canon, doc)
            return doc, True
        if self.page_cache is not None:
            doc = self.page_cache.get(canon)
            if doc is not None:
                self._remember(canon, doc)
                return doc, False
        doc = self._download(ref, canon)
        if self.page_cache is not None:
            self.page_cache.put(canon, doc)
        self._remember(canon, doc)
        return doc, True

    def _remember(self, canon: str, doc: Document) -> None:
        """Keep the last MEMO_SIZE documents so repeated ``get_document`` calls need no download."""
        with self._guard:
            self._memo[canon] = doc
            self._memo.move_to_end(canon)
            while len(self._memo) > MEMO_SIZE:
                self._memo.popitem(last=False)

    def _download(self, ref: str, canon: str, on_hop: Callable[[Hop], None] | None = None) -> Document:
        self._reserve()
        try:
            http = self._client()
            spent = self.bytes_downloaded
            budget = self.policy.max_total_bytes - spent
            if budget <= 0:
                raise BudgetExceeded(
                    f"byte budget spent: {spent:,} bytes downloaded (max_total_bytes = {self.policy.max_total_bytes:,})"
                )
            with self._guard:
                if self.attempts >= self.policy.max_requests:
                    raise BudgetExceeded(
                        f"request budget spent: {self.attempts} downloads attempted for this question "
                        f"(max_requests = {self.policy.max_requests}); work with the pages already fetched"
                    )
                self.attempts += 1
            try:
                result = http.get(
                    canon, budget_bytes=budget, accept_type=lambda ct: _check_declared_type(ct, ref), on_hop=on_hop
                )
            except FetchRefused as e:
                if ref != canon and not isinstance(e, BudgetExceeded):
                    shown_canon, shown_ref = shown_url(canon), shown_url(ref)
                    raise FetchRefused(
                        e.message.replace(shown_canon, shown_ref, 1) if shown_canon in e.message else e.message
                    ) from None
                raise
            with self._guard:
                self.bytes_downloaded += result.wire_bytes
                self.downloads += 1
            kind = classify(result.content_type, result.body[:8192], ref)
            body, charset = result.body, result.charset
            if kind == "html" and self.policy.render_js:
                body, charset = self._render(http, result, budget - result.wire_bytes), "utf-8"
            title, text = convert(
                kind,
                body,
                charset,
                result.url,
                result.content_type,
                timeout_s=max(30.0, self.policy.timeout_s),
                max_chars=self.policy.max_bytes,  # a converter may not amplify a page past the download cap
            )
            doc = Document(source=canon, kind="url", title=title, text=text, retrieved_at=datetime.now(UTC))
        except BaseException:
            self._release(taken=False)
            raise
        self._release(taken=True)
        return doc

    def _render(self, http: HttpFetcher, first: HttpResult, budget: int) -> bytes:
        """Run the page's scripts in chromium (opt-in ``render_js``); returns the rendered HTML."""
        from .render import render

        deadline = time.monotonic() + self.policy.timeout_s
        rendered = render(first.url, first, http, deadline=deadline, budget_bytes=budget)
        with self._guard:
            self.bytes_downloaded += rendered.wire_bytes
        return rendered.html.encode("utf-8")

    def _store_counted(self, doc: Document) -> FetchRecord:
        """Store a document that did not come from a download (local corpus, page cache, memo); a new
        file takes a page slot."""
        held = self.workspace.lookup(doc.source, doc.kind)
        if held is not None:
            return held
        self._reserve()
        try:
            rec = self.workspace.store(doc)
        except BaseException:
            self._release(taken=False)
            raise
        self._release(taken=rec.new)
        return rec

    def _fetch_docid(self, docid: str) -> FetchRecord:
        held = self.workspace.lookup(docid, "docid")
        if held is not None:
            return held
        if self.local is None:
            raise FetchRefused(self._unknown_ref(docid))
        with self._key_locks["docid:" + docid]:
            held = self.workspace.lookup(docid, "docid")
            if held is not None:
                return held
            doc = self.local.lookup(docid)
            if doc is None:
                raise FetchRefused(self._unknown_ref(docid))
            return self._store_counted(doc)

    # --- helpers ---------------------------------------------------------------------------------------
    def _clean(self, ref: str) -> str:
        if not isinstance(ref, str) or not ref.strip():
            raise FetchRefused(
                "nothing to fetch: give an http(s) URL" + (" or a document id" if self.local else "")
            )
        ref = ref.strip()
        if len(ref) > MAX_REF_CHARS:
            raise FetchRefused(
                f"refused {ref[:80]!r}…: URL too long ({len(ref):,} characters; at most {MAX_REF_CHARS:,})"
            )
        if not ref.isprintable() and any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in ref):
            # CR/LF/NUL/ESC/tab/U+2028…: a reference must stay one printable line wherever it is shown
            raise FetchRefused(f"refused {ref[:80]!r}: control characters in the reference")
        return ref

    def _canonical(self, ref: str) -> str:
        """Canonical URL of ``ref`` after the scheme and host-pattern checks (no DNS here)."""
        scheme = urlsplit(ref).scheme.lower()
        if scheme not in ("http", "https"):
            shown = ref if len(ref) <= 200 else ref[:199] + "…"
            raise FetchRefused(
                f"refused {shown}: scheme {scheme or '(none)'}: is not supported (only http:// and https://)"
            )
        canon = canonical_url(ref)
        # deny/allow patterns hold for every source of a URL (page cache, local corpus), not just the network
        check_host_patterns(self.policy, urlsplit(canon).hostname or "")
        return canon

    def _unknown_ref(self, ref: str) -> str:
        if self.local is None:
            return f"refused {ref!r}: not a URL (give a full http:// or https:// address)"
        return f"unknown document {ref!r}: not a URL and not an id in the local corpus"

    def _client(self) -> HttpFetcher:
        with self._guard:
            if self._http is None:
                self._http = HttpFetcher(self.policy)
            return self._http

    def _reserve(self) -> None:
        with self._guard:
            if self._new_pages + self._reserved >= self.policy.max_fetches:
                raise BudgetExceeded(
                    f"page budget spent: {self._new_pages} new pages fetched for this question (max_fetches = {self.policy.max_fetches}); "
                    "work with the pages already fetched"
                )
            self._reserved += 1

    def _release(self, *, taken: bool) -> None:
        with self._guard:
            self._reserved -= 1
            if taken:
                self._new_pages += 1


def _validate(policy: FetchPolicy) -> None:
    """Refuse a policy whose limits cannot work, naming the field (a user error, not a refusal)."""
    for name in ("max_bytes", "timeout_s", "max_fetches", "max_total_bytes", "max_requests"):
        if getattr(policy, name) <= 0:
            raise ConfigError(f"fetch_policy.{name} must be greater than 0 (got {getattr(policy, name)})")
    if policy.max_redirects < 0:
        raise ConfigError(f"fetch_policy.max_redirects must be 0 or more (got {policy.max_redirects})")
    for entry in policy.allow_private:
        if not entry.strip() or "/" in entry:
            raise ConfigError(f"fetch_policy.allow_private entry {entry!r} is not a host or host:port")


def _check_declared_type(content_type: str | None, url: str) -> None:
    """Refuse a declared unsupported type before reading the body (generic types are sniffed later)."""
    if content_type is None or content_type in (
        "application/octet-stream",
        "binary/octet-stream",
        "application/unknown",
    ):
        return
    classify(content_type, b"", url)
