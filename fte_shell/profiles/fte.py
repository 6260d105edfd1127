"""The structured Fetch-then-Explore profile: ``search``, ``fetch``, ``grep``, ``read``, ``list_fetched``.

No container: the tools call the same :class:`~fte_shell.fetch.FetchService`, :class:`Workspace` and
search backend as the shell helpers, so a page fetched here is byte-identical to the file the shell's
``fetch`` writes, and ``search`` prints the same text.

Line numbers count every line of the workspace file, the three header lines and the blank line included,
exactly as ``sed -n 'A,Bp'`` and ``grep -n`` number them in the shell (lines split on ``\\n`` only).

Output formats (docs/profiles.md has the full description)::

    grep:   /work/a.txt:          read:  5: first body line
            12- context line             6: …
            13: matching line            (Showing lines 5-204 of 950. Use offset=205 to continue.)
            --
            40: matching line
"""

from __future__ import annotations

import bisect
import posixpath
import re
import time
from pathlib import Path

import regex

from ..errors import FteError, ToolError
from ..record.events import FetchFact
from ..workspace import Workspace
from .base import (
    QuestionContext,
    Tool,
    ToolProfile,
    ToolResult,
    one_line,
    search_tool,
)
from .schema import ToolArgs


class FetchArgs(ToolArgs):
    """Arguments of ``fetch``."""

    url: str
    """URL or document id."""


class GrepArgs(ToolArgs):
    """Arguments of ``grep``."""

    pattern: str
    """Python regular expression (matched case-insensitively)."""

    path: str | None = None
    """One cached file; None = every cached file."""

    context: int | None = None
    """Context lines before and after each match; None = ``agent.grep_context``."""


class ReadArgs(ToolArgs):
    """Arguments of ``read``."""

    path: str
    """A cached file."""

    offset: int = 1
    """First line to show (1-based)."""

    limit: int | None = None
    """Lines to show; None = ``agent.read_max_lines``."""


class NoArgs(ToolArgs):
    """A tool without arguments."""


def compile_pattern(pattern: str) -> regex.Pattern[str]:
    """``pattern`` compiled case-insensitively (Python ``re`` syntax, via the compatible ``regex`` module,
    which can stop a runaway match); :class:`ToolError` with a usable message if invalid."""
    try:
        return regex.compile(pattern, regex.IGNORECASE | regex.MULTILINE | regex.V0)
    except (regex.error, ValueError, OverflowError) as e:
        raise ToolError(
            f"invalid regular expression {pattern!r}: {e} (Python syntax: escape special characters such as "
            "( ) [ ] . * + ? with a backslash)"
        ) from None


_LINE_LOCAL_UNSAFE = ("\\A", "\\Z", "\\z", "(?!", "(?<!", "(?>", "++", "*+", "?+", "}+")
"""Pattern pieces whose result can differ between a line alone and the same line inside the whole text
(string anchors, negative lookaround, atomic/possessive matching): such patterns are matched line by line."""


