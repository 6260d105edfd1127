"""Ablation arms ``fte-no-grep`` and ``fte-no-read`` (paper Table 5): the structured FtE profile without one
of its extract tools.

Every other tool (``search``, ``fetch``, the remaining extract tool, ``list_fetched``) and the cache are
unchanged; a call of the dropped tool is refused like any tool the profile does not offer (counted as a
refused call in the metrics).
"""

from __future__ import annotations

from typing import ClassVar

from .base import Tool
from .fte import FteProfile


class FteWithout(FteProfile):
    """FtE without the tool named ``dropped``."""

    dropped: ClassVar[str]
    """The tool this arm does not offer."""

    def _make_tools(self) -> list[Tool]:
        return [t for t in super()._make_tools() if t.name != self.dropped]


class FteNoGrepProfile(FteWithout):
    """FtE without ``grep``."""

    name = "fte-no-grep"
    dropped = "grep"


class FteNoReadProfile(FteWithout):
    """FtE without ``read``."""

    name = "fte-no-read"
    dropped = "read"
