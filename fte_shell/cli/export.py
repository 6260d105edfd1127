"""CLI commands: ``fte-shell export inspect SWEEP_OR_RUN… --out FILE.eval|FILE.json|DIR``,
``fte-shell export atif RUN…|SWEEP --out DIR`` and ``fte-shell export browsecomp-plus SWEEP --out DIR`` — runs in
the field's own formats (docs/export.md)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from ..errors import FteError

_err = Console(stderr=True)
_out = Console(soft_wrap=True)

export_app = typer.Typer(
    help="Write runs in the field's own formats: Inspect AI eval logs (inspect view, inspect_ai.analysis, "
         "Docent), ATIF trajectories and BrowseComp-Plus run files. See docs/export.md for what maps to what.",
    no_args_is_help=True,
)

Paths = Annotated[list[Path], typer.Argument(help="Sweep directories and/or run directories.")]
Show = Annotated[bool, typer.Option("--progress/--no-progress", help="Show the progress bar.")]


@contextmanager
def _progress(show: bool, what: str, total: int) -> Iterator[Callable[[Any], None]]:
    """A rich progress bar over ``total`` runs (on stderr), or nothing."""
    if not show:
        yield lambda _run: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn(f"[bold]{what}[/bold]"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=_err, transient=False) as prog:
        task = prog.add_task(what, total=total)
        yield lambda _run: prog.advance(task)


def _fail(e: Exception) -> typer.Exit:
    _err.print(f"[red]error:[/red] {escape(str(e))}", soft_wrap=True)
    return typer.Exit(2)


@export_app.command("inspect")
def export_inspect_cmd(
    paths: Paths,
    out: Annotated[Path, typer.Option("--out", "-o", help="A FILE.eval or FILE.json (one dataset × profile × model "
                                      "cell) or a directory (one log per cell).")],
    fmt: Annotated[str, typer.Option("--format", help="Log format in a directory: eval or json.")] = "eval",
    progress: Show = True,
) -> None:
    """One Inspect AI eval log per (dataset, profile, model) cell: the task is the dataset, the solver the
    profile, each question a sample, repetitions epochs; conversation, scores, usage and one event per
    model and tool call. Open them with `inspect view --log-dir DIR`."""
    from ..export.common import read_runs
    from ..export.inspect_log import export_inspect, plan, require_inspect

    try:
        require_inspect()
        runs = read_runs(paths)
        plan(runs, out, fmt)  # a bad --out is refused before any work
        with _progress(progress, "export inspect", len(runs)) as tick:
            files = export_inspect(paths, out, fmt=fmt, on_run=tick, runs=runs)
    except FteError as e:
        raise _fail(e) from None
    _out.print(f"wrote {len(files)} eval log(s) for {len(runs)} run(s): " + "  ".join(map(str, files)))


@export_app.command("atif")
def export_atif_cmd(
    paths: Paths,
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for the trajectories "
                                      "(<arm>/<qid>/r<k>.json).")],
    progress: Show = True,
) -> None:
    """One ATIF (v1.8) trajectory per run, built and validated with the atif package's models: a step per
    model turn with its message, reasoning, tool calls and observations, per-step and final token metrics."""
    from ..export.atif_trajectory import export_atif, require_atif
    from ..export.common import read_runs

    try:
        require_atif()
        runs = read_runs(paths)
        with _progress(progress, "export atif", len(runs)) as tick:
            files = export_atif(paths, out, on_run=tick, runs=runs)
    except FteError as e:
        raise _fail(e) from None
    _out.print(f"wrote {len(files)} ATIF trajectory file(s) under {out}")


@export_app.command("browsecomp-plus")
def export_browsecomp_plus_cmd(
    sweep: Annotated[Path, typer.Argument(help="A BrowseComp-Plus sweep directory (the --out of fte-shell bench).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for the run files (<arm>/<query_id>.json; "
                                      "<arm>/r<k>/ per repetition).")],
    progress: Show = True,
) -> None:
    """The sweep's runs as BrowseComp-Plus run files (query_id, tool_call_counts, status, retrieved_docids,
    result, metadata, usage), one directory per arm: what the benchmark's scripts_evaluation reads and the
    leaderboard takes. The report's "BrowseComp-Plus official figures" are computed from the same files."""
    from ..export.browsecomp_plus import export_browsecomp_plus
    from ..record.sweepdir import SweepDir

    try:
        with _progress(progress, "export browsecomp-plus", len(SweepDir(sweep).runs())) as tick:
            done = export_browsecomp_plus(sweep, out, on_run=tick)
    except FteError as e:
        raise _fail(e) from None
    for note in done.notes:
        _err.print(f"[yellow]note:[/yellow] {escape(note)}", soft_wrap=True)
    if done.left_out:
        _err.print(f"[yellow]note:[/yellow] {done.left_out} run(s) are not results (an infrastructure failure, or "
                   "unfinished) and were not written: resume the sweep to run them", soft_wrap=True)
    for d, n in done.dirs.items():
        _out.print(f"{n} run file(s) in {d}")


def register(app: typer.Typer) -> None:
    app.add_typer(export_app, name="export")
