"""Sweeps as Inspect AI eval logs (docs/export.md, "Inspect AI"): one ``EvalLog`` per (dataset, arm,
model) cell — the task is the dataset, the solver the profile (its arguments name the context strategy;
an arm is a profile × strategy), each question a sample, repetitions epochs — written with inspect-ai's
``write_eval_log`` (``.eval`` or ``.json``). inspect-ai is imported lazily (the ``inspect`` extra)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

from ..config.base import StrictModel
from ..version import __version__
from .base import Exported, ExportError, Reads, missing_extra
from .common import Run, read_runs, records_frozen, safe_name, stable_id
from .inspect_sample import NOTE, sample, usage_of

FORMATS = ("eval", "json")


def require_inspect() -> None:
    """Raise :class:`ExportError` naming the extra when inspect-ai is not installed."""
    try:
        import inspect_ai.log  # noqa: F401
    except ImportError:
        raise missing_extra("inspect", "inspect-ai") from None


def cells(runs: Iterable[Run]) -> dict[tuple[str, str, str], list[Run]]:
    """Runs grouped by (dataset spec, arm, model), each cell's runs by question then repetition."""
    out: dict[tuple[str, str, str], list[Run]] = {}
    for r in runs:
        out.setdefault(r.cell, []).append(r)
    return {k: sorted(v, key=lambda r: (r.qid, r.rep)) for k, v in sorted(out.items())}


def _results(samples: list[Any]) -> Any:
    """Per score name: how many samples it scored and its mean (``accuracy`` for C/I verdicts)."""
    from inspect_ai.log import EvalMetric, EvalResults, EvalScore

    values: dict[tuple[str, str], list[float]] = {}
    for s in samples:
        for name, sc in (s.scores or {}).items():
            v = sc.value
            if isinstance(v, dict):
                for k, x in v.items():
                    values.setdefault((name, k), []).append(float(x))
            elif v in ("C", "I"):
                values.setdefault((name, "accuracy"), []).append(1.0 if v == "C" else 0.0)
            elif isinstance(v, int | float):
                values.setdefault((name, "mean"), []).append(float(v))
    scores = []
    for (name, metric), xs in sorted(values.items()):
        label = name if metric in ("accuracy", "mean") else f"{name}/{metric}"
        scores.append(EvalScore(name=label, scorer=name, scored_samples=len(xs),
                                unscored_samples=len(samples) - len(xs),
                                metrics={"mean" if metric not in ("accuracy",) else metric:
                                         EvalMetric(name="mean" if metric != "accuracy" else "accuracy",
                                                    value=sum(xs) / len(xs))}))
    completed = sum(1 for s in samples if s.error is None)
    return EvalResults(total_samples=len(samples), completed_samples=completed, scores=scores)


def eval_log(key: tuple[str, str, str], runs: list[Run], on_run: Callable[[Run], None] | None = None) -> Any:
    """One cell's ``EvalLog`` (ids and times from the record: the same runs give the same log);
    ``on_run`` is called after each run's sample is built."""
    from inspect_ai.log import EvalConfig, EvalDataset, EvalLog, EvalPlan, EvalPlanStep, EvalSpec, EvalStats
    from inspect_ai.model import GenerateConfig

    spec, arm, model = key
    first = runs[0]
    profile = first.profile
    solver_args = {"profile": profile, "context": first.context, "retriever": first.retriever,
                   "context_config": _context_config(first),
                   "config_digest": (first.result or {}).get("config_digest")}
    samples = []
    for r in runs:
        samples.append(sample(r))
        if on_run is not None:
            on_run(r)
    manifest = first.manifest
    cfg = (first.start.config if first.start else {}) or {}
    mcfg = cfg.get("model") or {}
    gen = GenerateConfig(temperature=mcfg.get("temperature"), top_p=mcfg.get("top_p"),
                         max_tokens=mcfg.get("max_tokens"), presence_penalty=mcfg.get("presence_penalty"))
    qids = sorted({r.qid for r in runs})
    reps = max(r.rep for r in runs) + 1
    started = min(s.started_at for s in samples)
    completed = max(s.completed_at for s in samples)
    usage: dict[str, Any] = {}
    for s in samples:
        for m, u in s.model_usage.items():
            usage[m] = usage[m] + u if m in usage else u
    ds = first.dataset
    eval_id = stable_id("eval", spec, arm, model, first.source)
    status = "cancelled" if manifest is not None and manifest.status == "interrupted" else "success"
    return EvalLog(
        status=status,
        eval=EvalSpec(
            eval_id=eval_id, run_id=stable_id("run", first.source), created=started, task=first.task,
            task_id=stable_id("task", spec, arm, model), task_version=0, task_args={k: v for k, v in ds.items() if v is not None},
            task_attribs={"dataset": spec}, solver=profile,
            solver_args=solver_args,
            dataset=EvalDataset(name=first.task, location=str(ds.get("source") or spec), samples=len(qids),
                                sample_ids=qids, shuffled=False),
            model=model, model_generate_config=gen, model_base_url=mcfg.get("base_url"),
            config=EvalConfig(epochs=reps, max_samples=manifest.bench.get("concurrency") if manifest else None),
            packages={"fte-shell": __version__},
            metadata={"fte_shell": {"sweep": str(first.source),
                                    "manifest": {k: v for k, v in (manifest.dump() if manifest else {}).items()
                                                 if k != "config"},
                                    "config": cfg, "note": NOTE}}),
        plan=EvalPlan(name="fte-shell", steps=[EvalPlanStep(solver=profile, params={
            "profile": profile, "context": first.context,
            **({"retriever": first.retriever} if first.retriever is not None else {})})],
                      config=gen),
        results=_results(samples),
        stats=EvalStats(started_at=started, completed_at=completed, model_usage=usage,
                        role_usage={"agent": sum((usage_of((r.result or {}).get("usage")) for r in runs[1:]),
                                                 usage_of((first.result or {}).get("usage")))}),
        samples=samples,
    )


