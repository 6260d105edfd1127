"""The one adapter of an episode's tools to MCP: the profile's tools under their own names, with their own
descriptions and JSON schemas (as the profile builds them from ``tools.toml``, unchanged), each call an
:meth:`Episode.call <fte_shell.episode.Episode.call>` (a turn of its own, recorded) whose observation is
the result's text and whose failure is an ``isError`` result. ``fte-shell mcp``
(:mod:`fte_shell.mcp.server`) and the verifiers tool server (:mod:`fte_shell.rl.verifiers.toolset`) both
serve the profile's tools through it.

Needs the MCP SDK (the ``mcp`` or ``rl`` extra): import this module only where it is installed.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

import mcp_types as types

from ..profiles import ToolResult

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from .core import Episode


def mcp_tool(schema: dict[str, Any], *, lead: dict[str, dict[str, Any]] | None = None) -> types.Tool:
    """The MCP form of one profile tool (OpenAI function format): the same name, description and JSON
    schema; ``lead``: required properties put before the tool's own (HTTP's ``handle``)."""
    fn = schema["function"]
    params = copy.deepcopy(fn.get("parameters") or {"type": "object", "properties": {}})
    if lead:
        params["properties"] = {**lead, **params.get("properties", {})}
        params["required"] = [*lead, *params.get("required", [])]
    return types.Tool(name=fn["name"], description=fn.get("description"), input_schema=params)


def text_result(text: str, *, error: bool = False, structured: dict[str, Any] | None = None) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=error, structured_content=structured)


def tool_result(res: ToolResult) -> types.CallToolResult:
    """A tool call's result as MCP's: its observation, ``isError`` when it failed."""
    return text_result(res.output, error=res.error)


def crashed_result(e: Exception) -> types.CallToolResult:
    """The box or the world failed under a call: an error result (the server stays up)."""
    return text_result(f"Error: the tool crashed: {e.__class__.__name__}: {e}", error=True)


def serve_episode(server: MCPServer, episode: Episode) -> None:
    """Serve ``episode``'s tools on ``server``, an SDK ``MCPServer`` made by someone else (verifiers makes
    its tool servers' own): its tool listing and calls answered by this adapter, so the profile's schemas
    reach the client unchanged rather than derived from a Python signature."""
    tools = [mcp_tool(t) for t in episode.tools]
    names = {t.name for t in tools}

    async def list_tools() -> list[types.Tool]:
        return tools

    async def call_tool(name: str, arguments: dict[str, Any], context: Any = None) -> types.CallToolResult:
        if name not in names:
            return text_result(f"Error: unknown tool {name!r} (tools: {', '.join(sorted(names))})", error=True)
        try:
            return tool_result(await episode.acall(name, dict(arguments or {})))
        except Exception as e:  # noqa: BLE001 - an error result; the rollout goes on
            return crashed_result(e)

    server.list_tools = list_tools  # type: ignore[method-assign]
    server.call_tool = call_tool  # type: ignore[method-assign]
