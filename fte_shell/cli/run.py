"""CLI commands: ``fte-shell run "QUESTION"`` (one question, live log, run directory) and
``fte-shell demo`` (the whole pipeline offline, driven by a scripted policy).

Configuration precedence for ``run``: built-in defaults < the ``--config`` TOML file < environment
variables (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``, ``OPENAI_MODEL``, ``SERPER_API_KEY``) < flags.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel

from ..errors import ConfigError, FteError, SandboxUnavailable, SearchUnavailable
from .options import config_flags

_out = Console(highlight=False)
_err = Console(stderr=True, highlight=False)

PREVIEW_LINES = 8
PREVIEW_CHARS = 600

def preview(text: str, lines: int = PREVIEW_LINES, chars: int = PREVIEW_CHARS) -> str:
    """The first ``lines`` lines / ``chars`` characters of an observation, with a note of what is left."""
    all_lines = text.splitlines()
    shown = "\n".join(all_lines[:lines])
    if len(shown) > chars:
        shown = shown[:chars] + "…"
    rest = len(all_lines) - min(lines, len(all_lines))
    if rest > 0:
        shown += f"\n… {rest} more line{'s' if rest != 1 else ''}"
    return shown


@contextlib.contextmanager
def run_exits(partial: str) -> Iterator[None]:
    """How a run's command ends when the run does not: Ctrl-C exits 130 saying where the partial run is
    (``partial``); an :class:`FteError` is printed and exits 2 when the set-up the user gave cannot work
    (a config error, a search backend that cannot be used, e.g. ``--search serper`` without a key), else 1."""
    try:
        yield
    except KeyboardInterrupt:
        _err.print(f"[yellow]interrupted[/yellow]; {partial}")
        raise typer.Exit(130) from None
    except FteError as e:
        _err.print(f"[red]error:[/red] {escape(str(e))}", soft_wrap=True)
        raise typer.Exit(2 if isinstance(e, ConfigError | SearchUnavailable) else 1) from None


def _meta_facts(meta: dict[str, Any]) -> list[str]:
    """Short notes from a tool call's meta (exit status, timeout, truncation) for the log line."""
    facts = []
    if meta.get("timed_out"):
        facts.append("timed out")
    elif meta.get("exit_code") not in (0, None):
        facts.append(f"exit {meta['exit_code']}")
    if meta.get("truncated"):
        facts.append("output truncated")
    if meta.get("restarted"):
        facts.append("shell restarted")
    reader = meta.get("summary_usage")
    if isinstance(reader, dict) and reader.get("total_tokens"):
        facts.append(f"reader model {reader['total_tokens']:,} tokens")
    return facts


def _indent(text: str, pad: str = "    ") -> str:
    return "\n".join(pad + line for line in text.splitlines())


