"""A sweep directory's bookkeeping: the plan of runs (every question × profile × retriever × context arm ×
repetition), each run's state, the manifest ``sweep.json``, ``questions.jsonl``, and the checks that a
resume runs the same sweep (same dataset, same behaviour-relevant configuration)."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..benchmarks.base import Dataset, Question
from ..config import ContextConfig, RunConfig
from ..config.search import LEGACY_RETRIEVER
from ..digest import canonical_config, config_changes, config_digest, digest_of
from ..errors import ConfigError, FteError
from ..profiles import runs_in_a_box
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


def retriever_arms(bench: BenchConfig) -> list[str | None]:
    """The sweep's retrievers (``bench --retrievers``), or ``[None]``: the configuration's own, in the
    directories of a sweep without the axis."""
    return list(bench.retrievers) or [None]


def uses_boxes(profiles: Iterable[str]) -> bool:
    """Whether any of ``profiles`` runs its questions in a box (:func:`~fte_shell.profiles.runs_in_a_box`)."""
    return any(runs_in_a_box(p) for p in profiles)


def corpus_arms(corpus_arm: bool, profile: str) -> list[bool]:
    """Whether each arm of ``profile`` mounts the sweep's corpus in its box: ``[False, True]`` for a
    profile that runs a box in a sweep with ``--corpus-arm`` (``corpus_arm``), else ``[False]``."""
    return [False, True] if corpus_arm and runs_in_a_box(profile) else [False]


def plan(bench: BenchConfig, questions: list[Question], contexts: list[ContextConfig] | None = None) -> list[Task]:
    """All runs, repetition-major then question then profile then retriever then context arm (a question's
    runs happen close in time, so the shared caches are warm). ``contexts``: :func:`context_arms` (default:
    one arm, the configuration's own ``[agent.context]``, in the keep_all directories); the retrievers:
    :func:`retriever_arms`; with and without the corpus in the box: :func:`corpus_arms`."""
    sweep = SweepDir(Path(bench.out))
    arms: list[ContextConfig | None] = list(contexts) if contexts else [None]
    return [
        Task(question=q, profile=p, rep=k, context=c, retriever=r, corpus=b,
             run_dir=sweep.run_dir(p, q.id, k, c.label if c else "keep_all", r, b))
        for k in range(bench.runs)
        for q in questions
        for p in bench.profiles
        for r in retriever_arms(bench)
        for c in arms
        for b in corpus_arms(bench.corpus_arm, p)
    ]


def resumed_retriever(out: Path, cfg: RunConfig) -> RunConfig:
    """``cfg`` with ``[search] retriever = "bm25s"`` when ``out`` holds a sweep recorded before the setting
    existed (its manifest's configuration has none) and the setting was not given (file or flag): the
    resumed sweep ranks as its first runs did, and its configuration compares equal."""
    old = read_manifest(out)
    search = (old.config or {}).get("search") if old is not None else None
    if not isinstance(search, dict) or "retriever" in search or "retriever" in cfg.search.model_fields_set:
        return cfg
    cfg = cfg.model_copy(deep=True)
    cfg.search.retriever = LEGACY_RETRIEVER
    return cfg


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


def sweep_canonical(cfg: RunConfig | dict[str, Any], retrievers: bool = False) -> dict[str, Any]:
    """The canonical config of a whole sweep: the runs' one without ``agent.profile`` and
    ``agent.context`` (which vary by arm; each arm's is covered by its run digest, :func:`run_digests`), and
    without ``search.retriever`` when the sweep compares ``retrievers``."""
    data = canonical_config(cfg)
    if isinstance(data.get("agent"), dict):
        data["agent"].pop("profile", None)
        data["agent"].pop("context", None)
    if retrievers and isinstance(data.get("search"), dict):
        data["search"].pop("retriever", None)
    return data


def run_digests(cfg: RunConfig, profiles: list[str], contexts: list[ContextConfig] | None = None,
                retrievers: list[str | None] | None = None, corpus_arm: bool = False) -> dict[str, str]:
    """``{arm: config_digest}`` of the runs of each arm (:func:`fte_shell.record.rundir.arm_name`: the
    profile, ``profile@strategy`` or ``profile@retriever[+strategy]``, ``+corpus`` at the end for a corpus
    arm): what their ``result.json`` carries. ``contexts``: :func:`context_arms`; ``retrievers``:
    :func:`retriever_arms` (default: the configuration's own); ``corpus_arm``: ``bench --corpus-arm``
    (:func:`corpus_arms`)."""
    out = {}
    for r in retrievers or [None]:
        for c in contexts or [cfg.agent.context]:
            for p in profiles:
                for b in corpus_arms(corpus_arm, p):
                    run = arm_config(cfg, p, c, r, b)
                    out[arm_name(p, c.label, r, b)] = config_digest(run)
    return out


def arm_config(cfg: RunConfig, profile: str, context: ContextConfig | None, retriever: str | None,
               corpus: bool) -> RunConfig:
    """``cfg`` (the sweep's, filled) as one arm's runs use it: its profile, context strategy (None: the
    configuration's own), retriever (None: the same) and, for a corpus arm, ``[sandbox] corpus`` set to
    the sweep's ``[search] corpus``."""
    run = cfg.model_copy(deep=True)
    run.agent.profile = profile
    if context is not None:
        run.agent.context = context
    if retriever is not None:
        run.search.retriever = retriever
    if corpus:
        run.sandbox.corpus = run.search.corpus
    return run


def _arm_changes(old: SweepManifest, digests: dict[str, str]) -> list[str]:
    """The context arms (other than keep_all) whose run digest changed while the shared configuration
    did not: their ``[agent.context]`` settings (trigger …) changed."""
    return [f"{arm}: the run config digest {old.run_config_digests[arm][:12]} -> {d[:12]} ([agent.context] "
            f"settings changed)" for arm, d in sorted(digests.items())
            if ARM_SEP in arm and old.run_config_digests.get(arm, d) != d]


def check_config(out: Path, cfg: RunConfig, allow_change: bool, digests: dict[str, str] | None = None,
                 retrievers: bool = False) -> tuple[list[ConfigChange], list[str]]:
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
        before = sweep_canonical(old.config, retrievers)
    after = sweep_canonical(cfg, retrievers)
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
    canonical = sweep_canonical(cfg, bool(bench.retrievers))
    arms = context_arms(bench, cfg)
    manifest = SweepManifest(
        dataset=ManifestDataset.model_validate(dataset.model_dump(mode="json", exclude={"questions"})),
        questions=len(dataset.questions),
        bench=bench.model_dump(mode="json"),
        profiles=bench.profiles,
        runs=bench.runs,
        config=cfg.model_dump(mode="json"),
        config_digest=digest_of(canonical),
        run_config_digests=run_digests(cfg, bench.profiles, arms, retriever_arms(bench), bench.corpus_arm),
        retrievers=list(bench.retrievers),
        contexts=[c.label for c in arms],
        config_canonical=canonical,
        config_changes=config_changes or [],
        started_at=started,
        updated_at=now(),
        status=status,
        stats=stats.model_dump() if stats else None,
        sandboxes=sandboxes or {},
        search=search_names(cfg, bench),
    )
    SweepDir(Path(bench.out)).write_manifest(manifest)


def search_names(cfg: RunConfig, bench: BenchConfig) -> dict[str, Any]:
    """How ``sweep.json`` names the sweep's search: the backend plugin's name and, per retriever arm ("" for
    the configuration's own), the name its searches are recorded under (:mod:`fte_shell.search.registry`)."""
    from ..search.registry import selected

    try:
        plugin = selected(cfg.search)
        recorded = {}
        for r in retriever_arms(bench):
            arm = cfg.search if r is None else cfg.search.model_copy(update={"retriever": r})
            recorded[r or ""] = plugin.recorded_name(arm)
    except FteError as e:  # a backend that cannot be named now: the runs will say why
        return {"backend": cfg.search.backend, "error": str(e)}
    return {"backend": plugin.name, "recorded_as": recorded}


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
