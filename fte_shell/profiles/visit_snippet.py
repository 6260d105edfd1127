"""The Visit-Snippet baseline: ``search`` and ``visit(url, goal)``, which returns ONE raw passage of the
page: the chunk that best matches the goal's words.

The page comes from the shared fetch pipeline (:meth:`FetchService.get_document`; nothing is written to
the workspace) and is normalized exactly as a workspace file body. It is cut into chunks of at most
``agent.visit_snippet_chars`` characters along line boundaries (a longer line is split at spaces), the
chunks are ranked by BM25 (k1 = 1.5, b = 0.75, English stop words removed) against the goal, and the
best one is returned — the earliest on a tie, the page's first chunk when no chunk shares a word with the
goal. Output::

    URL: https://example.org/page
    Title: Example page
    Passage 3 of 12 (characters 6,001-8,950 of 35,210), best match for the goal:

    <the chunk's text>
"""

from __future__ import annotations

import math
import re
from collections import Counter
from functools import lru_cache
from typing import TYPE_CHECKING

from ..errors import ToolError
from ..workspace import Document, render
from .base import Tool, ToolProfile, ToolResult, search_tool
from .schema import ToolArgs

if TYPE_CHECKING:
    from ..fetch import FetchService

_WORD = re.compile(r"\w+")


class VisitArgs(ToolArgs):
    """Arguments of ``visit``."""

    url: str
    """URL or document id."""

    goal: str
    """What the agent wants from the page."""


@lru_cache(maxsize=1)
def _stopwords() -> frozenset[str]:
    from bm25s.stopwords import STOPWORDS_EN

    return frozenset(STOPWORDS_EN)


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens without English stop words."""
    stop = _stopwords()
    return [t for t in _WORD.findall(text.lower()) if t not in stop]


def chunk_text(text: str, size: int) -> list[tuple[int, str]]:
    """Cut ``text`` into ``(start offset, chunk)`` pieces of at most ``size`` characters, along line
    boundaries where possible (a longer line is split at its last space before the limit, else hard).
    Concatenating the chunks gives back ``text`` exactly."""
    pieces: list[str] = []
    for line in text.splitlines(keepends=True):
        while len(line) > size:
            cut = line.rfind(" ", 0, size)
            cut = cut + 1 if cut > 0 else size
            pieces.append(line[:cut])
            line = line[cut:]
        if line:
            pieces.append(line)
    chunks: list[tuple[int, str]] = []
    cur, start, pos = "", 0, 0
    for p in pieces:
        if cur and len(cur) + len(p) > size:
            chunks.append((start, cur))
            cur, start = "", pos
        cur += p
        pos += len(p)
    if cur:
        chunks.append((start, cur))
    return chunks


def bm25_scores(query: list[str], docs: list[list[str]], k1: float = 1.5, b: float = 0.75) -> list[float]:
    """BM25 score of each tokenized doc for the tokenized ``query`` (Lucene's idf, never negative)."""
    n = len(docs)
    if n == 0:
        return []
    avgdl = sum(len(d) for d in docs) / n or 1.0
    df: Counter[str] = Counter()
    for d in docs:
        df.update(set(d))
    terms = set(query)
    scores = []
    for d in docs:
        tf = Counter(d)
        s = 0.0
        for t in terms:
            f = tf.get(t, 0)
            if not f:
                continue
            idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
            s += idf * f * (k1 + 1) / (f + k1 * (1 - b + b * len(d) / avgdl))
        scores.append(s)
    return scores


def visit_page(fetcher: FetchService, args: VisitArgs) -> tuple[Document, str, str, str]:
    """The checked ``visit`` arguments' page through the fetch pipeline (no workspace write):
    ``(document, goal, header lines, body)``; the header lines are ``URL: …`` (or ``Docid: …``) and
    ``Title: …``, as in a workspace file. Raises :class:`ToolError` for an empty URL or goal."""
    ref, goal = args.url.strip(), args.goal.strip()
    if not ref:
        raise ToolError("visit needs a URL or a document id")
    if not goal:
        raise ToolError("visit needs a goal: say what you want to find on the page")
    doc = fetcher.get_document(ref)
    _, content, body = render(doc)
    return doc, goal, "\n".join(content.split("\n", 2)[:2]), body


class VisitSnippetProfile(ToolProfile):
    """``search`` + ``visit`` returning the best-matching raw chunk of the page."""

    name = "visit-snippet"

    def _make_tools(self) -> list[Tool]:
        return [*search_tool(self.ctx), Tool("visit", VisitArgs, self.visit)]

    def visit(self, args: VisitArgs) -> ToolResult:
        doc, goal, head, body = visit_page(self.fetcher, args)
        if not body:
            return ToolResult(output=f"{head}\n(The page has no text.)", meta={"source": doc.source, "chunks": 0})
        chunks = chunk_text(body, self.agent_cfg.visit_snippet_chars)
        scores = bm25_scores(tokenize(goal), [tokenize(c) for _, c in chunks])
        best = max(range(len(chunks)), key=lambda i: (scores[i], -i))
        start, text = chunks[best]
        span = f"characters {start + 1:,}-{start + len(text):,} of {len(body):,}"
        if scores[best] > 0:
            intro = f"Passage {best + 1} of {len(chunks)} ({span}), best match for the goal:"
        else:
            intro = (
                f"No passage shares a word with the goal; showing passage 1 of {len(chunks)} ({span}), the "
                "beginning of the page:"
            )
        meta = {
            "source": doc.source,
            "chunk": best + 1,
            "chunks": len(chunks),
            "score": round(scores[best], 4),
            "page_chars": len(body),
        }
        return ToolResult(output=f"{head}\n{intro}\n\n{text.rstrip()}", meta=meta)