class EventPrinter:
    """Prints trajectory events as a readable live log (turn numbers, tokens, each tool call and a short
    preview of its observation)."""

    def __init__(self, console: Console | None = None):
        self.console = console or _out
        self.tokens = 0
        """Tokens of the run's model calls so far."""
        self.cost_usd: float | None = None
        """USD so far (None: no call had a price)."""
        self._model: str | None = None
        self._said_no_price = False

    def __call__(self, ev: dict[str, Any]) -> None:
        """Print one event (a dict of the trajectory); an event type it does not know prints nothing."""
        show = getattr(self, f"_on_{ev.get('type')}", None)
        if show is not None:
            show(ev)

    def _on_start(self, ev: dict[str, Any]) -> None:
        c = self.console
        c.print(f"[bold]Question:[/bold] {escape(str(ev.get('question')))}")
        wire = " · Responses API" if ((ev.get("config") or {}).get("model") or {}).get("api") == "responses" else ""
        c.print(f"[dim]profile {ev.get('profile')} · model {ev.get('model')}{wire} · "
                f"{len(ev.get('tools') or [])} tool(s)[/dim]")
        self.tokens, self.cost_usd, self._model, self._said_no_price = 0, None, ev.get("model"), False

    def _on_model_call(self, ev: dict[str, Any]) -> None:
        from ..model.prices import usd
        c = self.console
        u = ev.get("usage") or {}
        self.tokens += int(u.get("total_tokens") or 0)
        cost = ev.get("cost_usd")
        if isinstance(cost, (int, float)):
            self.cost_usd = (self.cost_usd or 0.0) + cost
        so_far = f"so far {self.tokens:,} tokens" + (f", {usd(self.cost_usd)}" if self.cost_usd is not None else "")
        c.print(
            f"[bold cyan]turn {ev.get('turn')}[/bold cyan] [dim]{ev.get('latency_s', 0):.2f} s · "
            f"tokens {u.get('prompt_tokens', 0):,} in / {u.get('completion_tokens', 0):,} out"
            f"{f' · {usd(cost)}' if isinstance(cost, (int, float)) else ''} · {so_far}[/dim]"
        )
        if cost is None and not self._said_no_price:
            self._said_no_price = True
            note = f"no price known for model {self._model}: tokens only (set [model.price] in USD per million tokens)"
            c.print(f"  [dim]{escape(note)}[/dim]")
        content = (ev.get("message") or {}).get("content")
        if content and content.strip():
            c.print(f"[italic]{escape(_indent(preview(content.strip(), 4, 400), '  '))}[/italic]")

    def _on_tool_call(self, ev: dict[str, Any]) -> None:
        args = ev.get("arguments")
        if ev.get("name") == "bash" and isinstance(args, dict) and "command" in args:
            head = f"$ {args['command']}"
        else:
            shown = json.dumps(args, ensure_ascii=False) if args is not None else ev.get("raw_arguments")
            head = f"{ev.get('name')}({shown})"
        style = "red" if ev.get("error") else "green"
        facts = [f"{ev.get('duration_s', 0):.2f} s", *_meta_facts(ev.get("meta") or {})]
        self.console.print(f"  [{style}]▶[/{style}] [bold]{escape(head)}[/bold] [dim]({', '.join(facts)})[/dim]")
        body = preview(str(ev.get("observation") or ""))
        if body:
            self.console.print(f"[{'red' if ev.get('error') else 'dim'}]{escape(_indent(body))}[/]")

    def _on_nudge(self, ev: dict[str, Any]) -> None:
        if ev.get("kind") == "reply_cut":
            self.console.print("  [yellow]the reply was cut at max_tokens: told the model so[/yellow]")
        elif ev.get("kind") == "stuck":
            self.console.print(f"  [yellow]the same {escape(str(ev.get('tool')))} call with the same observation "
                               f"{ev.get('repeats')} times in a row: told the model (one more stops the run)[/yellow]")
        else:
            self.console.print("  [yellow]no tool call and no <answer>: nudged the model[/yellow]")

    def _on_retry(self, ev: dict[str, Any]) -> None:
        self.console.print(
            f"  [yellow]retry {ev.get('attempt')} of the model call to {escape(str(ev.get('endpoint')))} "
            f"in {ev.get('delay_s', 0):.1f} s:[/yellow] {escape(str(ev.get('error')))}"
        )

    def _on_warning(self, ev: dict[str, Any]) -> None:
        self.console.print(f"  [yellow]warning:[/yellow] {escape(str(ev.get('message')))}")

    def _on_text_tool_call(self, ev: dict[str, Any]) -> None:
        what = "executing" if ev.get("executed") else "not executed (model.parse_text_tool_calls is off)"
        names = ", ".join(str(x.get("name")) for x in ev.get("calls") or [])
        self.console.print(
            f"  [yellow]tool call(s) written as text in the {ev.get('source')}: {escape(names)} — {what}[/yellow]")

    def _on_context_edit(self, ev: dict[str, Any]) -> None:
        what = f"{ev.get('note')}; " if ev.get("note") else ""
        self.console.print(
            f"  [magenta]context {escape(str(ev.get('strategy')))}: {escape(what)}{ev.get('messages_before')} → "
            f"{ev.get('messages_after')} messages, about {ev.get('tokens_before', 0):,} → "
            f"{ev.get('tokens_after', 0):,} tokens[/magenta]")

    def _on_resume(self, ev: dict[str, Any]) -> None:
        if ev.get("equal"):
            self.console.print(f"  [green]resumed at turn {ev.get('turn')} (resume {ev.get('count')}): the replayed "
                               f"state equals the record; going on live[/green]")
        else:
            self.console.print(f"  [yellow]redone from scratch: {escape('; '.join(ev.get('mismatches') or []))}[/yellow]")

    def _on_final_answer_request(self, ev: dict[str, Any]) -> None:
        self.console.print("  [yellow]context window full: asked the model for its final answer[/yellow]")

    def _on_error(self, ev: dict[str, Any]) -> None:
        self.console.print(f"  [red]error:[/red] {escape(str(ev.get('message')))}")

    def _on_end(self, ev: dict[str, Any]) -> None:
        self.console.print(f"[dim]stopped: {ev.get('stop_reason')} after {ev.get('turns')} turn(s), "
                           f"{ev.get('wall_s', 0):.1f} s[/dim]")


