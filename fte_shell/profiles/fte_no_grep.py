"""Ablation arm ``fte-no-grep`` (paper Table 5): the structured FtE profile without its ``grep`` tool.

``search``, ``fetch``, ``read`` and ``list_fetched`` and the cache are unchanged; a ``grep`` call is
refused like any tool the profile does not offer (counted as a refused call in the metrics).
"""

from __future__ import annotations

from .base import Tool
from .fte import FteProfile


class FteNoGrepProfile(FteProfile):
    """FtE without ``grep``."""

    name = "fte-no-grep"

    def _make_tools(self) -> list[Tool]:
        return [t for t in super()._make_tools() if t.name != "grep"]
