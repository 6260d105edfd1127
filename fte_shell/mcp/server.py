"""The MCP server object (the SDK's low-level ``Server``): the profile's tools with their own names,
schemas and descriptions (the one adapter, :mod:`fte_shell.episode.as_mcp`), each call run through the
workspace's Episode; tool failures as ``isError``
results; the workspace's files as read-only resources.

The low-level server, not ``MCPServer``: the tools' JSON schemas already exist (the profile builds them
from ``tools.toml``) and must reach the client unchanged, where ``MCPServer`` derives schemas from Python
signatures. Over HTTP every workspace tool takes one more argument, ``handle``, and two tools open and
close workspaces (the protocol of 2026-07-28 is stateless: the state travels as the handle).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from ..episode.as_mcp import crashed_result, mcp_tool, text_result, tool_result
from ..version import __version__
from .workspaces import OpenWorkspace, WorkspaceError, Workspaces

SCHEME = "fte-workspace"
STDIO_KEY = "work"
"""The authority of a stdio server's resource URIs (``fte-workspace://work/NAME``); over HTTP it is the
workspace's handle."""

HANDLE = {"type": "string", "description": "The workspace's handle, as open_workspace returned it."}
OPEN = types.Tool(
    name="open_workspace",
    description="Open a new research workspace: its own isolated box (for the shell profile) and an empty "
    "/work, recorded as a run of its own. Returns its `handle`: pass it to every other tool. Close it with "
    "close_workspace when done (an idle workspace is closed after a while).",
    input_schema={"type": "object", "properties": {"question": {
        "type": "string", "description": "The question this workspace researches (recorded with the run)."}},
        "required": [], "additionalProperties": False},
    output_schema={"type": "object", "properties": {"handle": {"type": "string"}, "run_id": {"type": "string"}},
                   "required": ["handle", "run_id"]},
)
CLOSE = types.Tool(
    name="close_workspace",
    description="Close a workspace: its box and files go away from this server (the run is kept on disk); "
    "the handle is useless afterwards.",
    input_schema={"type": "object", "properties": {"handle": HANDLE}, "required": ["handle"],
                  "additionalProperties": False},
)
ANSWER_DESCRIPTION = ("Give your final answer to the question. It is recorded as the run's answer and ends "
                      "the workspace: its box is removed and no further tool can be used in it.")


def answer_tool(*, with_handle: bool) -> types.Tool:
    props: dict[str, Any] = {"answer": {"type": "string", "description": "The final answer, short and direct."}}
    if with_handle:
        props = {"handle": HANDLE, **props}
    return types.Tool(name="answer", description=ANSWER_DESCRIPTION, input_schema={
        "type": "object", "properties": props, "required": list(props), "additionalProperties": False})


def resource_uri(key: str, name: str) -> str:
    return f"{SCHEME}://{key}/{quote(name)}"


def workspace_file(root: Path, name: str) -> Path | None:
    """The regular file ``name`` directly in ``root`` (never a link, never outside), or None."""
    if not name or "/" in name or "\x00" in name or name in (".", ".."):
        return None
    path = root / name
    if path.is_symlink() or not path.is_file() or path.resolve().parent != root.resolve():
        return None
    return path


def list_files(ws: OpenWorkspace, key: str) -> list[types.Resource]:
    root = ws.workspace_dir
    files = sorted(p for p in root.iterdir() if p.is_file() and not p.is_symlink()) if root.is_dir() else []
    return [types.Resource(name=p.name, uri=resource_uri(key, p.name), mime_type="text/plain", size=p.stat().st_size,
                           description="A page saved in the workspace (/work): three header lines, a blank line, "
                           "then the page text.") for p in files]


