"""``fte-shell mcp``'s own settings (the run's world and box come from the usual :class:`RunConfig`)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from ..config.base import StrictModel

NO_QUESTION = "(an MCP session: the client gave no question)"
"""The question a workspace records when its client gave none (a run needs one)."""

LOOPBACK = ("127.0.0.1", "localhost", "::1")
"""Hosts that only this machine reaches: binding elsewhere is warned about."""


class McpConfig(StrictModel):
    """How ``fte-shell mcp`` serves the profile's tools."""

    transport: Literal["stdio", "http"] = "stdio"
    """``stdio``: one workspace for the process, over stdin/stdout (what a client launching the server
    uses); ``http``: Streamable HTTP at ``/mcp``, many workspaces, each named by a handle."""

    host: str = "127.0.0.1"
    """HTTP: the address to bind. Anything but a loopback address is warned about: the token is then all
    that stands between the network and the boxes."""

    port: int = Field(8765, ge=0, le=65535)
    """HTTP: the port to bind (0 = any free port; the one taken is printed)."""

    token_file: Path | None = None
    """HTTP: a file holding the bearer token every request must carry. None = a fresh token, printed at
    start."""

    out: Path = Path("runs/mcp")
    """The directory under which every workspace gets its run directory (``report``, ``view`` and
    ``export`` read them)."""

    idle_ttl_s: float = Field(600.0, gt=0)
    """HTTP: a workspace without a tool call for this many seconds is closed (its box removed)."""

    max_workspaces: int = Field(8, ge=1)
    """HTTP: at most this many workspaces open at once; ``open_workspace`` beyond it is refused."""

    warm: int = Field(2, ge=0)
    """HTTP, shell profile: boxes kept started ahead (at most ``max_workspaces``), so ``open_workspace``
    takes a ready one instead of starting a box; 0 = none. They are removed with the server."""

    question: str | None = None
    """The question a workspace records when its client gives none (stdio: always this one). None = a
    placeholder saying no question was given."""

    answer_tool: bool = False
    """Add a tool ``answer`` that records the client's final answer and closes the workspace (its run
    then ends ``answer`` and can be scored). Off: the tools are exactly the profile's, and a workspace
    closed without an answer ends ``abandoned``."""
