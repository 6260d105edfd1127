"""The search seam: one result type, one backend Protocol, one text rendering.

``format_results`` is THE rendering of a result list: the shell helper (``search`` inside the container,
through the gateway) and the structured profile's ``search`` tool both show exactly this text, so the
interfaces under comparison see the same words.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any, Protocol, runtime_checkable

from ..workspace import one_line

SNIPPET_CHARS = 300
"""Snippets longer than this are cut (with an ellipsis) in the rendering."""

TITLE_CHARS = 160
"""Titles longer than this are cut (with an ellipsis) in the rendering."""


@dataclass(frozen=True, slots=True)
class SearchResult:
    """One ranked search hit."""

    rank: int
    """1-based position in the result list."""
    title: str
    """Page or document title."""
    url: str
    """What ``fetch`` accepts for this hit: the page URL, or a local document's docid when it has none."""
    snippet: str
    """A short excerpt of the page relevant to the query."""
    date: str | None = None
    """Publication date as the backend gave it (free text), if any."""
    docid: str | None = None
    """The document's docid when the hit is a local corpus's document (the same in every retriever)."""
    score: float | None = None
    """The retriever's score when it gives one (BM25, inner product); None for web search."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (used by the result cache and the snapshot); ``docid`` and ``score`` only when
        set, so a web result's record is what it was before they existed."""
        d = asdict(self)
        for key in ("docid", "score"):
            if d[key] is None:
                del d[key]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SearchResult:
        """Inverse of :meth:`to_dict`; unknown keys are an error."""
        return cls(
            rank=int(d["rank"]),
            title=str(d["title"]),
            url=str(d["url"]),
            snippet=str(d["snippet"]),
            date=None if d.get("date") is None else str(d["date"]),
            docid=None if d.get("docid") is None else str(d["docid"]),
            score=None if d.get("score") is None else float(d["score"]),
        )


class SearchResults(list[SearchResult]):
    """The results of one search and whether a store answered it: ``cache_hit`` is True when the result
    cache (or a snapshot being replayed) gave them, False when the backend was asked, None when nothing
    in between says (a bare backend). Recorded as the ``cache_hit`` of a search fact."""

    def __init__(self, results: Iterable[SearchResult] = (), *, cache_hit: bool | None = None):
        super().__init__(results)
        self.cache_hit = cache_hit


def cache_hit(results: list[SearchResult]) -> bool | None:
    """``results.cache_hit`` when a cache or snapshot said where they came from, else None."""
    return results.cache_hit if isinstance(results, SearchResults) else None


@runtime_checkable
class SearchBackend(Protocol):
    """Anything that turns a query into ranked results (Serper, a local bm25s corpus, the cache)."""

    name: str
    """Stable backend name; part of the result-cache key (e.g. ``serper``, ``local:hotpotqa``)."""

    def search(self, query: str, n: int) -> list[SearchResult]:
        """Return at most ``n`` results, best first, ranks 1..k. Raises
        :class:`fte_shell.errors.SearchUnavailable` when the backend cannot be used at all."""
        ...


@dataclass(frozen=True)
class Secret:
    """One secret of a backend: the environment variable that carries it (to a Ray worker, into a fork)
    and, for a built-in backend, the ``[search]`` key that holds it (None: only the environment)."""

    env: str
    """The environment variable (``SERPER_API_KEY``)."""
    key: str | None = None
    """The ``[search]`` key (``serper_api_key``); None when the backend reads the environment only."""


_exchange = threading.local()
"""``want``/``last``: a snapshot asked this thread to keep the next HTTP exchange a backend makes."""


def want_exchange() -> None:
    """Keep this thread's next successful HTTP exchange of a search backend for :func:`take_exchange` (the
    snapshot writes it as the capture's WARC request and response)."""
    _exchange.want, _exchange.last = True, None


def keep_exchange(request: Any, response: Any) -> None:
    """What an HTTP search backend calls with its successful (``httpx``) request and response: kept when
    the snapshot asked (:func:`want_exchange`), ignored otherwise."""
    if getattr(_exchange, "want", False):
        _exchange.last = (request, response)


def take_exchange() -> tuple[Any, Any] | None:
    """The exchange kept since :func:`want_exchange` (None when none was made, e.g. a cache hit or a
    backend without HTTP)."""
    last = getattr(_exchange, "last", None)
    _exchange.want, _exchange.last = False, None
    return last


def _cut(text: str, limit: int) -> str:
    text = one_line(text)
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0] if " " in text[: limit - 1] else text[: limit - 1]
    return cut.rstrip(" ,;:.") + "…"


def format_results(query: str, results: list[SearchResult]) -> str:
    """Render results compactly: a header line, then per result ``[rank] title``, the URL (or docid) to
    pass to ``fetch``, and the snippet (with the date in front when known); three lines at most per result::

        1 result for "python json":
        [1] json — JSON encoder and decoder
            https://docs.python.org/3/library/json.html
            2024-05-01 · Source code: Lib/json/__init__.py. JSON (JavaScript Object Notation) …
    """
    q = one_line(query)
    if not results:
        return f'No results for "{q}".'
    noun = "result" if len(results) == 1 else "results"
    blocks = [f'{len(results)} {noun} for "{q}":']
    for r in results:
        lines = [f"[{r.rank}] {_cut(r.title, TITLE_CHARS) or '(untitled)'}", f"    {one_line(r.url)}"]
        snippet = _cut(r.snippet, SNIPPET_CHARS)
        if r.date:
            snippet = f"{one_line(r.date)} · {snippet}" if snippet else one_line(r.date)
        if snippet:
            lines.append(f"    {snippet}")
        blocks.append("\n".join(lines))
    return "\n".join(blocks)


_RESULT_REF = re.compile(r"^\[\d+\] .*\n {4}(\S+)", re.MULTILINE)


def result_refs(text: str) -> list[str]:
    """The references (URL or docid: what ``fetch`` takes) of a :func:`format_results` text, in rank order:
    the inverse of the rendering, for whoever reads a search observation (metrics, stand-in policies)."""
    return _RESULT_REF.findall(text)
