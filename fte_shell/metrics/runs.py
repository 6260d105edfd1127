"""Per-run numbers (:class:`RunMetrics`) from a run directory alone: ``trajectory.jsonl``, ``result.json``,
``workspace/`` and ``judgement.json`` (definitions: ``docs/metrics.md``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import Field

from ..record.events import ModelCallEvent, NudgeEvent, StartEvent, ToolCallEvent
from ..record.rundir import (
    find_runs,
    primary_verdict,
    read_events,
    read_judgement,
    read_result,
    verdicts,
    workspace_files,
)
from ..stops import NO_RESULT, RunStatus, is_infra_failure
from .actions import _M, CATEGORY, Action, actions_from_events, materialized_pages, revisited_docs
from .edits import EditMetrics, context_label, edit_metrics


class RunMetrics(_M):
    """Numbers of one run (one question, one profile, one repetition)."""

    run_dir: str
    """The run directory."""

    profile: str
    """Profile name."""

    model: str | None = None
    """Model name the run used (``result.json``, else the start event)."""

    qid: str
    """Question id (directory name under the profile in a sweep)."""

    rep: int = 0
    """Repetition index (``r<k>``)."""

    context: str = "keep_all"
    """The run's context strategy, as spelled on the command line (``keep_recent:5``; its arm in a sweep)."""

    retriever: str | None = None
    """The retriever that ranked the run's local corpus (``bm25``, ``dense:…``; ``bm25s`` for runs recorded
    before retrievers); None when the run searched no local corpus."""

    corpus_in_box: bool = False
    """The run is of a sweep's corpus arm: its box mounted the sweep's corpus at ``/corpus`` (``bench
    --corpus-arm``; :func:`run_corpus_in_box`)."""

    stop_reason: str
    """``answer``, ``max_turns``, …, or ``failed`` (the harness raised) / ``incomplete``
    (:data:`fte_shell.stops.NO_RESULT`: no result.json)."""

    infra_failure: bool = False
    """The run is not a result: its stop reason is an infrastructure failure
    (:func:`fte_shell.stops.is_infra_failure`) or it has no ``result.json`` (``incomplete``)."""

    config_digest: str | None = None
    """``result.json``'s ``config_digest`` (the digest of the config the run used), when written."""

    answered: bool
    """The run ended with an ``<answer>``."""

    correct: bool | None = None
    """Judged correct by the run's primary verdict (:func:`verdict_entry`); None = not judged."""

    f1: float | None = None
    """Token F1 of the model-free judge, if it ran."""

    turns: int = 0
    """Model calls."""

    calls: int = 0
    """Tool calls."""

    n_search: int = 0
    """#Search."""

    n_select: int = 0
    """#Select (fetch, visit, open)."""

    n_extract: int = 0
    """#Extract (grep, read, find)."""

    n_grep: int = 0
    """grep-like extractions."""

    n_read: int = 0
    """read-like extractions."""

    n_list: int = 0
    """Listings (ls, find, list_fetched, wc …)."""

    n_other: int = 0
    """Other actions."""

    n_fetch: int = 0
    """Fetches (shell and structured)."""

    n_fetch_repeat: int = 0
    """Fetches of a document the workspace already held."""

    n_whole_cache_grep: int = 0
    """Greps over every cached document."""

    materialized: int = 0
    """Documents in the workspace at the end of the run."""

    revisited: int = 0
    """Materialized documents extracted from again after a different document was touched in between."""

    revisit_rate: float | None = None
    """``revisited / materialized``; None without materialized documents."""

    cache_files: int = 0
    """Files in the workspace at the end."""

    cache_chars: int = 0
    """Body characters (provenance header excluded) of those files."""

    prompt_tokens: int = 0
    """Summed prompt tokens."""

    completion_tokens: int = 0
    """Summed completion tokens."""

    total_tokens: int = 0
    """Summed total tokens."""

    summary_tokens: int = 0
    """Total tokens of models that tools called on their own (visit-summary's reader model); not in
    ``total_tokens``."""

    wall_s: float = 0.0
    """Wall-clock seconds of the run."""

    cost_usd: float | None = None
    """What the run's agent-model calls cost in USD (``result.json``'s ``cost_usd``); None when the
    price was unknown or the run was written before costs were recorded."""

    stuck_notices: int = 0
    """Stuck-detector notices the run got (``nudge`` events of kind ``stuck``)."""

    n_refused: int = 0
    """Tool calls the profile refused (a tool it lacks; fte-single-grep's grep without one fetched file)."""

    n_unique_fetch: int = 0
    """Distinct documents fetched (the fetch actions' documents, new or held)."""

    grep_scopes: dict[str, int] = Field(default_factory=dict)
    """grep actions per scope: ``one`` named file, ``all`` (whole cache), ``some`` (a subset)."""

    grep_patterns: list[str] = Field(default_factory=list)
    """The patterns of the grep actions (Table 7)."""

    read_windows: list[tuple[int | None, int | None]] = Field(default_factory=list)
    """(explicit offset, explicit limit) of each read action, None where not given (Table 8)."""

    fetched_sources: list[str] = Field(default_factory=list)
    """Sources (URL or docid) fetched/opened/visited, first-seen order (evidence recall)."""

    seen_sources: list[str] = Field(default_factory=list)
    """References shown in search results, first-seen order (evidence recall among results seen)."""

    revisited_sources: list[str] = Field(default_factory=list)
    """Sources of the revisited documents (evidence share of revisits)."""

    ops: list[str] = Field(default_factory=list)
    """The action sequence (ops), for n-grams."""

    edits: EditMetrics = Field(default_factory=EditMetrics)
    """What the context strategy did: edits, cached prompt tokens, behaviour before/after the first edit."""


