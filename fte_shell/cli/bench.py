"""CLI commands: ``fte-shell bench`` (resumable dataset sweeps over several profiles), ``fte-shell judge``
(grading presets: a judge model's prompt family or a model-free rule; ``--compare`` for judge agreement) and ``fte-shell report``
(Markdown + self-contained HTML with tables and plots). Details: docs/bench.md, docs/metrics.md."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from ..benchmarks.registry import BENCHMARKS, PRESETS
from ..errors import FteError
from ..record.jsonio import DiskFull
from ..record.sweepdir import SweepDir
from .options import config_flags, sweep_flags

DATASET_HELP = " | ".join(b.summary.split(" — ")[0] for b in BENCHMARKS.values()) + " | a path."
MODEL_PRESETS = ", ".join(name for name, p in PRESETS.items() if p.prompt)

_out = Console(highlight=False)
_err = Console(stderr=True, highlight=False)


def _fail(e: Exception, code: int | None = None) -> typer.Exit:
    """Print ``e`` in one line; exit 3 when a resource gave out (a full disk), else ``code`` (default 2)."""
    _err.print(f"[red]error:[/red] {escape(str(e))}", soft_wrap=True)
    return typer.Exit(code if code is not None else 3 if isinstance(e, DiskFull) else 2)


@contextlib.contextmanager
def _scripted_endpoint(enabled: bool) -> Iterator[str | None]:
    """A loopback scripted server running the deterministic research policy (``--scripted``)."""
    if not enabled:
        yield None
        return
    from ..standins.research import ResearchPolicy
    from ..standins.server import ScriptedServer

    with ScriptedServer(policy=ResearchPolicy()) as srv:
        yield srv.base_url


def register(app: typer.Typer) -> None:
    """Add ``bench``, ``judge`` and ``report`` to the root app."""
    app.command("bench")(config_flags("bench")(sweep_flags(bench_cmd)))
    app.command("judge")(config_flags("judge")(judge_cmd))
    app.command("report")(report_cmd)


def bench_cmd(
    dataset: Annotated[str | None, typer.Argument(help=DATASET_HELP + " Not with --fork-from (the parent's).")] = None,
    config: Annotated[Path | None, typer.Option("--config", "-c", help="TOML file ([model], [agent], [sandbox], [search], [snapshot]).")] = None,
    scripted: Annotated[bool, typer.Option("--scripted", help="No model: drive every run with the deterministic research policy on a loopback server.")] = False,
    judge: Annotated[bool, typer.Option("--judge/--no-judge", help="Grade the runs when the sweep ends, without a model: --judge-preset if model-free, else the dataset's rule, else exact match + F1.")] = True,
    progress: Annotated[bool, typer.Option("--progress/--no-progress", help="Show the progress bar.")] = True,
    ray: Annotated[str | None, typer.Option("--ray", help="Run every run as a task on a Ray cluster: auto or ADDRESS (docs/distributed.md; needs the ray extra).")] = None,
    *,
    sweep: dict[str, Any],
    overrides: dict[str, Any],
) -> None:
    """Run every question of DATASET with every profile (and --runs repetitions), each into its own run
    directory `OUT/runs/<profile>/<qid>/r<k>/` (with --context, an arm per profile and context strategy:
    `OUT/runs/<profile>@<strategy>/…` for strategies other than keep_all). Rerunning the same command
    resumes: finished runs are skipped, partial ones redone. Search results and fetched pages are shared by
    all profiles. With --fork-from SWEEP --at-turn K: every run of SWEEP forked at turn K (its first K turns
    replayed without the model), then continued with the flags given — a paired "same prefix, different X"
    study."""
    from ..config import load_config
    from ..model import resolve_endpoint

    try:
        bench = _bench_config(dataset, sweep)
    except (ValueError, FteError) as e:
        raise _fail(e) from None
    with _scripted_endpoint(scripted) as scripted_url:
        flags = overrides
        if scripted_url:  # the scripted server stands in for whatever endpoint was given
            flags = {**overrides, "model": {**overrides.get("model", {}), "base_url": scripted_url,
                                            "model": "scripted", "api_key": "none"}}
        try:
            cfg = load_config(config, flags) if bench.fork_from is None else _fork_config(bench, config, flags)
            resolve_endpoint(cfg.model)
            _model_free_preset(cfg.judge.preset) if judge else None
        except FteError as e:
            raise _fail(e) from None
        try:
            executor = None
            if ray:
                from ..distributed import RayExecutor

                executor = RayExecutor(address=ray)
            stats = _run_with_progress(bench, cfg, progress, executor)
        except KeyboardInterrupt:  # outside the sweep's own handling (set-up, a second Ctrl-C)
            _err.print("[yellow]interrupted[/yellow]; rerun the same command to resume")
            raise typer.Exit(130) from None
    _print_stats(stats, cfg, bench.out)
    if stats.interrupted:
        raise typer.Exit(130)
    if judge:
        _judge_model_free(bench.out, cfg.judge.preset)
    if stats.gave_up:
        raise typer.Exit(3)
    if stats.budget_reached:
        raise typer.Exit(4)
    if stats.pending:
        raise typer.Exit(1)


def _bench_config(dataset: str | None, sweep: dict[str, Any]) -> Any:
    """The sweep's options: DATASET's, or with ``--fork-from`` the parent sweep's (fte_shell.sweep.fork)."""
    from ..errors import ConfigError
    from ..sweep import BenchConfig

    if sweep.get("fork_from") is None:
        if dataset is None:
            raise ConfigError("give the DATASET to run (or --fork-from SWEEP --at-turn K to fork a sweep's runs)")
        return BenchConfig(dataset=dataset, **sweep)
    if dataset is not None:
        raise ConfigError(f"--fork-from takes the parent sweep's questions: leave out the DATASET ({dataset})")
    from ..sweep.fork import fork_bench

    return fork_bench(sweep)