class Dispatcher:
    """What the handlers do, for one server: stdio (``single`` set: its one workspace, no handles) or HTTP."""

    def __init__(self, workspaces: Workspaces, profile_tools: list[dict[str, Any]], *, single: OpenWorkspace | None,
                 answer: bool):
        self.workspaces, self.single, self.answer = workspaces, single, answer
        http = single is None
        tools = [mcp_tool(t, lead={"handle": HANDLE} if http else None) for t in profile_tools]
        self.profile_names = {t.name for t in tools}
        self.tools = ([OPEN, *tools, CLOSE] if http else tools) + ([answer_tool(with_handle=http)] if answer else [])

    async def call_tool(self, name: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
        args = dict(arguments or {})
        try:
            if self.single is None and name == "open_workspace":
                question = args.get("question")
                ws = await self.workspaces.open(question if isinstance(question, str) else None)
                return text_result(f"workspace opened; handle: {ws.handle}",
                                   structured={"handle": ws.handle, "run_id": ws.episode.run_id})
            ws = self.single if self.single is not None else self.workspaces.get(args.pop("handle", None))
            if self.single is None and name == "close_workspace":
                result = await self.workspaces.close(ws.handle)
                return text_result(f"workspace closed ({result.stop_reason})")
            if self.answer and name == "answer":
                return await self._answer(ws, args)
            if ws.episode.finished:
                raise WorkspaceError("this workspace is closed (an answer was given): nothing more can run in it")
            res = await self.workspaces.call(ws, name, args)
            return tool_result(res)
        except WorkspaceError as e:
            return text_result(f"Error: {e}", error=True)
        except Exception as e:  # noqa: BLE001 - the box or the world failed: an error result, the server stays up
            return crashed_result(e)

    async def _answer(self, ws: OpenWorkspace, args: dict[str, Any]) -> types.CallToolResult:
        answer = args.get("answer")
        if not isinstance(answer, str) or not answer.strip() or set(args) != {"answer"}:
            raise WorkspaceError("answer takes one argument, `answer`: a non-empty string")
        if ws.episode.finished:
            raise WorkspaceError("this workspace already has its answer")
        result = await self.workspaces.close(ws.handle, answer)
        return text_result(f"answer recorded ({result.stop_reason}); the workspace is closed")

    def list_resources(self) -> list[types.Resource]:
        """stdio: the workspace's files. HTTP: none (a handle is a capability: listing every workspace
        would hand one client's to another); read them by the template's URI."""
        if self.single is None or self.single.episode.finished:
            return []
        return list_files(self.single, STDIO_KEY)

    def read_resource(self, uri: str) -> types.TextResourceContents:
        parts = urlsplit(uri)
        if parts.scheme != SCHEME:
            raise MCPError(INVALID_PARAMS, f"unknown resource {uri!r}: workspace files are {SCHEME}://…")
        try:
            ws = self.single if self.single is not None and parts.netloc == STDIO_KEY else self.workspaces.get(parts.netloc)
        except WorkspaceError as e:
            raise MCPError(INVALID_PARAMS, str(e)) from None
        path = workspace_file(ws.workspace_dir, unquote(parts.path.removeprefix("/")))
        if path is None:
            raise MCPError(INVALID_PARAMS, f"no such file in the workspace: {uri}")
        return types.TextResourceContents(uri=uri, mime_type="text/plain",
                                          text=path.read_bytes().decode("utf-8", errors="replace"))


def build_server(dispatch: Dispatcher, instructions: str) -> Server[Any]:
    """The SDK's low-level server with ``dispatch``'s handlers."""

    async def list_tools(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=dispatch.tools)

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        return await dispatch.call_tool(params.name, params.arguments)

    async def list_resources(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=dispatch.list_resources())

    async def list_templates(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None) -> types.ListResourceTemplatesResult:
        key = STDIO_KEY if dispatch.single is not None else "{handle}"
        return types.ListResourceTemplatesResult(resource_templates=[types.ResourceTemplate(
            name="workspace-file", uri_template=f"{SCHEME}://{key}/{{name}}", mime_type="text/plain",
            description="A file of the workspace (/work), by its name (list_fetched shows them).")])

    async def read_resource(ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        return types.ReadResourceResult(contents=[dispatch.read_resource(params.uri)])

    return Server("fte-shell", version=__version__, instructions=instructions, on_list_tools=list_tools,
                  on_call_tool=call_tool, on_list_resources=list_resources, on_list_resource_templates=list_templates,
                  on_read_resource=read_resource)