def default_out_dir(question: str, root: Path = Path("runs")) -> Path:
    """``runs/<UTC timestamp>-<slug of the question>``."""
    from ..episode import slugify

    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%d-%H%M%S")
    return root / f"{stamp}-{slugify(question)}"


def describe_search(cfg: Any) -> str:
    """One line saying which search backend the run will use, and why (its plugin's own words)."""
    from ..search.registry import selected

    return selected(cfg.search).describe(cfg.search)


def _print_result(result: Any, run_dir: Path) -> None:
    from ..model.prices import usd
    if result.answer is not None:
        _out.print(Panel(escape(result.answer), title="answer", expand=False, border_style="green"))
    else:
        from ..stops import is_infra_failure

        note = " — an infrastructure failure, not a result (see the error in trajectory.jsonl)" if is_infra_failure(result.stop_reason) else ""
        _out.print(f"[yellow]No answer: the run stopped with '{result.stop_reason}'{note}.[/yellow]")
    u = result.usage
    calls = ", ".join(f"{k} {v}" for k, v in sorted(result.tool_calls.items())) or "none"
    reader = result.summary_usage.get("total_tokens", 0)
    reader_note = f" · reader model tokens {reader:,} (apart)" if reader else ""
    if result.context != "keep_all":
        reader_note += f" · context {result.context}"
    _out.print(
        f"[dim]{result.turns} turn(s) · tool calls: {calls} · tokens {u.get('total_tokens', 0):,} "
        f"({u.get('prompt_tokens', 0):,} in / {u.get('completion_tokens', 0):,} out){reader_note} · "
        f"{'' if result.cost_usd is None else usd(result.cost_usd) + ' · '}{result.wall_s:.1f} s[/dim]"
    )
    ws = run_dir / "workspace"
    n = len(list(ws.glob("*.txt"))) if ws.is_dir() else 0
    _out.print(f"run directory: {run_dir}  (trajectory.jsonl, result.json, workspace/ with {n} file(s))")


EXIT_CODES: dict[str, int] = {"auth": 4, "bad_request": 5}
"""Exit status of ``fte-shell run`` for a run that ended on an infrastructure failure (docs/run.md):
4 auth (HTTP 401/403), 5 bad_request (the server refused the request), 3 any other (endpoint_unavailable,
model_error, sandbox_unavailable, search_unavailable). Result stops (an answer, max_turns,
context_overflow, …) exit 0."""


def exit_code(stop_reason: str) -> int:
    """The exit status for a finished run's stop reason (0 for every result stop)."""
    from ..stops import is_infra_failure

    if stop_reason == "interrupted":
        return 130
    if not is_infra_failure(stop_reason):
        return 0
    return EXIT_CODES.get(stop_reason, 3)


