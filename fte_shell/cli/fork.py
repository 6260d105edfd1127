"""CLI command ``fte-shell fork RUN_DIR --at-turn K --out DIR [-n N] [run flags]``: new runs whose first K
turns are the parent's, replayed without the model against its snapshot and checked, then continued live
(:func:`fte_shell.runner.fork_run`; docs/run.md "Fork a run").

Configuration: the parent's (its start event) < ``--config FILE`` < the API keys of the environment
(``OPENAI_API_KEY``, ``SERPER_API_KEY``) < flags. The profile, the date in the system prompt and the
snapshot are the parent's unless a flag says otherwise (the profile never changes).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from ..errors import ConfigError, FteError
from .options import config_flags

_out = Console(highlight=False)
_err = Console(stderr=True, highlight=False)


def register(app: typer.Typer) -> None:
    """Add ``fork`` to the root app."""
    app.command("fork")(config_flags("fork")(fork_cmd))


def fork_cmd(
    run_dir: Annotated[Path, typer.Argument(help="The parent: a finished run directory recorded with a snapshot.")],
    at_turn: Annotated[int, typer.Option("--at-turn", "-k", help="Replay the parent's first K turns (no model call), then go on live.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="The fork's run directory; with -n N > 1, the directory of its children c1 … cN.")],
    n: Annotated[int, typer.Option("-n", help="Forks to make, each replayed and continued on its own.")] = 1,
    config: Annotated[Path | None, typer.Option("--config", "-c", help="TOML file over the parent's configuration.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only each fork's answer and run directory.")] = False,
    *,
    overrides: dict[str, Any],
) -> None:
    """Fork RUN_DIR at turn K: each fork replays the parent's first K turns without calling the model (the
    recorded replies re-applied, the recorded tool calls run again against the parent's snapshot), checks
    that its conversation, workspace and shell state equal the parent's, then goes on live with the model
    and the flags given (e.g. `--context`, `--model`, `--max-turns`). The parent is never written."""
    from ..episode.fork import Parent, child_config, describe
    from ..model import resolve_endpoint
    from ..runner import fork_run
    from .run import EventPrinter, _print_result, exit_code, run_exits

    if n < 1:
        raise _fail(ConfigError(f"-n must be >= 1 (got {n})"))
    try:
        parent = Parent.read(run_dir)
        cfg = child_config(parent, overrides, config)
        parent.replies(at_turn)
        resolve_endpoint(cfg.model)
    except FteError as e:
        raise _fail(e) from None
    dirs = [out] if n == 1 else [out / f"c{i}" for i in range(1, n + 1)]
    codes = []
    for d in dirs:
        if not quiet:
            _err.print(f"[dim]fork of {escape(str(run_dir))} at turn {at_turn} → {escape(str(d))}; "
                       f"turns 1–{at_turn} replayed without the model[/dim]")
        with run_exits(f"the partial fork is in {d}"):
            result = fork_run(run_dir, at_turn, d, config=cfg, log=None if quiet else EventPrinter())
        if result.forked_from is not None:
            style = "green" if result.forked_from.get("equal") else "red"
            _out.print(f"[{style}]{escape(describe(result.forked_from))}[/{style}]", soft_wrap=True)
        _print_result(result, d)
        codes.append(exit_code(result.stop_reason))
    if any(codes):
        raise typer.Exit(max(codes))


def _fail(e: Exception) -> typer.Exit:
    _err.print(f"[red]error:[/red] {escape(str(e))}", soft_wrap=True)
    return typer.Exit(2)