def _fork_config(bench: Any, config: Path | None, flags: dict[str, Any]) -> Any:
    from ..sweep.fork import fork_config

    return fork_config(bench, config, flags)


def _print_stats(stats: Any, cfg: Any, out: Path) -> None:
    """What one ``bench`` invocation did: runs, infrastructure failures, outages, what it spent, and why
    it stopped early (a budget, an interrupt, infrastructure that stayed away)."""
    _out.print(
        f"{stats.done} run(s) finished now ({stats.answered} answered), {stats.failed} infrastructure "
        f"failure(s) (not results), {stats.skipped} already done, {stats.redone} redone, of {stats.total}; "
        f"{stats.wall_s:.1f} s. Sweep: {out}", soft_wrap=True,
    )
    if stats.failed:
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(stats.failed_by_reason.items()))
        _out.print(f"[yellow]infrastructure failures ({reasons}) are listed in {SweepDir(out).failures_path}; "
                   f"{stats.pending} run(s) still without a result (rerunning the same command redoes them)[/yellow]", soft_wrap=True)
    if stats.outages:
        _out.print(f"paused {stats.outages} time(s) for unavailable infrastructure, {stats.outage_s:.0f} s in all")
    from ..model.prices import unknown_price_note, usd

    spent = (f"spent now: {stats.tokens:,} tokens" + (f", {usd(stats.cost_usd)}" if stats.cost_usd is not None
                                                      else f" ({unknown_price_note(cfg.model)})")
             + (f"; budget: {stats.budget}" if stats.budget else "")
             + (f"; HTTP 429s lowered the concurrency {stats.throttled} time(s), to {stats.concurrency_lowest} "
                f"at the lowest, {stats.concurrency} at the end" if stats.throttled else ""))
    _out.print(escape(spent), soft_wrap=True)
    if stats.budget_reached:
        _err.print(f"[yellow]budget reached[/yellow] ({stats.budget_reached}): {stats.pending} run(s) not started; "
                   f"rerun with a higher --max-cost / --max-tokens-total to resume", soft_wrap=True)
    if stats.interrupted:
        _err.print(f"[yellow]interrupted[/yellow]: {stats.lost} run(s) in flight were discarded; rerun to resume")
    if stats.gave_up:
        _err.print(f"[red]gave up[/red] ({stats.gave_up}): {stats.pending} run(s) without a result; rerun the "
                   f"same command to resume", soft_wrap=True)


