"""CLI command: ``fte-shell mcp`` — the profile's tools served over MCP (stdio or Streamable HTTP), each
workspace a run directory under ``--out`` (docs/mcp.md). The ``mcp`` SDK is imported only when it runs."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from .options import config_flags


def _help(field: str) -> str:
    """The first sentence of :class:`~fte_shell.mcp.McpConfig`'s field docstring (one home for the text)."""
    from ..mcp.config import McpConfig

    doc = " ".join((McpConfig.model_fields[field].description or "").split()).replace("``", "`")
    return doc.split(". ")[0].rstrip(".") + "."


def register(app: typer.Typer) -> None:
    """Add ``mcp`` to the root app."""

    @app.command("mcp")
    @config_flags("mcp")
    def mcp_cmd(
        transport: Annotated[str, typer.Option("--transport", "-t", help=_help("transport"), metavar="stdio|http")] = "stdio",
        host: Annotated[str, typer.Option("--host", help=_help("host"))] = "127.0.0.1",
        port: Annotated[int, typer.Option("--port", help=_help("port"))] = 8765,
        token_file: Annotated[Path | None, typer.Option("--token-file", help=_help("token_file"))] = None,
        out: Annotated[Path, typer.Option("--out", "-o", help=_help("out"))] = Path("runs/mcp"),
        idle_ttl: Annotated[float, typer.Option("--idle-ttl", help=_help("idle_ttl_s"))] = 600.0,
        max_workspaces: Annotated[int, typer.Option("--max-workspaces", help=_help("max_workspaces"))] = 8,
        warm: Annotated[int, typer.Option("--warm", help=_help("warm"))] = 2,
        question: Annotated[str | None, typer.Option("--question", help=_help("question"))] = None,
        answer_tool: Annotated[bool, typer.Option("--answer-tool", help=_help("answer_tool"))] = False,
        config: Annotated[Path | None, typer.Option("--config", "-c", help="TOML file ([agent], [sandbox], [search], [snapshot]).")] = None,
        *,
        overrides: dict[str, Any],
    ) -> None:
        """Serve the profile's tools over the Model Context Protocol: `bash` (or fte's search/fetch/grep/read/
        list_fetched) in fte-shell's no-network box, for Claude Code, Codex, Cursor, Inspect or any MCP
        client. stdio: one workspace per process; http: workspaces by handle, behind a bearer token."""
        from pydantic import ValidationError

        from ..config import load_config
        from ..errors import ConfigError, FteError
        from ..mcp.config import LOOPBACK, McpConfig

        def fail(message: str) -> None:
            typer.echo(f"error: {message}", err=True)
            raise typer.Exit(2)

        try:
            settings = McpConfig(transport=transport, host=host, port=port, token_file=token_file, out=out,  # type: ignore[arg-type]
                                 idle_ttl_s=idle_ttl, max_workspaces=max_workspaces, warm=warm, question=question,
                                 answer_tool=answer_tool)
            cfg = load_config(config, overrides)
        except ValidationError as e:
            err = e.errors()[0]
            fail(f"{'.'.join(str(x) for x in err['loc'])}: {err['msg']}")
            return
        except FteError as e:
            fail(str(e))
            return
        try:
            import mcp.server  # noqa: F401 - the optional SDK
        except ImportError:
            fail("the MCP SDK is not installed: pip install 'fte-shell[mcp]'")
        from ..mcp.serve import serve_http, serve_stdio

        try:
            if settings.transport == "stdio":
                serve_stdio(settings, cfg)
                return
            from ..mcp.http import load_token

            token, generated = load_token(settings.token_file)
            if settings.host not in LOOPBACK:
                typer.echo(f"warning: listening on {settings.host}, not a loopback address: anyone who can reach "
                           "it and holds the token can run commands in boxes here", err=True)

            def ready(url: str) -> None:
                typer.echo(f"fte-shell mcp: Streamable HTTP at {url} (profile {cfg.agent.profile}); run directories "
                           f"under {settings.out}", err=True)
                if generated:
                    typer.echo(f"token: {token}  (send it as `Authorization: Bearer <token>`)", err=True)
                sys.stderr.flush()

            serve_http(settings, cfg, token, on_ready=ready)
        except KeyboardInterrupt:
            typer.echo("fte-shell mcp: stopped; every box removed", err=True)
            raise typer.Exit(130) from None
        except ConfigError as e:
            fail(str(e))
        except FteError as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(1) from None
