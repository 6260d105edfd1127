"""What a sweep runs (:class:`BenchConfig`), one run of it (:class:`Task`), what one invocation did
(:class:`SweepStats`) and the run function it calls (:class:`RunFn`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..benchmarks.base import Question
from ..config import ContextConfig, RunConfig

if TYPE_CHECKING:  # pragma: no cover
    from ..model import ModelClient
    from ..world import World


class BenchConfig(BaseModel):
    """What one ``fte-shell bench`` sweep runs."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    dataset: str
    """Dataset spec: ``KIND``, ``KIND:PATH`` or a bare path, one of the benchmarks of
    :data:`fte_shell.benchmarks.registry.BENCHMARKS` (``fte-shell bench --help`` lists them; docs/bench.md),
    or a third-party benchmark as ``module:attr`` or ``module:attr:PATH``."""

    split: str = "dev"
    """HotpotQA split (``dev`` or ``test``)."""

    limit: int | None = None
    """Keep the first N questions (after the random draw of ``sample``)."""

    sample: int | None = None
    """Draw N questions at random (seeded by ``seed``)."""

    seed: int = 0
    """Seed of the random draw of ``sample``."""

    profiles: list[str] = Field(default_factory=lambda: ["shell", "fte"])
    """Profiles to compare, each on every question."""

    contexts: list[str] = Field(default_factory=list)
    """Context strategies to compare, each with every profile on every question (``keep_all``,
    ``keep_recent:5``, ``discard_fraction:0.75``, ``discard_all``, ``summary``, ``workspace_reset``); the
    other ``[agent.context]`` settings (trigger …) are shared by all. Empty = the configuration's own
    ``[agent.context]`` alone."""

    retrievers: list[str] = Field(default_factory=list)
    """Retrievers to compare over the dataset's local corpus, each with every profile (and context
    strategy) on every question (``bm25``, ``bm25s``, ``dense:MODEL``, ``module:attr``: as ``[search]
    retriever``); a run directory per arm, ``runs/<profile>@<retriever>/``. Empty = the configuration's
    own ``[search] retriever`` alone, in the directories of a sweep without this axis."""

    corpus_arm: bool = False
    """Add, for each profile that runs a box (shell), an arm whose box also mounts the sweep's own local
    corpus (its ``[search] corpus``) at ``/corpus``, paired run for run with the others; its runs are under
    ``runs/<arm>+corpus/`` (docs/bench.md "The corpus arm"). Not with ``[sandbox] corpus``."""

    runs: int = 1
    """Repetitions per (question, profile)."""

    @field_validator("retrievers")
    @classmethod
    def _known_retrievers(cls, v: list[str]) -> list[str]:
        from ..record.rundir import retriever_dir
        from ..search.retrievers import parse_spec

        specs = [parse_spec(spec).text for spec in v]  # a ConfigError names a bad spelling
        dirs: dict[str, str] = {}
        for spec in specs:
            other = dirs.setdefault(retriever_dir(spec), spec)
            if other != spec:
                raise ValueError(f"--retrievers {other} and {spec} share the arm directory {retriever_dir(spec)!r}")
        twice = sorted({x for x in specs if specs.count(x) > 1})
        if twice:
            raise ValueError(f"--retrievers names {', '.join(twice)} more than once")
        return specs

    @field_validator("contexts")
    @classmethod
    def _known_contexts(cls, v: list[str]) -> list[str]:
        labels = [ContextConfig.parse(spec).label for spec in v]  # a ValueError names a bad spelling
        twice = sorted({x for x in labels if labels.count(x) > 1})
        if twice:
            raise ValueError(f"--context names {', '.join(twice)} more than once")
        return labels

    concurrency: int = 4
    """Runs in flight at once (threads; each shell run holds one box)."""

    out: Path
    """Sweep directory; a sweep started again with the same one resumes."""

    corpus_dir: Path | None = None
    """HotpotQA and BrowseComp-Plus only: where the dataset's local corpus index is built once and reused
    (default ``$FTE_CACHE_DIR/corpora/hotpotqa-amor`` or ``…/browsecomp-plus-<hash of DIR>``, else under
    ``~/.cache/fte-shell/corpora/``)."""

    retries: int = 1
    """Times a run whose harness raised an unexpected exception (not an outage) is retried at once, in a
    fresh directory, before it is recorded as failed."""

    endpoint_wait_s: float = Field(default=900.0, ge=0)
    """How long the sweep waits for infrastructure that stopped answering — the model endpoint, the sandbox
    provider (Docker, podman or bwrap), the search backend — probing it with backoff, before it gives up
    (status named after what failed, e.g. ``endpoint_unavailable``). 0 = give up at the first failed probe."""

    probe_backoff_s: float = Field(default=2.0, gt=0)
    """First delay between two probes of unavailable infrastructure; it doubles up to 60 s."""

    outage_retries: int = Field(default=3, ge=0)
    """Times one run that ended because infrastructure was unavailable is redone in the same invocation,
    once that infrastructure answers again (after that it waits for the next resume)."""

    fork_from: Path | None = None
    """A sweep directory whose every run this sweep forks at ``at_turn`` (its questions, profiles and
    repetitions; each run's first turns replayed without the model against the parent's snapshot, then
    continued live): a paired "same prefix, different X" study. docs/bench.md."""

    at_turn: int | None = None
    """With ``fork_from``: the turns of each parent run replayed before its fork goes live (a parent run
    that ended earlier is replayed to its end)."""

    allow_config_change: bool = False
    """Resume a sweep although the behaviour-relevant configuration changed (model, sampling, agent or
    profile settings); the change is recorded in ``sweep.json``'s ``config_changes``. Refused otherwise."""