def register(app: typer.Typer) -> None:
    """Add ``run`` and ``demo`` to the root app."""

    @app.command("run")
    @config_flags("run")
    def run_cmd(
        question: Annotated[str, typer.Argument(help="The question to answer.")],
        config: Annotated[Path | None, typer.Option("--config", "-c", help="TOML file ([model], [agent], [sandbox], [search], [snapshot]).")] = None,
        out: Annotated[Path | None, typer.Option("--out", "-o", help="Run directory (default `runs/<timestamp>-<slug>`).")] = None,
        quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print only the answer and the run directory.")] = False,
        *,
        overrides: dict[str, Any],
    ) -> None:
        """Answer QUESTION with a real model: live log of every tool call, then the answer and the run
        directory (trajectory.jsonl, result.json, workspace/)."""
        from ..config import load_config
        from ..model import resolve_endpoint
        from ..runner import run_question

        try:
            cfg = load_config(config, overrides)
            resolve_endpoint(cfg.model)  # stop at once, before any container, when there is no endpoint
        except FteError as e:
            _err.print(f"[red]error:[/red] {escape(str(e))}", soft_wrap=True)
            raise typer.Exit(2) from None
        run_dir = out if out is not None else default_out_dir(question)
        if not quiet:
            _err.print(f"[dim]{escape(describe_search(cfg))}[/dim]", soft_wrap=True)
            if cfg.snapshot.dir is not None:
                _err.print(f"[dim]snapshot: {escape(str(cfg.snapshot.dir))} ({cfg.snapshot.mode}"
                           f"{'; nothing is fetched or searched live' if cfg.snapshot.mode == 'replay' else ''})[/dim]")
        with run_exits(f"the partial run is in {run_dir}"):
            result = run_question(question, cfg, run_dir, log=None if quiet else EventPrinter())
        _print_result(result, run_dir)
        code = exit_code(result.stop_reason)
        if code:
            raise typer.Exit(code)

    @app.command("demo")
    @config_flags("demo")
    def demo_cmd(
        out: Annotated[Path | None, typer.Option("--out", "-o", help="Directory for the run directories (default `runs/demo-<timestamp>`).")] = None,
        question: Annotated[
            list[str] | None, typer.Option("--question", help="Ask this instead of the built-in questions (repeatable).")
        ] = None,
        corpus_dir: Annotated[
            Path | None, typer.Option("--corpus-dir", help="Where the stdlib-docstring corpus is built/cached.")
        ] = None,
        *,
        overrides: dict[str, Any],
    ) -> None:
        """Run the whole pipeline offline, with no key: the real sandbox, gateway, local-corpus search, fetch
        and workspace, driven by a SCRIPTED research policy (not a language model)."""
        from ..demo import DEMO_QUESTIONS, run_demo

        root = out if out is not None else Path("runs") / ("demo-" + _dt.datetime.now(_dt.UTC).strftime("%Y%m%d-%H%M%S"))
        questions = [(q, None) for q in question] if question else list(DEMO_QUESTIONS)
        profile = overrides.get("agent", {}).get("profile", "shell")
        try:
            results = run_demo(questions, root, profile=profile, corpus_dir=corpus_dir, console=_out, log=EventPrinter(),
                               sandbox=overrides.get("sandbox"))
        except KeyboardInterrupt:
            _err.print(f"[yellow]interrupted[/yellow]; partial runs are under {root}")
            raise typer.Exit(130) from None
        except FteError as e:
            _err.print(f"[red]error:[/red] {escape(str(e))}", soft_wrap=True)
            if isinstance(e, SandboxUnavailable) and profile == "shell":
                _err.print("hint: `fte-shell demo --profile fte` runs the same pipeline without a container")
            raise typer.Exit(1) from None
        if any(r.answer is None for r in results):
            raise typer.Exit(1)
