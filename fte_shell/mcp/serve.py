"""The two transports of ``fte-shell mcp``: stdio (one workspace for the process) and Streamable HTTP
(workspaces by handle behind a token). Both run in the calling thread until the client goes (stdin
closed), the server is stopped (SIGINT, SIGTERM) or it fails, and close every box before they return."""

from __future__ import annotations

import socket
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from ..config import RunConfig
from ..episode import sigterm_as_interrupt
from ..world import World
from .config import LOOPBACK, NO_QUESTION, McpConfig
from .pipes import event_loop_stdio
from .workspaces import Workspaces, probe_tools

Say = Callable[[str], None]


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _workspaces(mcp: McpConfig, config: RunConfig, world: World, max_workspaces: int, warm: int = 0) -> Workspaces:
    return Workspaces(config, world, mcp.out, max_workspaces=max_workspaces, idle_ttl_s=mcp.idle_ttl_s,
                      default_question=mcp.question or NO_QUESTION, warm=warm)


def serve_stdio(mcp: McpConfig, config: RunConfig, say: Say = _say) -> None:
    """Open the one workspace, serve it over stdin/stdout until stdin closes, then close it (``abandoned``
    unless the ``answer`` tool was used). SIGTERM ends it as an interrupt, the box removed."""
    from mcp.server.stdio import stdio_server

    from .server import Dispatcher, build_server

    with sigterm_as_interrupt(), World.from_config(config) as world:
        spaces = _workspaces(mcp, config, world, 1)
        ws = spaces.open_sync(mcp.question)
        try:
            ep = ws.episode
            dispatch = Dispatcher(spaces, ep.tools, single=ws, answer=mcp.answer_tool)
            server = build_server(dispatch, ep.profile.system_addendum())
            say(f"fte-shell mcp: profile {ep.profile.name}, serving on stdio; run directory {ep.run_dir}")

            async def main() -> None:
                async with event_loop_stdio() as pipes, stdio_server(*(pipes or ())) as (read, write), \
                        anyio.create_task_group() as tg:
                    send, received = anyio.create_memory_object_stream[Any](0)

                    async def until_stdin_closes() -> None:
                        async with send:
                            async for message in read:
                                await send.send(message)
                        tg.cancel_scope.cancel()  # the client is gone: a call still running is abandoned

                    tg.start_soon(until_stdin_closes)
                    await server.run(received, write, server.create_initialization_options())

            run_until_stopped(main, spaces)
        except BaseException as e:
            spaces.close_all(e)
            raise


def serve_http(mcp: McpConfig, config: RunConfig, token: str, on_ready: Callable[[str], None] | None = None,
               say: Say = _say) -> None:
    """Serve Streamable HTTP at ``http://HOST:PORT/mcp`` until SIGINT/SIGTERM; every workspace closed at
    the end. ``on_ready(url)`` is called once the socket listens; ``say`` tells when the warm boxes are
    first all ready."""
    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    from .http import Door, allowed_origins
    from .server import Dispatcher, build_server

    with sigterm_as_interrupt(), World.from_config(config) as world:
        spaces = _workspaces(mcp, config, world, mcp.max_workspaces, mcp.warm)
        try:
            # the tools every workspace offers; fails fast without a box (a warm one, given back)
            tools, addendum = probe_tools(config, world, spaces.boxes)
            sock = _bind(mcp.host, mcp.port)
            port = sock.getsockname()[1]
            dispatch = Dispatcher(spaces, tools, single=None, answer=mcp.answer_tool)
            server = build_server(dispatch, addendum + "\n\n" + HTTP_NOTE)
            loopback = mcp.host in LOOPBACK
            security = TransportSecuritySettings(  # Host checked on loopback (DNS rebinding); Origin: the Door
                enable_dns_rebinding_protection=loopback, allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
                allowed_origins=sorted(allowed_origins(mcp.host, port)))
            inner = server.streamable_http_app(stateless_http=True, json_response=True, transport_security=security,
                                               host=mcp.host)
            app = Door(inner, token, allowed_origins(mcp.host, port))
            host = f"[{mcp.host}]" if ":" in mcp.host else mcp.host
            url = f"http://{host}:{port}/mcp"
            uv = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=5))

            async def main() -> None:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(spaces.reap_forever)
                    tg.start_soon(_announce_warm, spaces, say)
                    if on_ready is not None:
                        on_ready(url)
                    try:
                        await uv.serve(sockets=[sock])  # until SIGINT/SIGTERM: uvicorn shuts down, then re-raises it
                    finally:
                        tg.cancel_scope.cancel()

            run_until_stopped(main, spaces)
        except BaseException as e:
            spaces.close_all(e)
            raise


async def _announce_warm(spaces: Workspaces, say: Say) -> None:
    boxes = spaces.boxes
    if boxes is not None and await anyio.to_thread.run_sync(boxes.wait_ready, None, 600.0, abandon_on_cancel=True):
        say(f"fte-shell mcp: {boxes.size} warm box(es) ready")


def run_until_stopped(main: Callable[[], Awaitable[None]], spaces: Workspaces) -> None:
    """``anyio.run(main)``, then close every workspace (``abandoned``). An interrupt (SIGINT, or SIGTERM
    made one) comes out as a plain KeyboardInterrupt, never inside an exception group; a pipe broken by
    a client that died (a write to its stdout) is the client leaving, not a crash."""
    try:
        anyio.run(main)
    except BaseExceptionGroup as eg:
        if eg.subgroup(KeyboardInterrupt) is not None:
            raise KeyboardInterrupt("signal") from None
        if eg.split((BrokenPipeError, ConnectionResetError))[1] is not None:
            raise
    spaces.close_all()


HTTP_NOTE = ("Over this server every workspace tool takes a `handle`: call open_workspace first and pass the "
             "handle it returns; close_workspace when done.")


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # inherited by accepted connections: no 40 ms delayed-ACK stalls
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        from ..errors import ConfigError

        raise ConfigError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    sock.listen(128)
    sock.set_inheritable(False)
    return sock


