"""The Open+Find baseline: ``search``, ``open(url, line?)``, ``scroll(direction?, line?)``, ``find(pattern)``.

ONE page is held at a time: a successful ``open`` of another page releases the current one (a failed
``open`` leaves it open). The page comes from the shared fetch pipeline (:meth:`FetchService.get_document`;
nothing is written to the workspace) and is laid out exactly as a workspace file — header lines
``URL:``/``Docid:``, ``Title:``, ``Retrieved:``, a blank line, the body — so its line numbers are the ones
``read``/``grep`` and ``sed -n`` would show for the same page. Window (``open``/``scroll``)::

    Open page: https://example.org/page  "Example page"
    101: a line
    …
    (Showing lines 101-200 of 950. Scroll down to continue.)

``find`` lists at most ``agent.grep_max_matches`` matching lines of the open page as ``N: text``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..errors import FetchRefused, ToolError
from ..workspace import canonical_url, render
from .base import QuestionContext, Tool, ToolProfile, ToolResult, search_tool
from .fte import Matcher, _Budget, excerpt, split_lines
from .schema import ToolArgs


class OpenArgs(ToolArgs):
    """Arguments of ``open``."""

    url: str
    """URL or document id."""

    line: int = 1
    """First line of the window (1-based)."""


class ScrollArgs(ToolArgs):
    """Arguments of ``scroll``."""

    direction: Literal["down", "up"] = "down"
    """Move one window down or up (ignored when ``line`` is given)."""

    line: int | None = None
    """Jump so the window starts at this line."""


class FindArgs(ToolArgs):
    """Arguments of ``find``."""

    pattern: str
    """Python regular expression, case-insensitive."""


@dataclass
class _Page:
    ref: str
    source: str
    title: str
    lines: list[str]
    start: int = 0  # 0-based first line of the window shown last
    end: int = 0  # 0-based line after the window shown last


class OpenFindProfile(ToolProfile):
    """A browser-like view of one transient page."""

    name = "open-find"

    def __init__(self, ctx: QuestionContext):
        self.page: _Page | None = None
        super().__init__(ctx)

    def _make_tools(self) -> list[Tool]:
        return [
            *search_tool(self.ctx),
            Tool("open", OpenArgs, self.open),
            Tool("scroll", ScrollArgs, self.scroll),
            Tool("find", FindArgs, self.find),
        ]


    def close(self) -> None:
        self.page = None
        super().close()

    # --- helpers -------------------------------------------------------------------------------------
    def _is_open(self, ref: str) -> bool:
        page = self.page
        if page is None:
            return False
        if ref in (page.ref, page.source):
            return True
        try:
            return "://" in ref and canonical_url(ref) == page.source
        except FetchRefused:
            return False

    def _require_page(self) -> _Page:
        if self.page is None:
            raise ToolError("no page is open: open a page first (open(url))")
        return self.page

    def _window(self, page: _Page, first: int) -> ToolResult:
        """Show the window starting at 1-based line ``first`` and remember it."""
        total = len(page.lines)
        if first < 1:
            raise ToolError(f"line must be at least 1 (line numbers start at 1), got {first}")
        if first > total:
            raise ToolError(f"line {first} is past the end of the page ({total} lines)")
        a = self.agent_cfg
        start = first - 1
        stop = min(total, start + a.open_window_lines)
        head = f'Open page: {page.source}  "{page.title}"'
        budget = _Budget(a.open_window_bytes - 200)
        budget.take(head)
        out = [head]
        end = start
        for i in range(start, stop):
            text = f"{i + 1}: {page.lines[i]}"
            if not budget.take(text):
                if end == start:  # one huge line: show its beginning
                    out.append(f"{i + 1}: {excerpt(page.lines[i], max(80, budget.cap - budget.used - 40))}")
                    end = i + 1
                break
            out.append(text)
            end = i + 1
        page.start, page.end = start, end
        more = "Scroll down to continue." if end < total else "End of page."
        out.append(f"(Showing lines {start + 1}-{end} of {total}. {more})")
        meta = {"source": page.source, "first": start + 1, "last": end, "lines": total}
        return ToolResult(output="\n".join(out), meta=meta)

    # --- tools ---------------------------------------------------------------------------------------
    def open(self, args: OpenArgs) -> ToolResult:
        ref = args.url.strip()
        if not ref:
            raise ToolError("open needs a URL or a document id")
        if self._is_open(ref):
            assert self.page is not None
            return self._window(self.page, args.line)
        doc = self.fetcher.get_document(ref)
        lines = split_lines(render(doc)[1])
        if args.line > len(lines) or args.line < 1:  # check before releasing the current page
            raise ToolError(f"line {args.line} is out of range: the page has {len(lines)} lines")
        self.page = _Page(ref=ref, source=doc.source, title=doc.title, lines=lines)
        return self._window(self.page, args.line)

    def scroll(self, args: ScrollArgs) -> ToolResult:
        page = self._require_page()
        if args.line is not None:
            return self._window(page, args.line)
        total = len(page.lines)
        if args.direction == "down":
            if page.end >= total:
                return ToolResult(
                    output=f"Already at the end of the page (lines {page.start + 1}-{page.end} of {total} shown).",
                    meta={"source": page.source, "first": page.start + 1, "last": page.end, "lines": total},
                )
            return self._window(page, page.end + 1)
        if page.start == 0:
            return ToolResult(
                output=f"Already at the top of the page (lines 1-{page.end} of {total} shown).",
                meta={"source": page.source, "first": 1, "last": page.end, "lines": total},
            )
        return self._window(page, max(1, page.start + 1 - self.agent_cfg.open_window_lines))

    def find(self, args: FindArgs) -> ToolResult:
        page = self._require_page()
        a = self.agent_cfg
        rx = Matcher(args.pattern, a.grep_timeout_s)
        hits = rx.matching_lines(page.lines)
        meta = {"source": page.source, "matches": len(hits)}
        if not hits:
            return ToolResult(output=f"No matches for {args.pattern!r} in the open page ({page.source}).", meta=meta)
        budget = _Budget(a.read_max_bytes - 200)
        out = []
        for i in hits[: a.grep_max_matches]:
            text = f"{i + 1}: {excerpt(page.lines[i], a.grep_line_chars, rx.search(page.lines[i]))}"
            if not budget.take(text):
                break
            out.append(text)
        meta["shown"] = len(out)
        n = len(hits)
        if len(out) < n:
            note = f"({n} matching lines; showing the first {len(out)}. Narrow the pattern, or scroll with line=N to read around one.)"
        else:
            note = f"({n} matching line{'s' if n != 1 else ''}. Scroll with line=N to read around one.)"
        return ToolResult(output="\n".join(out + [note]), meta=meta)
