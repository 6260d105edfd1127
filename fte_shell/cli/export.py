"""CLI: ``fte-shell export EXPORTER PATHS… --out OUT [--OPTION VALUE…]`` — one command per exporter of
:data:`fte_shell.export.base.EXPORTERS` (``inspect``, ``atif``, ``browsecomp-plus``, or a third-party
``mypkg.mod:EXPORTER``), each built from the exporter itself: its summary, what it reads, what ``--out`` is,
and a ``--flag`` per field of its options model (docs/export.md)."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

from ..errors import FteError
from ..export.base import EXPORTERS, Exported, Exporter, ExportError, exporter_options
from ..record.rundir import find_runs, runs_under

if TYPE_CHECKING:  # pragma: no cover
    from typer._click import Command, Context

_err = Console(stderr=True)
_out = Console(soft_wrap=True)
_OWN = ("paths", "out", "progress", "help")
"""The command's own parameters: an options field of these names cannot be a flag."""
_LISTED = 20
"""Places listed after the summary line at most."""


def _fail(e: Exception) -> typer.Exit:
    _err.print(f"[red]error:[/red] {escape(str(e))}", soft_wrap=True)
    return typer.Exit(2)


class _Bar:
    """A rich progress bar over ``total`` runs on stderr, drawn from the first run exported on (reading the
    record and checking ``--out`` come first, as before the bar), or nothing."""

    def __init__(self, show: bool, what: str, total: int):
        self.show, self.what, self.total = show, what, total
        self._prog: Any = None
        self._task: Any = None

    def __call__(self, _run: Any) -> None:
        if not self.show:
            return
        if self._prog is None:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._prog = Progress(TextColumn(f"[bold]{self.what}[/bold]"), BarColumn(), MofNCompleteColumn(),
                                  TimeElapsedColumn(), console=_err, transient=False)
            self._prog.start()
            self._task = self._prog.add_task(self.what, total=self.total)
        self._prog.advance(self._task)

    @contextmanager
    def shown(self) -> Iterator[_Bar]:
        try:
            yield self
        finally:
            if self._prog is not None:
                self._prog.stop()


def _flag(field: str) -> str:
    return "--" + field.replace("_", "-")


def _run(name: str, exporter: Exporter, paths: list[Path], out: Path, progress: bool, given: dict[str, Any]) -> None:
    """The one command path of every exporter."""
    try:
        if bad := next((str(p) for p in paths if str(p).startswith("-")), None):  # an unknown --flag
            flags = ", ".join(_flag(f) for f in exporter.options_model.model_fields) or "none"
            raise ExportError(f"export {name}: no option {bad} (its options: {flags}; see --help)")
        options = exporter_options(exporter, {k: v for k, v in given.items() if v is not None})
        if exporter.reads == "sweep" and len(paths) != 1:
            raise ExportError(f"export {name} reads one sweep directory, not {len(paths)} paths")
        exporter.require()
        # runs: each path checked here (one line for a missing or empty one); a sweep: by the exporter, which
        # knows what its sweep must be (browsecomp-plus: "not a BrowseComp-Plus sweep")
        total = sum(len(runs_under(p) if exporter.reads == "runs" else find_runs(p)) for p in paths)
        with _Bar(progress, f"export {name}", total).shown() as bar:
            done = exporter.export(paths, out, options, bar)
    except FteError as e:
        raise _fail(e) from None
    _print(done, out, total)


def _print(done: Exported, out: Path, total: int) -> None:
    """The notes, the summary line, then each place written: a file directly in ``out`` (or ``out`` itself),
    or a directory of ``out`` with how many files it got."""
    for note in done.notes:
        _err.print(f"[yellow]note:[/yellow] {escape(note)}", soft_wrap=True)
    left = f", {done.left_out} left out" if done.left_out else ""
    _out.print(f"wrote {len(done.files)} {done.what}(s) for {total} run(s){left}:")
    places: dict[str, int] = {}
    for f in done.files:
        try:
            rel = f.relative_to(out)
        except ValueError:
            rel = None
        place = str(f) if rel is None or len(rel.parts) <= 1 else str(out / rel.parts[0])
        places[place] = places.get(place, 0) + (0 if place == str(f) else 1)
    for place, n in list(places.items())[:_LISTED]:
        _out.print(f"  {n} {done.what}(s) in {place}" if n else f"  {place}")
    if len(places) > _LISTED:
        _out.print(f"  … and {len(places) - _LISTED} more under {out}")


def _command(name: str, exporter: Exporter) -> Command:
    """The command of one exporter: PATHS, --out, --progress/--no-progress and a flag per option field."""
    sweep = exporter.reads == "sweep"
    paths_help = "A sweep directory (the --out of fte-shell bench)." if sweep else "Sweep directories and/or run directories."
    params = [
        inspect.Parameter("paths", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Annotated[
            list[Path], typer.Argument(metavar="SWEEP" if sweep else "PATHS", help=paths_help)]),
        inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY, annotation=Annotated[
            Path, typer.Option("--out", "-o", help=exporter.writes)]),
        inspect.Parameter("progress", inspect.Parameter.KEYWORD_ONLY, default=True, annotation=Annotated[
            bool, typer.Option("--progress/--no-progress", help="Show the progress bar.")]),
    ]
    for field, info in exporter.options_model.model_fields.items():
        if field in _OWN:
            raise ExportError(f"exporter {name}: its option {field!r} clashes with the command's own --{field}")
        default = "" if info.is_required() else f" (default: {info.default})"
        text = f"{info.description or ''}{default}"
        decl = f"{_flag(field)}/--no-{field.replace('_', '-')}" if info.annotation is bool else _flag(field)
        kind: Any = bool | None if info.annotation is bool else str | None
        params.append(inspect.Parameter(f"opt_{field}", inspect.Parameter.KEYWORD_ONLY, default=None,
                                        annotation=Annotated[kind, typer.Option(decl, help=text, show_default=False)]))

    def command(paths: list[Path], **kw: Any) -> None:
        given = {k.removeprefix("opt_"): v for k, v in kw.items() if k.startswith("opt_")}
        _run(name, exporter, paths, kw["out"], kw["progress"], given)

    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__annotations__ = {}
    one = typer.Typer(add_completion=False)
    one.command(name, help=exporter.summary, context_settings={"ignore_unknown_options": True})(command)
    cmd = typer.main.get_command(one)
    cmd.name = name
    return cmd


class _Exporters(TyperGroup):
    """``fte-shell export``'s commands: every exporter of the registry, and any ``module:attr`` reference."""

    def list_commands(self, ctx: Context) -> list[str]:
        return EXPORTERS.names()

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        try:
            return _command(cmd_name, EXPORTERS.get(cmd_name))
        except FteError as e:
            raise _fail(e) from None


export_app = typer.Typer(
    cls=_Exporters,
    help="Write runs in the field's own formats: Inspect AI eval logs (inspect view, inspect_ai.analysis, "
         "Docent), ATIF trajectories and BrowseComp-Plus run files; a third-party exporter as "
         "`fte-shell export mypkg.mod:EXPORTER PATHS --out OUT`. See docs/export.md.",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    app.add_typer(export_app, name="export")
