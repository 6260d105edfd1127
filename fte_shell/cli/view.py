"""CLI command: ``fte-shell view PATH… [--port N] [--static OUT]`` — look at what the agent did."""

from __future__ import annotations

import getpass
import secrets
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

_err = Console(stderr=True)


def view(
    paths: Annotated[list[Path], typer.Argument(help="Run directories, sweep directories, or directories of run directories (fork -n's).")],
    port: Annotated[int, typer.Option("--port", help="Port on 127.0.0.1 (default: a free one).")] = 0,
    static: Annotated[
        Path | None,
        typer.Option("--static", help="Write a self-contained site to this directory instead of serving "
                     "(open OUT/index.html; no network needed; zip it to share)."),
    ] = None,
    reviewer: Annotated[
        str | None,
        typer.Option("--reviewer", help="Your name on the marks you give runs in the hand check (default: your "
                     "login name)."),
    ] = None,
    read_only: Annotated[bool, typer.Option("--read-only", help="Serve without the hand check's controls.")] = False,
) -> None:
    """See what the agent did: every run of a sweep (a question × profile matrix, a table to filter and
    sort), each run turn by turn, its workspace with the lines each grep/read touched, and two runs side by
    side. Serves on 127.0.0.1 only (prints the URL), or writes a static site with --static.

    The hand check: in a served viewer, mark a run's answer correct or wrong (with a note); marks are
    appended to the sweep's audit.jsonl and `report` gives the audited accuracy and judge–human agreement.
    Marking needs the per-session token in the printed URL; a static site shows the marks read-only."""
    from ..viewer import Catalog, ViewerServer, write_static

    try:
        catalog = Catalog(paths)
    except ValueError as e:
        _err.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from None
    if static is not None:
        n = write_static(catalog, static)
        typer.echo(f"wrote {n} files for {len(catalog.runs)} run(s): open {static.resolve() / 'index.html'}")
        return
    try:
        who = reviewer or _login()
        server = ViewerServer(catalog, port=port, token=None if read_only else secrets.token_urlsafe(24), reviewer=who)
    except OSError as e:
        _err.print(f"[red]error:[/red] cannot listen on 127.0.0.1:{port}: {e}")
        raise typer.Exit(2) from None
    typer.echo(f"{len(catalog.runs)} run(s); viewer at {server.review_url}  (Ctrl-C to stop)", nl=True)
    if not read_only:
        typer.echo(f"hand check: marks are written as {who!r} (the link carries this session's token; keep it to "
                   "yourself)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def _login() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "reviewer"


def register(app: typer.Typer) -> None:
    app.command("view")(view)
