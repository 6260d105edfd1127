"""Profiles: the tool sets the agent loop can drive (one file each).

- ``shell``: one ``bash`` tool in the sandbox (``search``/``fetch``/``list_fetched`` are shell helpers);
- ``fte``: the structured Fetch-then-Explore tools ``search``, ``fetch``, ``grep``, ``read``, ``list_fetched``;
- ``snippet-only``, ``visit-snippet``, ``visit-summary``, ``open-find``: the paper's baselines.
- ``standard``: BrowseComp-Plus's own ``search``/``get_document`` and answer format (:mod:`.answer_format`).

Every profile uses the same search backend and the same fetch pipeline. See docs/profiles.md for the exact
tools, bounds and output formats.
"""

from .base import (
    PROFILES,
    Profile,
    QuestionContext,
    SandboxRelease,
    SandboxSource,
    ScratchFiles,
    Tool,
    ToolProfile,
    ToolResult,
    make_profile,
    parse_arguments,
    runs_in_a_box,
)
from .schema import ToolArgs

__all__ = [
    "PROFILES",
    "Profile",
    "QuestionContext",
    "SandboxRelease",
    "SandboxSource",
    "ScratchFiles",
    "Tool",
    "ToolArgs",
    "ToolProfile",
    "ToolResult",
    "make_profile",
    "parse_arguments",
    "runs_in_a_box",
]