def run_status(m: RunMetrics) -> RunStatus:
    """``failed`` (an infrastructure failure or no result: not a result at all,
    :attr:`RunMetrics.infra_failure`), ``correct``, ``wrong`` (judged wrong, or no answer), ``unjudged``."""
    if m.infra_failure:
        return "failed"
    return "unjudged" if m.correct is None else "correct" if m.correct else "wrong"


# --- reading a run directory --------------------------------------------------------------------------
def verdict_entry(judgement: dict[str, Any] | None) -> dict[str, Any] | None:
    """The verdict of ``judgement.json`` a run is counted by (:func:`fte_shell.record.rundir.primary_verdict`:
    the judge that graded it last, a grading model's verdict never displaced by a model-free one; None
    without verdicts)."""
    return primary_verdict(judgement)


def judged(judgement: dict[str, Any] | None) -> tuple[bool | None, float | None]:
    """(correct, f1) from ``judgement.json``: the correct of :func:`verdict_entry`, the model-free F1."""
    match = verdicts(judgement).get("match")
    f1 = match.get("f1") if match is not None else None
    v = verdict_entry(judgement)
    return (v["correct"] if v is not None else None), f1


# --- one run ------------------------------------------------------------------------------------------
def _summed(usages: Iterable[Any]) -> dict[str, int]:
    """Key-wise sum of the integer counts of several usage dicts (non-dicts are skipped)."""
    total: dict[str, int] = {}
    for u in usages:
        if isinstance(u, dict):
            for k, v in u.items():
                if isinstance(v, int):
                    total[k] = total.get(k, 0) + v
    return total