class Matcher:
    """Finds matching lines with one compiled pattern under one wall-clock deadline for the whole call.

    A line matches when the pattern matches somewhere in that line alone (line-by-line ``grep``
    semantics). For speed, :meth:`matching_lines` scans the whole text in C and confirms each candidate on
    its line; patterns with constructs for which a whole-text scan could miss a line are matched line by
    line instead (same result, slower).
    """

    def __init__(self, pattern: str, timeout_s: float):
        self.pattern = pattern
        self.rx = compile_pattern(pattern)
        self.timeout_s = timeout_s
        self.deadline = time.monotonic() + timeout_s
        self.whole_text_scan = not any(piece in pattern for piece in _LINE_LOCAL_UNSAFE)

    def _left(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise self._timeout()
        return left

    def _timeout(self) -> ToolError:
        return ToolError(
            f"the pattern {self.pattern!r} took longer than {self.timeout_s:g} s to match (nested repetition "
            "such as (a+)+ or (a|aa)* backtracks without end); simplify it"
        )

    def search(self, line: str) -> regex.Match[str] | None:
        """The first match in ``line``; :class:`ToolError` once the deadline has passed."""
        try:
            return self.rx.search(line, timeout=self._left())
        except TimeoutError:
            raise self._timeout() from None

    def matching_lines(self, lines: list[str]) -> list[int]:
        """0-based indexes of the lines the pattern matches (see the class docstring)."""
        if not self.whole_text_scan:
            return [i for i, line in enumerate(lines) if self.search(line)]
        text = "\n".join(lines)
        starts = [0]
        for line in lines:
            starts.append(starts[-1] + len(line) + 1)
        hits: list[int] = []
        pos, end = 0, len(text)
        while pos <= end:
            try:
                m = self.rx.search(text, pos, timeout=self._left())
            except TimeoutError:
                raise self._timeout() from None
            if m is None:
                break
            i = bisect.bisect_right(starts, m.start()) - 1
            if self.search(lines[i]):
                hits.append(i)
            pos = starts[i + 1]
        return hits


def is_whole_cache(path: str | None, mount: str = "/work") -> bool:
    """True when a grep ``path`` means every cached file: absent, empty, or the mount itself (``/work``,
    ``/work/``, ``.``)."""
    if path is None or not path.strip():
        return True
    return posixpath.normpath(posixpath.join(mount, path.strip())) == posixpath.normpath(mount)


def split_lines(content: str) -> list[str]:
    """Lines of a file as ``sed``/``wc -l`` count them: split on ``\\n`` only; a final newline ends the
    last line instead of starting an empty one."""
    lines = content.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def excerpt(line: str, limit: int, match: re.Match[str] | regex.Match[str] | None = None) -> str:
    """``line`` if it has at most ``limit`` characters; else a ``limit``-character excerpt around ``match``
    (or the line's beginning) with ``…`` marking each cut end."""
    if len(line) <= limit:
        return line
    if match is None:
        return line[:limit] + "…"
    start = max(0, min(match.start() - limit // 3, len(line) - limit))
    end = start + limit
    return ("…" if start > 0 else "") + line[start:end] + ("…" if end < len(line) else "")


def merge_windows(hits: list[int], context: int, n_lines: int) -> list[tuple[int, int]]:
    """0-based inclusive line windows around ``hits`` (sorted), overlapping or touching windows merged."""
    windows: list[tuple[int, int]] = []
    for h in hits:
        lo, hi = max(0, h - context), min(n_lines - 1, h + context)
        if windows and lo <= windows[-1][1] + 1:
            windows[-1] = (windows[-1][0], max(windows[-1][1], hi))
        else:
            windows.append((lo, hi))
    return windows


class _Budget:
    """Counts UTF-8 bytes of an observation being built; refuses a piece that would pass the cap."""

    def __init__(self, cap: int):
        self.cap = cap
        self.used = 0
        self.full = False

    def take(self, text: str) -> bool:
        size = len(text.encode("utf-8")) + 1  # + the newline joining it
        if self.full or self.used + size > self.cap:
            self.full = True
            return False
        self.used += size
        return True


class FteProfile(ToolProfile):
    """Structured tools over the question's workspace (no container)."""

    name = "fte"

    def __init__(self, ctx: QuestionContext):
        self.workspace = Workspace(ctx.workspace_dir)
        super().__init__(ctx)

    def _make_tools(self) -> list[Tool]:
        return [
            *search_tool(self.ctx),
            Tool("fetch", FetchArgs, self.fetch),
            Tool("grep", GrepArgs, self.grep),
            Tool("read", ReadArgs, self.read),
            Tool("list_fetched", NoArgs, self.list_fetched),
        ]



    # --- tools ---------------------------------------------------------------------------------------
    def fetch(self, args: FetchArgs) -> ToolResult:
        ref = args.url.strip()
        if not ref:
            raise ToolError("fetch needs a URL or a document id")
        try:
            rec = self.fetcher.fetch(ref)
        except FteError as e:  # e.g. a broken local corpus: shown to the model as the shell helper does
            if isinstance(e, ToolError):
                raise
            raise ToolError(one_line(str(e))) from None
        return ToolResult(
            output=rec.line(),
            meta={"path": rec.path, "chars": rec.chars, "new": rec.new, "source": rec.source,
                  "fetches": [FetchFact(url=ref, ok=True, path=rec.path, source=rec.source, chars=rec.chars,
                                        new=rec.new, retrieved_at=rec.model_dump(mode="json")["retrieved_at"]
                                        ).model_dump()]},
        )

    def list_fetched(self, args: NoArgs) -> ToolResult:
        entries = self.workspace.entries()
        return ToolResult(output=self.workspace.listing_text(), meta={"documents": len(entries)})

    def _file_lines(self, agent_path: str) -> tuple[str, list[str]]:
        """``(normalized agent path, lines)`` of a cached file; ToolError if it is not one."""
        host = self.workspace.host_path(agent_path)
        try:
            content = host.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            raise ToolError(f"no such cached document: {agent_path} (use list_fetched to see the paths)") from None
        except (IsADirectoryError, PermissionError):
            raise ToolError(f"not a cached document: {agent_path}") from None
        return self.workspace.agent_path(Path(host).name), split_lines(content)

    def grep(self, args: GrepArgs) -> ToolResult:
        a = self.agent_cfg
        rx = Matcher(args.pattern, a.grep_timeout_s)
        context = a.grep_context if args.context is None else args.context
        if context < 0:
            raise ToolError(f"context must be between 0 and {a.grep_max_context}, got {context}")
        context_capped = context > a.grep_max_context
        context = min(context, a.grep_max_context)
        all_files = is_whole_cache(args.path, self.workspace.mount)
        if not all_files:
            assert args.path is not None
            files = [args.path]
        else:
            files = [e.path for e in self.workspace.entries()]
            if not files:
                meta = {"matches": 0, "shown": 0, "files": 0, "context": context, "all_files": True}
                return ToolResult(output="No documents are cached yet: fetch a page first.", meta=meta)
        budget = _Budget(a.read_max_bytes)
        blocks: list[str] = []
        total = shown = files_hit = 0
        path = ""
        for f in files:
            path, lines = self._file_lines(f)
            hits = rx.matching_lines(lines)
            if not hits:
                continue
            files_hit += 1
            total += len(hits)
            room = a.grep_max_matches - shown
            if room <= 0 or budget.full:
                continue
            taken = hits[:room]
            hit_set = set(taken)
            out = [f"{path}:"]
            if not budget.take(out[0]):
                continue
            for k, (lo, hi) in enumerate(merge_windows(taken, context, len(lines))):
                if k and budget.take("--"):
                    out.append("--")
                for i in range(lo, hi + 1):
                    if i in hit_set:
                        text = f"{i + 1}: {excerpt(lines[i], a.grep_line_chars, rx.search(lines[i]))}"
                    else:
                        text = f"{i + 1}- {excerpt(lines[i], a.grep_line_chars)}"
                    if not budget.take(text):
                        break
                    out.append(text)
                    if i in hit_set:
                        shown += 1
                if budget.full:
                    break
            if len(out) > 1:
                blocks.append("\n".join(out))
        n_files = len(files)
        where = f"{n_files} cached document{'s' if n_files != 1 else ''}" if all_files else path
        meta = {"matches": total, "shown": shown, "files": files_hit, "context": context, "all_files": all_files}
        if total == 0:
            return ToolResult(output=f"No matches for {args.pattern!r} in {where}.", meta=meta)
        notes = []
        if context_capped:
            notes.append(f"context capped at {a.grep_max_context}")
        if shown < total:
            why = "the output size limit was reached" if budget.full else f"at most {a.grep_max_matches} are shown"
            notes.append(
                f"showing {shown} of {total} matching lines in {files_hit} file{'s' if files_hit != 1 else ''}; "
                f"{why}: narrow the pattern{', give a path' if all_files else ''} or read around a line"
            )
        else:
            notes.append(f"{total} matching line{'s' if total != 1 else ''} in {files_hit} file{'s' if files_hit != 1 else ''}")
        return ToolResult(output="\n\n".join(blocks) + "\n\n(" + "; ".join(notes) + ".)", meta=meta)

    def read(self, args: ReadArgs) -> ToolResult:
        a = self.agent_cfg
        path, lines = self._file_lines(args.path)
        total = len(lines)
        limit = a.read_max_lines if args.limit is None else args.limit
        if limit < 1:
            raise ToolError(f"limit must be at least 1, got {limit}")
        limit = min(limit, a.read_max_lines)
        if args.offset < 1:
            raise ToolError(f"offset must be at least 1 (line numbers start at 1), got {args.offset}")
        if args.offset > total:
            raise ToolError(f"offset {args.offset} is past the end of {path} ({total} lines)")
        start = args.offset - 1
        end = min(total, start + limit)
        budget = _Budget(a.read_max_bytes - 200)  # room for the closing note
        out: list[str] = []
        cut_note = ""
        for i in range(start, end):
            text = f"{i + 1}: {lines[i]}"
            if budget.take(text):
                out.append(text)
                continue
            if not out:  # a single line larger than the cap: show its beginning
                keep = lines[i].encode("utf-8")[: budget.cap - 40].decode("utf-8", errors="ignore")
                out.append(f"{i + 1}: {keep}…")
                cut_note = f" Line {i + 1} was cut after {len(keep):,} of {len(lines[i]):,} characters; use grep to find text in it."
            break
        last = start + len(out)
        if last < total:
            note = f"(Showing lines {start + 1}-{last} of {total}. Use offset={last + 1} to continue.{cut_note})"
        else:
            note = f"(Showing lines {start + 1}-{last} of {total}. End of file.{cut_note})"
        out.append(note)
        meta = {"path": path, "first": start + 1, "last": last, "lines": total}
        return ToolResult(output="\n".join(out), meta=meta)
