"""A sweep directory's bookkeeping: the plan of runs (every question × profile × context arm ×
repetition), each run's state, the manifest ``sweep.json``, ``questions.jsonl``, and the checks that a
resume runs the same sweep (same dataset, same behaviour-relevant configuration)."""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any

from ..benchmarks.base import Dataset, Question
from ..config import ContextConfig, RunConfig
from ..digest import canonical_config, config_changes, config_digest, digest_of
from ..errors import ConfigError
from ..record.rundir import ARM_SEP, arm_name, read_result
from ..record.sweepdir import MANIFEST, ConfigChange, ManifestDataset, SweepDir, SweepManifest
from ..stops import RunState, SweepStatus, is_infra_failure
from .config import BenchConfig, SweepStats, Task


def now() -> str:
    """The current UTC time, ISO 8601 to the second."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def context_arms(bench: BenchConfig, cfg: RunConfig) -> list[ContextConfig]:
    """The sweep's context strategies: each ``--context`` spelling (:attr:`BenchConfig.contexts`) with
    the rest of the configuration's ``[agent.context]`` (trigger, trigger_tokens, keep_recent_every_turn;
    its summary_model for ``summary``), or that ``[agent.context]`` alone when none was given."""
    base = cfg.agent.context
    if not bench.contexts:
        return [base]
    out = []
    for spec in bench.contexts:
        data = {**base.model_dump(), **ContextConfig.parse(spec).model_dump(exclude_unset=True)}
        if data["strategy"] != "summary":
            data["summary_model"] = None  # the summary arm's writer
        out.append(ContextConfig.model_validate(data))
    return out


def plan(bench: BenchConfig, questions: list[Question], contexts: list[ContextConfig] | None = None) -> list[Task]:
    """All runs, repetition-major then question then profile then context arm (a question's runs happen
    close in time, so the shared caches are warm). ``contexts``: :func:`context_arms` (default: one arm, the
    configuration's own ``[agent.context]``, in the keep_all directories)."""
    sweep = SweepDir(Path(bench.out))
    arms: list[ContextConfig | None] = list(contexts) if contexts else [None]
    return [
        Task(question=q, profile=p, rep=k, context=c, run_dir=sweep.run_dir(p, q.id, k, c.label if c else "keep_all"))
        for k in range(bench.runs)
        for q in questions
        for p in bench.profiles
        for c in arms
    ]


def run_state(run_dir: Path) -> RunState:
    """``done`` (a result), ``failed`` (ended for an infrastructure reason: not a result), ``partial``
    (a directory without a readable ``result.json``) or ``new``."""
    result = read_result(run_dir)
    if result is not None:
        return "failed" if is_infra_failure(result.get("stop_reason")) else "done"
    return "partial" if run_dir.exists() else "new"


def read_manifest(out: Path) -> SweepManifest | None:
    """``OUT/sweep.json``, or None when there is none (or it is unreadable)."""
    return SweepDir(Path(out)).manifest()


def sweep_canonical(cfg: RunConfig | dict[str, Any]) -> dict[str, Any]:
    """The canonical config of a whole sweep: the runs' one without ``agent.profile`` and
    ``agent.context`` (which vary by arm; each arm's is covered by its run digest, :func:`run_digests`)."""
    data = canonical_config(cfg)
    if isinstance(data.get("agent"), dict):
        data["agent"].pop("profile", None)
        data["agent"].pop("context", None)
    return data


def run_digests(cfg: RunConfig, profiles: list[str], contexts: list[ContextConfig] | None = None) -> dict[str, str]:
    """``{arm: config_digest}`` of the runs of each arm (:func:`fte_shell.record.rundir.arm_name`: the
    profile, or ``profile@strategy``): what their ``result.json`` carries. ``contexts``: :func:`context_arms`
    (default: the configuration's own)."""
    out = {}
    for c in contexts or [cfg.agent.context]:
        for p in profiles:
            run = cfg.model_copy(deep=True)
            run.agent.profile, run.agent.context = p, c
            out[arm_name(p, c.label)] = config_digest(run)
    return out


def _arm_changes(old: SweepManifest, digests: dict[str, str]) -> list[str]:
    """The context arms (other than keep_all) whose run digest changed while the shared configuration
    did not: their ``[agent.context]`` settings (trigger …) changed."""
    return [f"{arm}: the run config digest {old.run_config_digests[arm][:12]} -> {d[:12]} ([agent.context] "
            f"settings changed)" for arm, d in sorted(digests.items())
            if ARM_SEP in arm and old.run_config_digests.get(arm, d) != d]


def check_config(out: Path, cfg: RunConfig, allow_change: bool,
                 digests: dict[str, str] | None = None) -> tuple[list[ConfigChange], list[str]]:
    """Refuse to resume a sweep whose behaviour-relevant configuration changed (the message names every
    changed key, or the context arm whose ``digests`` entry changed), unless ``allow_change``. Returns the manifest's ``config_changes`` history (with this
    change appended when there is one) and this change's lines (empty: no change)."""
    old = read_manifest(out)
    if old is None:
        return [], []
    history = list(old.config_changes)
    before = old.config_canonical
    if before is None:  # older manifests: derive it from the (masked) config snapshot
        if not old.config:
            return history, []
        before = sweep_canonical(old.config)
    after = sweep_canonical(cfg)
    changes = config_changes(before, after) or _arm_changes(old, digests or {})
    if not changes:
        return history, []
    if not allow_change:
        raise ConfigError(
            f"{out} is a sweep run with another configuration; resuming it would mix configurations. "
            f"Changed: {'; '.join(changes)}. Restore the old settings, choose another --out, or pass "
            f"--allow-config-change to resume anyway (the change is recorded in {MANIFEST})"
        )
    history.append(ConfigChange(at=now(), from_digest=digest_of(before), to_digest=digest_of(after), changes=changes))
    return history, changes


def write_manifest(
    bench: BenchConfig,
    dataset: Dataset,
    cfg: RunConfig,
    status: SweepStatus,
    stats: SweepStats | None,
    started: str,
    *,
    config_changes: list[ConfigChange] | None = None,
    sandboxes: dict[str, int] | None = None,
) -> None:
    """Write ``OUT/sweep.json`` atomically (secrets masked; format in docs/bench.md)."""
    canonical = sweep_canonical(cfg)
    arms = context_arms(bench, cfg)
    manifest = SweepManifest(
        dataset=ManifestDataset.model_validate(dataset.model_dump(mode="json", exclude={"questions"})),
        questions=len(dataset.questions),
        bench=bench.model_dump(mode="json"),
        profiles=bench.profiles,
        runs=bench.runs,
        config=cfg.model_dump(mode="json"),
        config_digest=digest_of(canonical),
        run_config_digests=run_digests(cfg, bench.profiles, arms),
        contexts=[c.label for c in arms],
        config_canonical=canonical,
        config_changes=config_changes or [],
        started_at=started,
        updated_at=now(),
        status=status,
        stats=stats.model_dump() if stats else None,
        sandboxes=sandboxes or {},
    )
    SweepDir(Path(bench.out)).write_manifest(manifest)


def write_questions(out: Path, questions: list[Question]) -> None:
    """Merge ``questions`` into ``OUT/questions.jsonl`` (by id)."""
    SweepDir(Path(out)).write_questions([q.model_dump(mode="json") for q in questions])


def check_compatible(out: Path, dataset: Dataset) -> None:
    """Refuse to mix datasets in one sweep directory."""
    old = read_manifest(out)
    if old is None:
        return
    od = old.dataset
    if (od.source, od.split) != (dataset.source, dataset.split):
        raise ConfigError(
            f"{out} holds a sweep of {od.source} (split {od.split}); this is "
            f"{dataset.source} (split {dataset.split}): choose another --out"
        )
    if od.revisions and dataset.revisions and od.revisions != dataset.revisions:
        changed = ", ".join(k for k in sorted({*od.revisions, *dataset.revisions})
                            if od.revisions.get(k) != dataset.revisions.get(k))
        raise ConfigError(f"{out} holds a sweep of other data in {dataset.source} (changed since it began: {changed}; "
                          f"see dataset.revisions in {out}/sweep.json): restore that data or choose another --out")