def _judge_model_free(out: Path, preset: str | None) -> None:
    """``bench --judge``: grade the sweep without a model (the named preset or the dataset's, else exact
    match; notes say so)."""
    from ..record.rundir import find_runs
    from ..sweep.judge import judge_runs

    if not find_runs(out):  # no run started (judge_runs would call the sweep a wrong path): the exit code says why
        return
    try:
        js = judge_runs([out], preset)
    except FteError as e:
        raise _fail(e) from None
    if js.judged or js.cached:
        _out.print(f"model-free judge: {js.correct}/{js.judged + js.cached} correct ({', '.join(js.judges)})"
                   + (f" ({js.infra_failed} infrastructure failure(s) not judged)" if js.infra_failed else ""))


def judge_cmd(
    run_dirs: Annotated[list[Path], typer.Argument(help="Sweep directories or single run directories.")],
    judge_model: Annotated[str | None, typer.Option("--judge-model", help=f"Grading model (for a model preset: {MODEL_PRESETS}).")] = None,
    base_url: Annotated[str | None, typer.Option("--base-url", help="Grader endpoint (default OPENAI_BASE_URL).")] = None,
    api_key: Annotated[str | None, typer.Option("--api-key", help="Grader API key (prefer OPENAI_API_KEY).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Judge again even when judgement.json has this judge's verdict.")] = False,
    concurrency: Annotated[int, typer.Option("--concurrency", "-j", help="Grading calls in flight.")] = 8,
    compare: Annotated[bool, typer.Option("--compare", help="Print each judge's accuracy, Cohen's kappa of every pair of judges and the runs they disagree on (grades first only when --judge-model or --judge-preset is given).")] = False,
    *,
    overrides: dict[str, Any],
) -> None:
    """Judge every finished run against the gold answers of its sweep (questions.jsonl) with a grading
    preset (the dataset's default unless --judge-preset names another); each judge's verdicts are kept
    side by side in each run's judgement.json."""
    from ..benchmarks.llmjudge import LLMJudge, judge_model_config
    from ..sweep.judge import judge_runs

    preset_name = (overrides.get("judge") or {}).get("preset")
    if not compare or judge_model or preset_name:
        try:
            grader = LLMJudge(judge_model_config(judge_model, base_url=base_url, api_key=api_key)) if judge_model else None
            s = judge_runs(run_dirs, preset_name, judge=grader, force=force, concurrency=concurrency)
        except FteError as e:
            raise _fail(e) from None
        for note in s.notes:
            _err.print(f"[yellow]note:[/yellow] {escape(note)}", soft_wrap=True)
        total = s.judged + s.cached
        _out.print(f"{', '.join(s.judges) or 'no'} judge: {s.correct}/{total} correct ({s.judged} judged now, "
                   f"{s.cached} cached, {s.skipped} skipped: unfinished or no gold answer, {s.infra_failed} "
                   f"infrastructure failure(s): not results)", soft_wrap=True)
        for line in s.errors[:20]:
            _err.print(f"[red]failed:[/red] {escape(line)}", soft_wrap=True)
        if s.errors:
            raise typer.Exit(1)
    if compare:
        _print_agreement(run_dirs)


def report_cmd(
    run_dirs: Annotated[list[Path], typer.Argument(help="Sweep directories or single run directories.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Directory for report.md, report.html, metrics.json and PNGs.")],
    title: Annotated[str, typer.Option("--title", help="Report title.")] = "fte-shell benchmark report",
    order: Annotated[str | None, typer.Option("--order", help="Comma-separated profiles in the order their rows appear (default: shell, fte, the ablation arms, the baselines).")] = None,
) -> None:
    """Compute the behavioural metrics of every run and write the report (Markdown, one self-contained
    HTML page, metrics.json, PNG plots)."""
    from ..report.build import write_report
    from ..report.sections import main_table

    try:
        r = write_report(run_dirs, out, title=title,
                         order=[p.strip() for p in order.split(",") if p.strip()] if order else None)
    except FteError as e:
        raise _fail(e) from None
    from rich.table import Table

    head, rows = main_table(r.profiles)
    shown = ("Profile", "Model", "Runs", "Failed (infra)", "Accuracy", "95% CI (Wilson)", "#Search", "#Select",
             "#Extract", "Tokens", "Reader tokens", "Cost", "Cost/correct")
    keep = [head.index(c) for c in shown if c in head]  # Reader tokens, Cost: only when some run has them
    t = Table(*[head[i] for i in keep])
    for row in rows:
        t.add_row(*[row[i] for i in keep])
    _out.print(t)
    if r.arms:
        from ..report.arms import arms_table

        head, rows = arms_table(r.profiles, r.arms)
        keep = [head.index(c) for c in ("Arm", "Accuracy", "95% CI (Wilson)", "Tokens", "Cached prompt", "Cost",
                                        "Turns", "Overflow", "Edited")]
        t = Table(*[head[i] for i in keep], title="Context arms (report.md: stops, edits, behaviour at the edits)")
        for row in rows:
            t.add_row(*[row[i] for i in keep])
        _out.print(t)
    for w in r.warnings:
        _err.print(f"[yellow]warning:[/yellow] {escape(w)}", soft_wrap=True)
    _out.print(f"report: {r.html}  {r.markdown}  {r.metrics}  {r.per_question}")


