"""``bench --fork-from SWEEP --at-turn K``: a new sweep whose every run is a fork of the parent sweep's run
of the same (profile, question, repetition) at turn K (:func:`fte_shell.runner.fork_run`) — a paired "same
prefix, different X" study: the flags given (``--context``, ``--model``, ``--max-turns`` …) are X.

The new sweep takes the parent's questions (its dataset, split, limit, sample, seed), profiles and
repetitions (and its context arms, unless ``--context`` names the fork sweep's own: then each arm forks the
parent's run of its profile), and the parent's configuration (``sweep.json``, secrets masked) under ``--config`` and the
flags; otherwise it is an ordinary sweep (resumable, budgets, outages, ``report``). A parent run that
ended before turn K is forked where it ended: its replay ends it the same way, with no model call, so
every arm keeps every question. A parent run without a result is not forked (a failure of the new sweep).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import RunConfig
from ..episode.fork import HOW_TO_RECORD, Parent, config_over
from ..errors import ConfigError
from ..record.rundir import arm_profile, find_runs, read_result
from ..record.sweepdir import SweepDir
from .config import BenchConfig

if TYPE_CHECKING:  # pragma: no cover
    from ..model import ModelClient
    from ..world import World

INHERITED = ("dataset", "split", "limit", "sample", "seed", "profiles", "runs", "corpus_dir")
"""The bench options a fork sweep takes from its parent (``--profiles`` and ``--runs`` are the parent's)."""


def fork_bench(options: dict[str, Any]) -> BenchConfig:
    """The fork sweep's :class:`BenchConfig`: ``options`` (bench's flags, ``fork_from`` and ``at_turn``
    set) with the parent's questions, profiles and repetitions. :class:`ConfigError` when the parent is
    not a sweep, or ``at_turn`` is missing."""
    parent = Path(options["fork_from"])
    manifest = SweepDir(parent).manifest()
    if manifest is None or not manifest.bench:
        raise ConfigError(f"--fork-from {parent}: not a sweep directory (no sweep.json)")
    if options.get("at_turn") is None or options["at_turn"] < 0:
        raise ConfigError("--fork-from needs --at-turn K (K >= 0: the parent's turns replayed before going live)")
    if Path(options["out"]).resolve() == parent.resolve():
        raise ConfigError("--out is the parent sweep: a fork sweep never writes its parent, choose another --out")
    inherited = {k: manifest.bench[k] for k in INHERITED if k in manifest.bench}
    if not options.get("contexts") and manifest.bench.get("contexts"):  # every arm of the parent, forked
        inherited["contexts"] = manifest.bench["contexts"]
    return BenchConfig.model_validate({**options, **inherited})


def fork_config(bench: BenchConfig, config_file: Path | None, overrides: dict[str, Any]) -> RunConfig:
    """The fork sweep's configuration: the parent sweep's (``sweep.json``) < ``config_file`` < API keys of
    the environment < ``overrides``; its snapshot the store the parent's runs recorded into (absolute),
    its search-result cache its own. :class:`ConfigError` when no parent run recorded a snapshot."""
    parent = Path(bench.fork_from or "")
    manifest = SweepDir(parent).manifest()
    recorded = dict(manifest.config) if manifest is not None else {}
    snap = next((s for d, *_ in find_runs(parent) if isinstance(s := ((read_result(d) or {}).get("meta") or {})
                                                                   .get("snapshot"), dict) and s.get("dir")), None)
    if snap is None:
        raise ConfigError(f"--fork-from {parent}: its runs were not recorded with a snapshot, so their tool calls "
                          f"cannot be re-executed against the pages they saw; {HOW_TO_RECORD}")
    search = {k: v for k, v in (recorded.get("search") or {}).items() if k != "cache_dir"}  # the parent's is not written
    recorded = {**recorded, "search": search}
    snapshot = {"dir": str(snap["dir"]), "mode": snap.get("mode") or "record", **(overrides.get("snapshot") or {})}
    return config_over(recorded, {**overrides, "snapshot": snapshot}, config_file)


class ForkRuns:
    """The run function of a fork sweep (:class:`~fte_shell.sweep.config.RunFn`): the run directory
    ``OUT/runs/<arm>/<qid>/r<k>`` forks ``PARENT/runs/<arm>/<qid>/r<k>`` at ``min(K, its last
    replayable turn)``; an arm of ``--context`` the parent lacks (``fte@discard_all``) forks the parent's
    run of its profile (``PARENT/runs/fte/…``). The sweep's shared world is not used: each fork's world is its parent's snapshot."""

    def __init__(self, bench: BenchConfig):
        if bench.fork_from is None or bench.at_turn is None:
            raise ConfigError("ForkRuns needs a BenchConfig with fork_from and at_turn")
        self.parent, self.out, self.at_turn = Path(bench.fork_from), Path(bench.out), bench.at_turn

    def __call__(self, question: str, config: RunConfig, out_dir: Path, *, world: World | None, qid: str | None,
                 model: ModelClient | None, meta: dict[str, Any] | None) -> Any:
        from ..runner import fork_run

        rel = Path(out_dir).relative_to(self.out)
        parent_dir = self.parent / rel
        if not parent_dir.exists():  # an arm of --context the parent lacks: the parent's run of the profile
            arm, qid, rep = rel.parts[-3:]
            parent_dir = self.parent / Path(*rel.parts[:-3]) / arm_profile(arm) / qid / rep
        k = min(self.at_turn, Parent.read(parent_dir).replayable())
        return fork_run(parent_dir, k, out_dir, config=config, model=model, run_id=qid,
                        meta={**(meta or {}), "fork_at_turn": self.at_turn})
