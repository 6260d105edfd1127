"""Ablation arm ``fte-no-read`` (paper Table 5): the structured FtE profile without its ``read`` tool.

``search``, ``fetch``, ``grep`` and ``list_fetched`` and the cache are unchanged; a ``read`` call is
refused like any tool the profile does not offer (counted as a refused call in the metrics).
"""

from __future__ import annotations

from .base import Tool
from .fte import FteProfile


class FteNoReadProfile(FteProfile):
    """FtE without ``read``."""

    name = "fte-no-read"

    def _make_tools(self) -> list[Tool]:
        return [t for t in super()._make_tools() if t.name != "read"]
