"""``fte-shell snapshot ls | show | verify | merge | export``: the WARC snapshots (docs/snapshots.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..errors import FteError

_out = Console(highlight=False)
_err = Console(stderr=True, highlight=False)

snapshot_app = typer.Typer(help="Inspect, check, merge and export WARC snapshots (--snapshot DIR of run/bench/shell).",
                           no_args_is_help=True)

DirArg = Annotated[Path, typer.Argument(help="Snapshot directory (WARC files + index.sqlite).")]


def _fail(e: Exception) -> typer.Exit:
    _err.print(f"[red]error:[/red] {escape(str(e))}", soft_wrap=True)
    return typer.Exit(1)


@snapshot_app.command("ls")
def ls_cmd(directory: DirArg, as_json: Annotated[bool, typer.Option("--json", help="One JSON object a line.")] = False) -> None:
    """Every resource (page URL or search): its captures, the newest one's status and time, stored bytes."""
    from ..snapshot.tools import list_resources

    try:
        resources = list_resources(directory)
    except FteError as e:
        raise _fail(e) from None
    if as_json:
        for r in resources:
            typer.echo(json.dumps({"kind": r.kind, "uri": r.uri, "key": r.key, "captures": [c.to_dict() for c in r.captures]},
                                  ensure_ascii=False))
        return
    table = Table(show_header=True, header_style="bold")
    for col in ("kind", "resource", "captures", "newest", "status", "bytes"):
        table.add_column(col)
    for r in resources:
        last = r.captures[-1]
        table.add_row(r.kind, escape(r.uri), str(len(r.captures)), last.time, last.status, f"{r.size:,}")
    _out.print(table)
    _out.print(f"{len(resources)} resource(s), {sum(len(r.captures) for r in resources)} capture(s), "
               f"{sum(r.size for r in resources):,} bytes of text")


@snapshot_app.command("show")
def show_cmd(
    directory: DirArg,
    resource: Annotated[str, typer.Argument(help="A URL, a search's target URI (see ls) or a capture id.")],
    capture: Annotated[str | None, typer.Option("--capture", help="This capture instead of the newest.")] = None,
) -> None:
    """The stored text (exactly what was written to /work, or a search's results) and its metadata."""
    from ..snapshot.tools import show

    try:
        cap, meta, text = show(directory, resource, capture)
    except FteError as e:
        raise _fail(e) from None
    typer.echo(f"capture {cap.id}  {cap.time}  {cap.status}  {cap.file}")
    typer.echo(json.dumps(meta, ensure_ascii=False, indent=1))
    typer.echo("")
    typer.echo(text, nl=False)


@snapshot_app.command("verify")
def verify_cmd(directory: DirArg) -> None:
    """Check every record's sha256 digests and that the index and the WARC files agree (exit 1 if not)."""
    from ..snapshot.tools import verify

    try:
        v = verify(directory)
    except FteError as e:
        raise _fail(e) from None
    for p in v.problems:
        _out.print(f"[red]problem:[/red] {escape(p)}", soft_wrap=True)
    _out.print(f"{v.files} file(s), {v.records} record(s), {v.captures} capture(s): "
               + ("ok" if v.ok else f"{len(v.problems)} problem(s)"))
    if not v.ok:
        raise typer.Exit(1)


@snapshot_app.command("merge")
def merge_cmd(
    dest: Annotated[Path, typer.Argument(help="Snapshot directory to merge into (created if missing).")],
    sources: Annotated[list[Path], typer.Argument(help="Snapshot directories to copy from.")],
) -> None:
    """Copy the WARC files of SOURCES into DEST and index them (e.g. the snapshots of several machines)."""
    from ..snapshot.tools import merge

    try:
        added = merge(dest, sources)
    except FteError as e:
        raise _fail(e) from None
    _out.print(f"{added} capture(s) added to {dest}")


@snapshot_app.command("export")
def export_cmd(
    directory: DirArg,
    run: Annotated[Path, typer.Option("--run", help="A run directory (or a sweep directory): export what it used.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="New snapshot directory for the export.")],
) -> None:
    """Only the captures one run (or sweep) used, as a small snapshot to publish beside a paper."""
    from ..snapshot.tools import export

    try:
        n, path = export(directory, run, out)
    except FteError as e:
        raise _fail(e) from None
    _out.print(f"{n} capture(s) exported to {path}")


def register(app: typer.Typer) -> None:
    """Add the ``snapshot`` group."""
    app.add_typer(snapshot_app, name="snapshot")
