"""``fte-shell demo``: the whole pipeline, offline and with no key.

The REAL sandbox (for the shell profile), gateway, local-corpus search, fetch pipeline and workspace run
end to end; the only thing scripted is the "model": :class:`fte_shell.standins.research.ResearchPolicy` served
by :class:`fte_shell.standins.server.ScriptedServer` on loopback and reached through the real ``openai``
client. The corpus is built on the fly from the Python standard library's docstrings
(:func:`fte_shell.search.pydoc_corpus.build_pydoc_corpus`), so the questions have real answers.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from .config import RunConfig
from .record.rundir import EventListener

if TYPE_CHECKING:  # pragma: no cover
    from .episode import RunResult

DEMO_QUESTIONS: tuple[tuple[str, str | None], ...] = (
    ("Which function in the json module serializes an object to a JSON formatted str?", "json.dumps"),
    ("Which function in the textwrap module removes common leading whitespace from every line?", "textwrap.dedent"),
)
"""(question, expected answer) pairs whose answers are in the stdlib-docstring corpus."""

SCRIPTED_MODEL = "scripted-research-policy"

SCRIPTED_NOTICE = (
    "The model in this demo is SCRIPTED: a deterministic research policy "
    "(fte_shell.standins.research.ResearchPolicy) "
    "served by a loopback OpenAI-compatible server and called through the real openai client. Everything "
    "else is real: {what}, local-corpus search (Python stdlib docstrings), the fetch pipeline and the "
    "workspace. Give a real model with `fte-shell run --base-url URL --model NAME \"QUESTION\"`."
)


def default_corpus_dir() -> Path:
    """``$XDG_CACHE_HOME/fte-shell/pydoc-corpus`` (``~/.cache/…`` by default)."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "fte-shell" / "pydoc-corpus"


def demo_config(base_url: str, corpus: Path, profile: str, sandbox: dict[str, Any] | None = None) -> RunConfig:
    """The demo's configuration: the scripted endpoint, the local corpus (ranked by bm25s), ``profile``, a short
    turn cap, and the ``[sandbox]`` settings given (e.g. ``{"provider": "podman"}`` from ``--sandbox-provider``)."""
    return RunConfig.model_validate(
        {
            "model": {"base_url": base_url, "model": SCRIPTED_MODEL, "max_retries": 1},
            "agent": {"profile": profile, "max_turns": 20},
            # bm25s: the demo needs no extra (bm25 drives Lucene on a JDK: the lucene extra)
            "search": {"backend": "local", "corpus": str(corpus), "retriever": "bm25s", "num_results": 5},
            "sandbox": dict(sandbox or {}),
        }
    )


def run_demo(
    questions: Sequence[tuple[str, str | None]],
    out_root: Path,
    *,
    profile: str = "shell",
    corpus_dir: Path | None = None,
    console: Console | None = None,
    log: EventListener | None = None,
    sandbox: dict[str, Any] | None = None,
) -> list[RunResult]:
    """Answer ``questions`` with the scripted policy; one run directory per question under ``out_root``
    (``01-<slug>``, …). Prints what it does to ``console``; ``log`` gets every trajectory event."""
    from .episode import slugify
    from .runner import run_question
    from .search.pydoc_corpus import build_pydoc_corpus
    from .standins.research import ResearchPolicy
    from .standins.server import ScriptedServer
    from .workspace import Workspace

    c = console or Console(highlight=False)
    corpus = Path(corpus_dir) if corpus_dir is not None else default_corpus_dir()
    provider = (sandbox or {}).get("provider", "docker")
    kind = "Docker" if provider == "docker" else provider
    what = (f"the hardened {kind} sandbox with its bash session and gateway" if profile == "shell"
            else f"the '{profile}' profile's tools")
    c.print(f"[bold yellow]{escape(SCRIPTED_NOTICE.format(what=what))}[/bold yellow]\n")
    c.print(f"[dim]local corpus: {corpus} (built from the stdlib docstrings on first use, then reused)[/dim]")
    corpus = build_pydoc_corpus(corpus)
    results: list[RunResult] = []
    with ScriptedServer(policy=ResearchPolicy(), model=SCRIPTED_MODEL) as srv:
        cfg = demo_config(srv.base_url, corpus, profile, sandbox)
        for i, (question, expected) in enumerate(questions, 1):
            run_dir = Path(out_root) / f"{i:02d}-{slugify(question)}"
            c.rule(f"question {i} of {len(questions)}")
            result = run_question(question, cfg, run_dir, log=log)
            results.append(result)
            verdict = ""
            if expected is not None and result.answer is not None:
                ok = result.answer.strip().lower() == expected.lower()
                verdict = " [green](matches the expected answer)[/green]" if ok else f" [red](expected {escape(expected)})[/red]"
            c.print(f"[bold]answer:[/bold] {escape(str(result.answer))}{verdict}")
            c.print(f"[bold]kept workspace[/bold] {run_dir / 'workspace'}:")
            listing = Workspace(run_dir / "workspace").listing_text()
            c.print(escape("\n".join("    " + line for line in listing.splitlines())))
            c.print(f"[dim]run directory: {run_dir} (trajectory.jsonl, result.json, workspace/)[/dim]\n")
    c.print("[bold yellow]Reminder: the answers above came from a scripted policy, not a language model.[/bold yellow]")
    return results
