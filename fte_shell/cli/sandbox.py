"""CLI commands: ``fte-shell sandbox build|gc|doctor`` and ``fte-shell shell`` (a person's terminal in a
sandbox of the same kind the agent gets)."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..errors import FteError
from .options import config_flags

if TYPE_CHECKING:  # pragma: no cover
    from ..config import RunConfig

_out = Console(highlight=False)
_err = Console(stderr=True, highlight=False)

sandbox_app = typer.Typer(
    help="Build the sandbox image, remove leftover boxes, check the sandbox providers' set-up.",
    no_args_is_help=True,
)


def _load(config: Path | None, overrides: dict[str, Any] | None = None) -> RunConfig:
    from ..config import load_config

    return load_config(config, overrides)


def _provider(cfg):
    from ..sandbox import get_provider

    return get_provider(cfg.provider)


def _fail(e: Exception) -> None:
    _err.print(f"[red]error:[/red] {escape(str(e))}")
    raise typer.Exit(1)


ConfigOpt = Annotated[
    Path | None, typer.Option("--config", "-c", help="TOML config file ([sandbox] table).", exists=True)
]


@sandbox_app.command("build")
def build(config: ConfigOpt = None) -> None:
    """Build the sandbox image now (from Dockerfile.sandbox; skipped when it is up to date)."""
    try:
        cfg = _load(config).sandbox
        provider = _provider(cfg)
        ok, reason = provider.status(cfg)
        if ok:
            _out.print(reason)
            return
        provider.prepare(cfg, force=True, log=lambda m: _err.print(escape(m)))
        _out.print(provider.status(cfg)[1])
    except FteError as e:
        _fail(e)


@sandbox_app.command("rebuild")
def rebuild(config: ConfigOpt = None) -> None:
    """Build the sandbox image even when it is up to date."""
    try:
        cfg = _load(config).sandbox
        _provider(cfg).prepare(cfg, force=True, log=lambda m: _err.print(escape(m)))
    except FteError as e:
        _fail(e)


@sandbox_app.command("gc")
def gc_cmd(config: ConfigOpt = None) -> None:
    """Remove what fte-shell boxes left behind (Docker or podman containers, bwrap cgroups, temporary
    sandbox directories) when their owning process is gone or their TTL has passed, and sandbox images
    superseded by a rebuild that no box uses."""
    try:
        res = _provider(_load(config).sandbox).gc(log=lambda m: _out.print(escape(m)), images=True)
    except FteError as e:
        _fail(e)
        return
    _out.print(
        f"removed {len(res.removed)} container(s), {res.dirs} temporary director(ies) and {res.images} "
        f"superseded image(s) ({res.reclaimed / 1e6:.0f} MB); {res.kept} container(s) still owned by live processes"
    )


def _summary(name: str, runtime: str, cfg) -> tuple[str, bool, str]:
    """(name, works, the one thing to do) of one provider on this host (its doctor's first failed check)."""
    from ..sandbox import get_provider

    label = name if runtime == "runc" else f"{name} ({runtime})"
    try:
        checks = get_provider(name).doctor(cfg.model_copy(update={"provider": name, "runtime": runtime}))
    except Exception as e:  # noqa: BLE001 - a provider that cannot even be asked does not work here
        return label, False, escape(f"{e.__class__.__name__}: {e}")
    failed = next((c for c in checks if not c.ok and not c.advisory), None)
    if failed is None:
        note = next((c for c in checks if not c.ok), None)
        return label, True, "" if note is None else f"{escape(note.name)}: {escape(note.detail)}\n" \
                                                     f"[yellow]for more:[/yellow] {escape(note.fix)}"
    return label, False, f"{escape(failed.name)}: {escape(failed.detail)}\n[yellow]do:[/yellow] {escape(failed.fix)}"


@sandbox_app.command("doctor")
@config_flags("doctor")
def doctor_cmd(config: ConfigOpt = None, *, overrides: dict[str, Any]) -> None:
    """List every sandbox provider (and gVisor as a runtime), whether it works on this host and the one
    thing to do when it does not; then every check of the configured provider on a real test box. With
    --sandbox-provider or --sandbox-runtime: the checks of that provider only."""
    from ..sandbox.base import PROVIDERS

    try:
        cfg = _load(config, overrides).sandbox
    except FteError as e:
        _fail(e)
        return
    if not overrides.get("sandbox"):  # no provider asked for: the overview first
        summary = Table(show_header=True, header_style="bold", title="sandbox providers on this host")
        summary.add_column("provider")
        summary.add_column("works")
        summary.add_column("what to do")
        for name in PROVIDERS:
            for runtime in ("runc", "runsc") if name in ("docker", "podman") else ("runc",):
                label, ok, todo = _summary(name, runtime, cfg)
                summary.add_row(label, "[green]yes[/green]" if ok else "[red]no[/red]", todo)
        _out.print(summary)
    try:
        checks = _provider(cfg).doctor(cfg)
    except FteError as e:
        _fail(e)
        return
    which = "asked for" if overrides.get("sandbox") else "configured"
    table = Table(show_header=True, header_style="bold",
                  title=f"{which}: {cfg.provider}" + (f" ({cfg.runtime})" if cfg.runtime != "runc" else ""))
    table.add_column("check")
    table.add_column("result")
    table.add_column("detail / fix")
    for c in checks:
        detail = c.detail if c.ok else f"{c.detail}\n[yellow]fix:[/yellow] {escape(c.fix)}"
        result = "[green]ok[/green]" if c.ok else "[yellow]note[/yellow]" if c.advisory else "[red]FAIL[/red]"
        table.add_row(c.name, result, detail)
    _out.print(table)
    if not all(c.ok or c.advisory for c in checks):
        raise typer.Exit(1)


@config_flags("shell")
def shell(
    config: ConfigOpt = None,
    *,
    overrides: dict[str, Any],
) -> None:
    """Open an interactive terminal in a fresh sandbox (same limits and helpers as the agent's).

    `search` and `fetch` work when a search backend is configured (Serper key or local corpus). Leaving
    the shell (exit or Ctrl-D) removes the box.
    """
    from ..sandbox import Sandbox

    try:
        cfg = _load(config, overrides)
        scfg = cfg.sandbox
        from ..world import World

        try:
            world = World.from_config(cfg, pages=False)  # with [snapshot] dir: the snapshot's pages and searches
        except FteError as e:
            _err.print(f"[yellow]note:[/yellow] no search backend ({escape(str(e))})")
            world = World()
        with world, world.bind(None, None) as run_world, Sandbox(scfg, world=run_world) as sb:
            argv = sb.box.terminal_argv({"PS1": "sandbox:\\w\\$ ", "TERM": "xterm"})
            _err.print(
                f"[bold]fte-shell sandbox[/bold] {sb.container_id[:12]}: no network, /work read-only "
                f"(host: {sb.workspace}), scratch in /tmp; type exit to leave"
            )
            prev = signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C belongs to the shell inside
            try:
                subprocess.call(argv)
            finally:
                signal.signal(signal.SIGINT, prev)
            if scfg.keep_workspace and scfg.workspace_dir is None:
                _err.print(f"workspace kept at {sb.workspace}")
    except FteError as e:
        _fail(e)


def register(app: typer.Typer) -> None:
    """Add ``sandbox`` (build, rebuild, gc, doctor) and the top-level ``shell`` command."""
    app.add_typer(sandbox_app, name="sandbox")
    app.command("shell")(shell)
