"""``fte-shell mcp``: the profile's tools served over the Model Context Protocol (stdio and Streamable
HTTP), every workspace an :class:`~fte_shell.episode.Episode` — its own box and run directory — so any MCP
client (Claude Code, Codex, Cursor, Inspect, the OpenAI Agents SDK) researches in fte-shell's sandbox and
its sessions are read by ``report``, ``view`` and ``export`` like any run (docs/mcp.md).

The ``mcp`` SDK (the optional extra ``fte-shell[mcp]``) is imported only by :mod:`.server` and
:mod:`.serve`'s functions; :mod:`.config`, :mod:`.workspaces` and :mod:`.http` do without it.
"""

from .config import McpConfig

__all__ = ["McpConfig"]