class Task(BaseModel):
    """One run of a sweep."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    question: Question
    """The question."""

    profile: str
    """Profile name."""

    rep: int
    """Repetition index."""

    run_dir: Path
    """``OUT/runs/<arm>/<qid>/r<rep>`` (the arm: the profile, ``profile@strategy``, or
    ``profile@retriever[+strategy]``)."""

    context: ContextConfig | None = None
    """The run's ``[agent.context]`` (its arm's strategy); None = the sweep configuration's own."""

    retriever: str | None = None
    """The run's ``[search] retriever`` (its arm's, ``bench --retrievers``); None = the sweep
    configuration's own."""

    corpus: bool = False
    """The run's box mounts the sweep's local corpus (``[search] corpus``) at ``/corpus`` (its arm's,
    ``bench --corpus-arm``)."""


class SweepStats(BaseModel):
    """Counts of one sweep invocation."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    total: int = 0
    """Runs in the sweep (all questions × profiles × repetitions)."""

    skipped: int = 0
    """Runs that already had a result before this invocation."""

    redone: int = 0
    """Runs found partial or infrastructure-failed: resumed where they stopped, or redone."""

    done: int = 0
    """Runs that got a result in this invocation (a result stop reason: answered or not)."""

    failed: int = 0
    """Attempts in this invocation that ended for an infrastructure reason (each is a line of
    ``failures.jsonl``; not results)."""

    failed_by_reason: dict[str, int] = Field(default_factory=dict)
    """``failed`` by stop reason (``endpoint_unavailable``, ``sandbox_unavailable``, ``failed``…)."""

    answered: int = 0
    """Runs finished in this invocation with an answer."""

    pending: int = 0
    """Runs still without a result when this invocation ended (infrastructure-failed, or not started
    after the sweep gave up): a resume redoes them."""

    lost: int = 0
    """Runs in flight when the sweep was interrupted (deleted; redone on resume)."""

    interrupted: bool = False
    """The sweep was stopped by SIGINT/SIGTERM."""

    gave_up: str | None = None
    """Set when the sweep stopped because infrastructure stayed unavailable longer than
    ``endpoint_wait_s``: the resource's status in :data:`fte_shell.stops.GAVE_UP` (``endpoint_unavailable``,
    ``sandbox_unavailable`` or ``search_unavailable``)."""

    outages: int = 0
    """Times the sweep paused because infrastructure stopped answering."""

    outage_s: float = 0.0
    """Seconds the sweep spent paused, waiting for infrastructure."""

    wall_s: float = 0.0
    """Seconds this invocation took."""

    tokens: int = 0
    """Tokens the runs of this invocation spent (prompt + completion, a reader model's included;
    infrastructure-failed attempts included)."""

    cost_usd: float | None = None
    """What the runs of this invocation cost in USD (None: the model's price is unknown)."""

    budget_reached: str | None = None
    """``max_cost`` or ``max_tokens_total`` when the sweep stopped starting runs at its budget
    (``[budget]``, ``--max-cost``/``--max-tokens-total``): a later ``bench`` with a higher one resumes."""

    budget: str | None = None
    """What was spent of the budget, in one line (when one was set)."""

    concurrency: int = 0
    """Runs allowed in flight at the end (lowered on repeated HTTP 429s, raised again after them)."""

    concurrency_lowest: int = 0
    """The lowest concurrency of this invocation (the slots, unless 429s lowered it)."""

    throttled: int = 0
    """Times repeated HTTP 429s lowered the concurrency."""


class RunFn(Protocol):
    """What the sweep calls for one run: :func:`fte_shell.runner.run_question`'s signature."""

    def __call__(
        self,
        question: str,
        config: RunConfig,
        out_dir: Path,
        *,
        world: World | None,
        qid: str | None,
        model: ModelClient | None,
        meta: dict[str, Any] | None,
    ) -> Any: ...