def _cost(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def run_retriever(result: dict[str, Any] | None, config: dict[str, Any] | None) -> str | None:
    """The run's retriever: ``result.json``'s ``meta.retriever``; else from the start event's configuration
    (``search.retriever`` when a corpus was set; ``bm25s``, the only ranking then, for a configuration
    recorded before the setting); None without a local corpus."""
    meta = (result or {}).get("meta")
    if isinstance(meta, dict) and isinstance(meta.get("retriever"), str):
        return str(meta["retriever"])
    search = (config or {}).get("search")
    if not isinstance(search, dict) or not search.get("corpus") or search.get("backend") in ("serper", "none"):
        return None
    return str(search.get("retriever") or "bm25s")


def run_corpus_in_box(result: dict[str, Any] | None) -> bool:
    """Whether the run is of a sweep's corpus arm (``bench --corpus-arm``: its box mounted the sweep's
    corpus at ``/corpus``): ``result.json``'s ``meta.corpus_in_box``. A run given ``[sandbox] corpus``
    outside such an arm is not one (every run of its sweep had it)."""
    meta = (result or {}).get("meta")
    return isinstance(meta, dict) and bool(meta.get("corpus_in_box"))


def run_metrics(run_dir: Path, *, profile: str | None = None, qid: str | None = None, rep: int = 0) -> RunMetrics:
    """Compute :class:`RunMetrics` of one run directory."""
    run_dir = Path(run_dir)
    result = read_result(run_dir)
    events = read_events(run_dir)
    files = workspace_files(run_dir)
    actions = actions_from_events(events, files)
    return RunMetrics(
        run_dir=str(run_dir),
        qid=qid or run_dir.name,
        rep=rep,
        **_outcome(run_dir, result, events, profile),
        **_usage(result or {}, events),
        **_action_counts(actions, files),
        edits=edit_metrics(events, actions),
    )


def _outcome(run_dir: Path, result: dict[str, Any] | None, events: list[Any], profile: str | None) -> dict[str, Any]:
    """Who ran (profile, model, context, retriever), how the run ended and was judged, turns and calls."""
    res = result or {}
    start = next((e for e in events if isinstance(e, StartEvent)), StartEvent())
    correct, f1 = judged(read_judgement(run_dir))
    stop = res.get("stop_reason") or NO_RESULT
    digest = res.get("config_digest")
    return {
        "profile": profile or res.get("profile") or start.profile or "?",
        "model": res.get("model") or start.model,
        "context": context_label(events),
        "retriever": run_retriever(result, start.config),
        "corpus_in_box": run_corpus_in_box(result),
        "stop_reason": stop,
        "infra_failure": result is None or is_infra_failure(stop),
        "config_digest": digest if isinstance(digest, str) and digest else None,
        "answered": res.get("answer") is not None,
        "correct": correct,
        "f1": f1,
        "turns": int(res.get("turns") or sum(1 for e in events if isinstance(e, ModelCallEvent))),
        "calls": sum(1 for e in events if isinstance(e, ToolCallEvent)),
        "stuck_notices": sum(1 for e in events if isinstance(e, NudgeEvent) and e.kind == "stuck"),
    }


def _usage(res: dict[str, Any], events: list[Any]) -> dict[str, Any]:
    """Tokens (the run's and its tools' reader model's), wall time and cost: from ``result.json``, else
    summed over the events."""
    usage = res.get("usage") or _summed(e.usage for e in events if isinstance(e, ModelCallEvent))
    summary_usage = res.get("summary_usage")
    if not isinstance(summary_usage, dict):  # a missing result, or one written before the field existed
        summary_usage = _summed(e.meta.summary_usage for e in events if isinstance(e, ToolCallEvent))
    wall = res.get("wall_s")
    if wall is None:
        wall = max((e.t for e in events), default=0.0)
    return {
        "prompt_tokens": int(usage.get("prompt_tokens") or 0),
        "completion_tokens": int(usage.get("completion_tokens") or 0),
        "total_tokens": int(usage.get("total_tokens") or 0),
        "summary_tokens": int(summary_usage.get("total_tokens") or 0),
        "wall_s": float(wall),
        "cost_usd": _cost(res.get("cost_usd")),
    }


def _action_counts(actions: list[Action], files: dict[str, int]) -> dict[str, Any]:
    """What the actions did: counts by op and category, the documents materialized and revisited, the
    workspace's size, grep and read shapes, the sources fetched and seen."""
    fetched = [d for a in actions if a.op == "fetch" and a.new for d in a.docs]
    materialized = set(files) | set(fetched) | materialized_pages(actions)
    rev = revisited_docs(actions, materialized)
    counts = Counter(a.op for a in actions)
    cats = Counter(CATEGORY[a.op] for a in actions)
    return {
        "n_search": cats["search"],
        "n_select": cats["select"],
        "n_extract": cats["extract"],
        "n_grep": counts["grep"],
        "n_read": counts["read"],
        "n_list": counts["list"],
        "n_other": counts["other"],
        "n_fetch": counts["fetch"],
        "n_fetch_repeat": sum(1 for a in actions if a.op == "fetch" and a.new is False),
        "n_whole_cache_grep": sum(1 for a in actions if a.op == "grep" and a.whole_cache),
        "materialized": len(materialized),
        "revisited": len(rev),
        "revisit_rate": (len(rev) / len(materialized)) if materialized else None,
        "cache_files": len(files),
        "cache_chars": sum(files.values()),
        "n_refused": len({a.call for a in actions if a.refused}),
        "n_unique_fetch": len({d for a in actions if a.op == "fetch" for d in a.docs}),
        "grep_scopes": dict(Counter(a.scope for a in actions if a.op == "grep" and a.scope)),
        "grep_patterns": [a.pattern for a in actions if a.op == "grep" and a.pattern is not None],
        "read_windows": [(a.offset, a.limit) for a in actions if a.op == "read" and not a.error],
        "fetched_sources": list(dict.fromkeys(
            a.source for a in actions if a.source and a.op in ("fetch", "open", "visit"))),
        "seen_sources": list(dict.fromkeys(r for a in actions for r in a.search_refs)),
        "revisited_sources": _sources_of(actions, rev),
        "ops": [a.op for a in actions],
    }


def _sources_of(actions: list[Action], docs: set[str]) -> list[str]:
    """The source (URL/docid) of each document in ``docs``: from the fetch that named it, or the page
    source itself (open/visit)."""
    by_doc: dict[str, str] = {}
    for a in actions:
        if a.source:
            for d in a.docs:
                by_doc.setdefault(d, a.source)
    return sorted(by_doc.get(d, d) for d in docs)


# --- discovery and aggregation ------------------------------------------------------------------------
def collect(roots: Iterable[Path]) -> list[RunMetrics]:
    """:class:`RunMetrics` of every run under ``roots``."""
    out = []
    for root in roots:
        for d, profile, qid, rep in find_runs(Path(root)):
            out.append(run_metrics(d, profile=profile, qid=qid, rep=rep))
    return out