def _model_free_preset(name: str | None) -> None:
    """``bench --judge-preset``: the preset exists and grades without a model (ConfigError otherwise)."""
    if name is None:
        return
    from ..benchmarks.registry import preset
    from ..errors import ConfigError

    if preset(name).needs_model:
        raise ConfigError(f"bench grades without a model; {name} needs one: run `fte-shell judge SWEEP "
                          f"--judge-preset {name} --judge-model M` after the sweep (or bench --no-judge)")


def _print_agreement(roots: list[Path]) -> None:
    """``judge --compare``: accuracy per judge, Cohen's kappa per pair, the runs judges disagree on."""
    from rich.table import Table

    from ..benchmarks.sections import ci, kappa, pct
    from ..metrics.judges import agreement, verdict_table

    a = agreement(verdict_table(roots))
    if not a.judges:
        _out.print("no verdicts to compare: run `fte-shell judge` first")
        return
    t = Table("Judge", "Judged", "Correct", "Accuracy", "95% CI (Wilson)", title="Accuracy per judge")
    for j in a.judges:
        t.add_row(j.judge, str(j.judged), str(j.correct), pct(j.accuracy), ci(j.accuracy_ci95))
    _out.print(t)
    if a.pairs:
        t = Table("Judge A", "Judge B", "Both judged", "Agree", "Cohen's kappa", title="Agreement per pair of judges")
        for p in a.pairs:
            t.add_row(p.a, p.b, str(p.n), str(p.agree), kappa(p.kappa))
        _out.print(t)
    _out.print(f"{len(a.disagreements)} run(s) with differing verdicts" + (":" if a.disagreements else ""))
    for run, row in a.disagreements.items():
        _out.print(f"  {escape(run)}  " + "  ".join(f"{escape(k)}={'correct' if v else 'wrong'}" for k, v in row.items()),
                   soft_wrap=True)


def _run_with_progress(bench: Any, cfg: Any, show: bool, executor: Any = None) -> Any:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from ..sweep import run_sweep

    def log(msg: str) -> None:
        _err.print(f"[dim]{escape(msg)}[/dim]", soft_wrap=True)

    if not show:
        try:
            return run_sweep(bench, cfg, log=log, remote=executor)
        except FteError as e:
            raise _fail(e) from None
    columns = [
        TextColumn("[bold]bench[/bold]"), BarColumn(), MofNCompleteColumn(),
        TextColumn("done {task.fields[done]} · infra-failed {task.fields[failed]} · answered {task.fields[answered]}"),
        TextColumn("· {task.fields[spent]} · -j {task.fields[concurrency]}"),
        TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
    ]
    with Progress(*columns, console=_err, transient=False) as prog:
        task_id = prog.add_task("bench", total=None, done=0, failed=0, answered=0, spent="0 tokens",
                                concurrency=bench.concurrency)

        def on_event(kind: str, task: Any, stats: Any) -> None:
            from ..model.prices import usd

            todo = stats.total - stats.skipped
            spent = f"{stats.tokens:,} tok" + (f" {usd(stats.cost_usd)}" if stats.cost_usd is not None else "")
            prog.update(task_id, total=todo, completed=stats.done, done=stats.done, failed=stats.failed,
                        answered=stats.answered, spent=spent, concurrency=stats.concurrency or bench.concurrency)

        try:
            return run_sweep(bench, cfg, on_event=on_event, log=log, remote=executor)
        except FteError as e:
            raise _fail(e) from None
