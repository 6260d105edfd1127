"""The MCP SDK's own floor: a minimal server of the same SDK and settings as ``fte-shell mcp`` whose one
tool, ``bash``, answers a constant at once (no box, no profile, no thread hop, no token check).
perf/mcp_overhead.py runs it beside both transports, so what fte-shell adds is read against what any
server of this SDK costs.

    python3 perf/mcp_floor.py stdio
    python3 perf/mcp_floor.py http      (prints "floor at http://127.0.0.1:PORT/mcp" on stderr)
"""

from __future__ import annotations

import socket
import sys
from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import Server

TOOL = types.Tool(name="bash", description="constant", input_schema={
    "type": "object", "properties": {"command": {"type": "string"}, "handle": {"type": "string"}}})


def build() -> Server[Any]:
    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[TOOL])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(type="text", text="[exit code 0]")])

    return Server("floor", on_list_tools=list_tools, on_call_tool=call_tool)


def serve_stdio() -> None:
    from mcp.server.stdio import stdio_server

    server = build()

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)


def serve_http() -> None:
    import uvicorn

    server = build()
    app = server.streamable_http_app(stateless_http=True, json_response=True, host="127.0.0.1")  # as fte-shell's
    sock = socket.socket()
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as fte-shell's
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    print(f"floor at http://127.0.0.1:{sock.getsockname()[1]}/mcp", file=sys.stderr, flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on")).run(sockets=[sock])


if __name__ == "__main__":
    serve_stdio() if sys.argv[1:] == ["stdio"] else serve_http()
