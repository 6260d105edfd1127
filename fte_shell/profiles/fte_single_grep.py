"""Ablation arm ``fte-single-grep`` (the paper's "x-cache" arm, Table 5): ``grep`` must name ONE already
fetched file. A call without a path (or with the cache directory itself), with a glob, or with a path that
is not one fetched file is refused with a one-line error that says what to do; the refusal carries
``meta.refused = true`` so the metrics count it as a refused call. ``search``, ``fetch``, ``read``,
``list_fetched`` and the cache are unchanged.
"""

from __future__ import annotations

import posixpath

from .base import ToolResult
from .fte import FteProfile, GrepArgs, is_whole_cache

GLOB_CHARS = frozenset("*?[")


class FteSingleGrepProfile(FteProfile):
    """FtE whose ``grep`` searches exactly one fetched file."""

    name = "fte-single-grep"

    def _refuse(self, why: str) -> ToolResult:
        return ToolResult(output=f"Error: {why}", error=True, meta={"refused": True, "error_type": "Refused"})

    def grep(self, args: GrepArgs) -> ToolResult:
        path = args.path
        if is_whole_cache(path, self.workspace.mount):
            return self._refuse("grep needs the path of one fetched file here (searching every cached file at "
                                "once is not available); use list_fetched to see the paths")
        assert path is not None
        if GLOB_CHARS & set(path):
            return self._refuse(f"grep takes the path of one fetched file, not a pattern of paths ({path!r})")
        fetched = {e.path for e in self.workspace.entries()}
        norm = posixpath.normpath(posixpath.join(self.workspace.mount, path.strip()))
        if norm not in fetched:
            return self._refuse(f"{path} is not a fetched file; grep one of the paths list_fetched shows")
        return super().grep(args.model_copy(update={"path": norm}))
