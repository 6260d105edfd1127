"""The ``fte-shell`` command line (typer + rich). Each command group lives in its own module and
registers itself on the root app through ``register(app)``."""

from __future__ import annotations

import typer

from . import bench as _bench
from . import corpus as _corpus
from . import corpus_serve as _corpus_serve  # noqa: F401 - adds `corpus serve` to corpus_app
from . import export as _export
from . import fork as _fork
from . import mcp as _mcp
from . import retrieval as _retrieval
from . import run as _run
from . import sandbox as _sandbox
from . import snapshot as _snapshot
from . import view as _view

app = typer.Typer(
    name="fte-shell",
    help=(
        "A sandboxed shell-environment search agent. Each question gets a fresh, hardened box with no "
        "network (a Docker or podman container, or a bubblewrap sandbox: `--sandbox-provider`); the model "
        "drives one persistent bash session in it, where `search` lists results and `fetch URL` saves whole "
        "pages under /work for grep/sed/head to explore."
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode="markdown",
)

for _mod in (_run, _sandbox, _corpus, _retrieval, _bench, _snapshot, _view, _export, _fork, _mcp):
    _mod.register(app)


@app.command("config")
def config_reference() -> None:
    """Print every configuration option with its default and meaning, as a TOML file that --config
    accepts (save it, then edit what you need: `fte-shell config > fte.toml`)."""
    from ..config import reference_toml

    typer.echo(reference_toml(), nl=False)


def main() -> None:
    """Console-script entry point."""
    app()