def _context_config(run: Run) -> dict[str, Any] | None:
    """The run's ``[agent.context]`` as recorded (its start event), None for runs written before it."""
    ctx = ((run.start.config if run.start else {}).get("agent") or {}).get("context")
    return ctx if isinstance(ctx, dict) else None


def log_name(key: tuple[str, str, str], taken: set[str], fmt: str) -> str:
    """``<dataset>_<arm>_<model>.<fmt>`` (a short hash of the dataset spec added on a clash; the arm
    ``fte@keep_recent-5`` is written ``fte-keep_recent-5``)."""
    spec, arm, model = key
    kind = spec.split(":", 1)[0]
    name = safe_name(kind, arm, model)
    if name in taken:
        name = safe_name(kind, stable_id(spec, n=8), arm, model)
    taken.add(name)
    return f"{name}.{fmt}"


def plan(runs: list[Run], out: Path, fmt: str | None = None) -> list[tuple[tuple[str, str, str], Path, str]]:
    """(cell, file, format) of every log to write: ``out`` is a ``.eval``/``.json`` file (one cell only)
    or a directory (one file per cell, ``fmt``: ``eval`` by default)."""
    groups = cells(runs)
    out = Path(out)
    suffix = out.suffix.lstrip(".")
    if suffix in FORMATS:
        if len(groups) != 1:
            raise ExportError(f"{len(groups)} (dataset, arm, model) cells make {len(groups)} eval logs: "
                              f"give --out a directory, not the file {out}")
        return [(next(iter(groups)), out, suffix)]
    fmt = fmt or "eval"
    if fmt not in FORMATS:
        raise ExportError(f"--format {fmt}: one of {', '.join(FORMATS)}")
    taken: set[str] = set()
    return [(k, out / log_name(k, taken, fmt), fmt) for k in groups]


def write_cell(key: tuple[str, str, str], runs: list[Run], path: Path, fmt: str,
               on_run: Callable[[Run], None] | None = None) -> Path:
    """Write one cell's eval log to ``path`` (replacing it) with inspect-ai's ``write_eval_log``."""
    from inspect_ai.log import write_eval_log

    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)  # the .eval writer would append to an old file
    write_eval_log(eval_log(key, runs, on_run), str(path), format=fmt)  # type: ignore[arg-type]
    return path


def export_inspect(paths: Iterable[Path], out: Path, *, fmt: str | None = None,
                   on_run: Callable[[Run], None] | None = None) -> list[Path]:
    """Write one eval log per cell of the runs under ``paths``, as :func:`plan` names them (a bad ``out``
    is refused before any log is written); ``on_run`` is called once per run exported. Returns the files
    written."""
    require_inspect()
    runs = read_runs(paths)
    groups = cells(runs)
    with records_frozen():
        return [write_cell(key, groups[key], path, f, on_run) for key, path, f in plan(runs, out, fmt)]


class InspectOptions(StrictModel):
    """``fte-shell export inspect``'s options."""

    format: Literal["eval", "json"] = "eval"
    """The log format when --out is a directory (an --out FILE.eval or FILE.json names its own)."""


class InspectExporter:
    """``fte-shell export inspect``: :func:`export_inspect` as an :class:`~.base.Exporter`."""

    name = "inspect"
    summary = ("Inspect AI eval logs, one per (dataset, arm, model) cell: each question a sample, repetitions "
               "epochs, conversation, scores, usage, an event per model and tool call (inspect view --log-dir DIR, "
               "inspect_ai.analysis, Docent).")
    reads: Reads = "runs"
    writes = "A FILE.eval or FILE.json (one dataset × arm × model cell) or a directory (one log per cell)."
    options_model = InspectOptions

    def require(self) -> None:
        require_inspect()

    def export(self, paths: Sequence[Path], out: Path, options: InspectOptions,
               on_run: Callable[[Any], None]) -> Exported:
        return Exported("eval log", export_inspect(paths, out, fmt=options.format, on_run=on_run))


EXPORTER = InspectExporter()
