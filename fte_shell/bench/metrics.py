"""Behavioural metrics of runs, from their run directories, for every profile (definitions:
``docs/metrics.md``).

A run is turned into a sequence of :class:`Action` (one per structured tool call; one per classified
simple command of each shell ``bash`` call, with fetches taken from the record lines the ``fetch`` helper
printed). Per-run numbers are :class:`RunMetrics`; :func:`summarize` averages them per profile.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .shellparse import parse_command

Op = Literal["search", "fetch", "visit", "open", "grep", "read", "find", "list", "other"]
Category = Literal["search", "select", "extract", "other"]
CATEGORY: dict[str, Category] = {
    "search": "search",
    "fetch": "select",
    "visit": "select",
    "open": "select",
    "grep": "extract",
    "read": "extract",
    "find": "extract",
    "list": "other",
    "other": "other",
}
STRUCTURED_OPS: dict[str, Op] = {
    "search": "search",
    "fetch": "fetch",
    "visit": "visit",
    "open": "open",
    "grep": "grep",
    "read": "read",
    "find": "find",
    "list_fetched": "list",
}
NOT_FINISHED = ("failed", "crashed", "incomplete")
"""Stop reasons of runs left out of the per-profile means (counted as ``failed``)."""
SHELL_TOOL = "bash"
MOUNT = "/work"
RECORD_RE = re.compile(r'^(?P<path>/\S+\.txt)  (?P<chars>[\d,]+) chars  (?P<state>new|held)  (?P<source>\S+)', re.MULTILINE)
DOC_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\.txt")


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class Action(_M):
    """One classified agent action."""

    turn: int
    """Model turn of the tool call it belongs to."""

    call: int
    """Index of the tool call in the run (0-based)."""

    op: Op
    """What it does (shared vocabulary of both interfaces)."""

    tool: str
    """Tool name (structured) or program name (shell)."""

    docs: list[str] = Field(default_factory=list)
    """Workspace documents (file names) it touches: fetched, grepped or read."""

    whole_cache: bool = False
    """A grep over every cached document."""

    new: bool | None = None
    """For fetch: True = newly materialized, False = already held (a repeat), None = failed/unknown."""


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

    stop_reason: str
    """``answer``, ``max_turns``, …, or ``failed`` (the harness raised) / ``incomplete`` (no result.json)."""

    answered: bool
    """The run ended with an ``<answer>``."""

    correct: bool | None = None
    """Judged correct (LLM judge if present, else the model-free exact match); None = not judged."""

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

    ops: list[str] = Field(default_factory=list)
    """The action sequence (ops), for n-grams."""


# --- reading a run directory --------------------------------------------------------------------------
def read_events(run_dir: Path) -> list[dict[str, Any]]:
    """Events of ``trajectory.jsonl``; a torn last line (a killed run) is skipped."""
    path = Path(run_dir) / "trajectory.jsonl"
    if not path.exists():
        return []
    events = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            ev = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(ev, dict):
            events.append(ev)
    return events


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object file, or None when missing or unreadable."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def workspace_files(run_dir: Path) -> dict[str, int]:
    """``{file name: body chars}`` of ``RUN_DIR/workspace`` (body = after the first blank line)."""
    ws = Path(run_dir) / "workspace"
    out: dict[str, int] = {}
    if not ws.is_dir():
        return out
    for p in sorted(ws.iterdir()):
        if p.is_file() and p.suffix == ".txt" and not p.name.startswith("."):
            text = p.read_text(encoding="utf-8", errors="replace")
            _header, sep, body = text.partition("\n\n")
            out[p.name] = len(body) if sep else len(text)
    return out


def judged(judgement: dict[str, Any] | None) -> tuple[bool | None, float | None]:
    """(correct, f1) from ``judgement.json``: the LLM verdict wins over the model-free one."""
    if not judgement:
        return None, None
    llm, match = judgement.get("llm"), judgement.get("match")
    f1 = match.get("f1") if isinstance(match, dict) else None
    for j in (llm, match):
        if isinstance(j, dict) and isinstance(j.get("correct"), bool):
            return j["correct"], f1
    return None, f1


# --- actions ------------------------------------------------------------------------------------------
def _records(observation: str) -> list[tuple[str, bool]]:
    """(file name, new) of every fetch record line in an observation."""
    return [(posixpath.basename(m["path"]), m["state"] == "new") for m in RECORD_RE.finditer(observation)]


def _names_in(text: str, among: Iterable[str]) -> list[str]:
    found = set(DOC_NAME_RE.findall(text))
    return [d for d in among if d in found]


def _doc_of(path: Any) -> str | None:
    if not isinstance(path, str) or not path.strip():
        return None
    return posixpath.basename(path.strip())


def actions_from_events(events: Sequence[dict[str, Any]], final_docs: Iterable[str] = ()) -> list[Action]:
    """Turn the tool-call events of a run into actions. ``final_docs`` (the end-of-run workspace listing)
    completes the listing known at each point for documents whose fetch record was not seen."""
    recorded: list[str] = []
    for ev in events:
        if ev.get("type") == "tool_call":
            recorded.extend(n for n, _ in _records(str(ev.get("observation") or "")))
    unrecorded = [d for d in final_docs if d not in set(recorded)]
    known: list[str] = list(unrecorded)  # documents present at this point
    cwd = MOUNT
    out: list[Action] = []
    call = -1
    for ev in events:
        if ev.get("type") != "tool_call":
            continue
        call += 1
        turn = int(ev.get("turn") or 0)
        name = str(ev.get("name") or "")
        args = ev.get("arguments") if isinstance(ev.get("arguments"), dict) else {}
        obs = str(ev.get("observation") or "")
        error = bool(ev.get("error"))
        if name == SHELL_TOOL:
            command = args.get("command") if isinstance(args, dict) else None
            if not isinstance(command, str):
                out.append(Action(turn=turn, call=call, op="other", tool=name))
                continue
            parsed = parse_command(command, known, mount=MOUNT, cwd=cwd)
            cwd = parsed.cwd_after
            records = _records(obs)
            rec_i = 0
            n_fetch_cmds = sum(1 for c in parsed.commands if c.kind == "fetch")
            extra_records = max(0, len(records) - n_fetch_cmds)  # loops/multi-URL fetches
            for c in parsed.commands:
                if c.kind == "fetch":
                    take = 1 + (extra_records if rec_i == 0 else 0)
                    got = records[rec_i : rec_i + take]
                    rec_i += take
                    if not got:
                        out.append(Action(turn=turn, call=call, op="fetch", tool=c.tool))
                    for doc, new in got:
                        out.append(Action(turn=turn, call=call, op="fetch", tool=c.tool, docs=[doc], new=new))
                        if doc not in known:
                            known.append(doc)
                elif c.kind == "grep" and len(c.docs) > 1:
                    shown = _names_in(obs, c.docs)
                    out.append(Action(turn=turn, call=call, op="grep", tool=c.tool, docs=shown,
                                      whole_cache=c.whole_cache))
                else:
                    out.append(Action(turn=turn, call=call, op=c.kind, tool=c.tool, docs=c.docs,
                                      whole_cache=c.whole_cache and c.kind == "grep"))
            if not parsed.commands:
                out.append(Action(turn=turn, call=call, op="other", tool=name))
            continue
        op: Op = STRUCTURED_OPS.get(name, "other")
        docs: list[str] = []
        whole = False
        new: bool | None = None
        if op == "fetch":
            recs = _records(obs) if not error else []
            meta = ev.get("meta") if isinstance(ev.get("meta"), dict) else {}
            if recs:
                docs, new = [recs[0][0]], recs[0][1]
            elif not error and _doc_of(meta.get("path")):
                docs, new = [_doc_of(meta.get("path"))], meta.get("new")  # type: ignore[list-item]
            for d in docs:
                if d not in known:
                    known.append(d)
        elif op in ("grep", "read") and not error:
            raw = args.get("path")
            doc = _doc_of(raw)
            if isinstance(raw, str) and posixpath.normpath(posixpath.join(MOUNT, raw.strip() or ".")) == MOUNT:
                doc = None  # the mount itself = every cached file
            if doc is not None:
                docs = [doc] if doc in known or op == "read" else []
            elif op == "grep":
                whole = True
                docs = _names_in(obs, known)
        out.append(Action(turn=turn, call=call, op=op, tool=name, docs=docs, whole_cache=whole, new=new))
    return out


def revisited_docs(actions: Sequence[Action], materialized: Iterable[str]) -> set[str]:
    """Materialized documents extracted from (grep/read/find) at least twice with an action touching a
    different document strictly in between."""
    mat = set(materialized)
    last_extract: set[str] = set()
    other_since: dict[str, bool] = {}
    revisited: set[str] = set()
    for a in actions:
        touched = set(a.docs)
        is_extract = CATEGORY[a.op] == "extract"
        if is_extract:
            for d in touched:
                if d in last_extract and other_since.get(d):
                    revisited.add(d)
                last_extract.add(d)
                other_since[d] = False
        for d in last_extract:
            if d in touched and is_extract:
                continue
            if touched - {d}:
                other_since[d] = True
    return revisited & mat


def ngrams(seq: Sequence[str], n: int) -> Counter[tuple[str, ...]]:
    """Counts of consecutive n-grams of ``seq``."""
    return Counter(tuple(seq[i : i + n]) for i in range(len(seq) - n + 1))


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


def run_metrics(run_dir: Path, *, profile: str | None = None, qid: str | None = None, rep: int = 0) -> RunMetrics:
    """Compute :class:`RunMetrics` of one run directory."""
    run_dir = Path(run_dir)
    result = read_json(run_dir / "result.json")
    events = read_events(run_dir)
    start = next((e for e in events if e.get("type") == "start"), {})
    files = workspace_files(run_dir)
    actions = actions_from_events(events, files)
    fetched = [d for a in actions if a.op == "fetch" and a.new for d in a.docs]
    materialized = set(files) | set(fetched)
    rev = revisited_docs(actions, materialized)
    correct, f1 = judged(read_json(run_dir / "judgement.json"))
    usage = (result or {}).get("usage") or _summed(e.get("usage") for e in events if e.get("type") == "model_call")
    summary_usage = (result or {}).get("summary_usage")
    if not isinstance(summary_usage, dict):  # a missing result, or one written before the field existed
        summary_usage = _summed(
            (e.get("meta") or {}).get("summary_usage") for e in events
            if e.get("type") == "tool_call" and isinstance(e.get("meta"), dict)
        )
    counts = Counter(a.op for a in actions)
    cats = Counter(CATEGORY[a.op] for a in actions)
    stop = (result or {}).get("stop_reason") or "incomplete"
    wall = (result or {}).get("wall_s")
    if wall is None:
        wall = max((float(e.get("t") or 0) for e in events), default=0.0)
    return RunMetrics(
        run_dir=str(run_dir),
        profile=profile or (result or {}).get("profile") or start.get("profile") or "?",
        model=(result or {}).get("model") or start.get("model"),
        qid=qid or run_dir.name,
        rep=rep,
        stop_reason=stop,
        answered=(result or {}).get("answer") is not None,
        correct=correct,
        f1=f1,
        turns=int((result or {}).get("turns") or sum(1 for e in events if e.get("type") == "model_call")),
        calls=sum(1 for e in events if e.get("type") == "tool_call"),
        n_search=cats["search"],
        n_select=cats["select"],
        n_extract=cats["extract"],
        n_grep=counts["grep"],
        n_read=counts["read"],
        n_list=counts["list"],
        n_other=counts["other"],
        n_fetch=counts["fetch"],
        n_fetch_repeat=sum(1 for a in actions if a.op == "fetch" and a.new is False),
        n_whole_cache_grep=sum(1 for a in actions if a.op == "grep" and a.whole_cache),
        materialized=len(materialized),
        revisited=len(rev),
        revisit_rate=(len(rev) / len(materialized)) if materialized else None,
        cache_files=len(files),
        cache_chars=sum(files.values()),
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        total_tokens=int(usage.get("total_tokens") or 0),
        summary_tokens=int(summary_usage.get("total_tokens") or 0),
        wall_s=float(wall),
        ops=[a.op for a in actions],
    )


# --- discovery and aggregation ------------------------------------------------------------------------
def find_runs(root: Path) -> list[tuple[Path, str | None, str | None, int]]:
    """Run directories under ``root``: a sweep (``runs/<profile>/<qid>/r<k>/``), or one run directory
    (it has ``trajectory.jsonl``). Returns (dir, profile, qid, rep)."""
    root = Path(root)
    if (root / "trajectory.jsonl").exists() or (root / "result.json").exists():
        return [(root, None, None, 0)]
    base = root / "runs" if (root / "runs").is_dir() else root
    out = []
    for d in sorted(base.glob("*/*/r*")):
        m = re.fullmatch(r"r(\d+)", d.name)
        if m and d.is_dir():
            out.append((d, d.parent.parent.name, d.parent.name, int(m.group(1))))
    return out


def collect(roots: Iterable[Path]) -> list[RunMetrics]:
    """:class:`RunMetrics` of every run under ``roots``."""
    out = []
    for root in roots:
        for d, profile, qid, rep in find_runs(Path(root)):
            out.append(run_metrics(d, profile=profile, qid=qid, rep=rep))
    return out


class ProfileSummary(_M):
    """Per-profile averages over its runs (per question, then averaged)."""

    profile: str
    """Profile name."""

    runs: int
    """Runs found (finished or not)."""

    failed: int
    """Runs the harness could not finish (``failed``/``crashed``/``incomplete``); excluded from the
    averages below."""

    judged: int
    """Finished runs with a verdict."""

    accuracy: float | None
    """Share of judged runs judged correct."""

    f1: float | None
    """Mean token F1 (model-free judge), if any."""

    answered: float | None
    """Share of finished runs that ended with an answer."""

    search: float | None
    """Mean #Search per question."""

    select: float | None
    """Mean #Select per question."""

    extract: float | None
    """Mean #Extract per question."""

    grep: float | None
    """Mean grep-like extractions per question."""

    read: float | None
    """Mean read-like extractions per question."""

    list: float | None
    """Mean listings per question."""

    other: float | None
    """Mean other actions per question."""

    calls: float | None
    """Mean tool calls per question."""

    revisit_rate: float | None
    """Mean revisit rate over runs with at least one materialized document."""

    grep_read_ratio: float | None
    """Total grep-like / total read-like extractions (None without reads)."""

    whole_cache_grep_share: float | None
    """Share of questions with at least one whole-cache grep."""

    fetch_repeat_pct: float | None
    """Percent of fetches that named an already cached document (None without fetches)."""

    cache_files: float | None
    """Mean end-of-run cache size in files."""

    cache_chars: float | None
    """Mean end-of-run cache size in body characters."""

    tokens: float | None
    """Mean total tokens per question."""

    prompt_tokens: float | None
    """Mean prompt tokens per question."""

    completion_tokens: float | None
    """Mean completion tokens per question."""

    summary_tokens: float | None
    """Mean reader-model tokens per question (visit-summary's ``visit``; 0 for other profiles), not
    included in ``tokens``."""

    wall_s: float | None
    """Mean wall-clock seconds per question."""

    distribution: dict[str, float] = Field(default_factory=dict)
    """Share of each op among all actions."""

    bigrams: list[tuple[str, int]] = Field(default_factory=list)
    """Most frequent op bigrams (``a→b``) with counts, pooled over runs."""

    trigrams: list[tuple[str, int]] = Field(default_factory=list)
    """Most frequent op trigrams with counts."""


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def summarize_profile(profile: str, runs: Sequence[RunMetrics], top: int = 10) -> ProfileSummary:
    """Average ``runs`` of one profile (see :class:`ProfileSummary` for each definition)."""
    ok = [r for r in runs if r.stop_reason not in NOT_FINISHED]
    judged_runs = [r for r in ok if r.correct is not None]
    f1s = [r.f1 for r in ok if r.f1 is not None]
    reads = sum(r.n_read for r in ok)
    fetches = sum(r.n_fetch for r in ok)
    ops = Counter(op for r in ok for op in r.ops)
    n_ops = sum(ops.values())
    bi: Counter[tuple[str, ...]] = Counter()
    tri: Counter[tuple[str, ...]] = Counter()
    for r in ok:
        bi.update(ngrams(r.ops, 2))
        tri.update(ngrams(r.ops, 3))

    def m(attr: str) -> float | None:
        return _mean([float(getattr(r, attr)) for r in ok])

    return ProfileSummary(
        profile=profile,
        runs=len(runs),
        failed=len(runs) - len(ok),
        judged=len(judged_runs),
        accuracy=_mean([1.0 if r.correct else 0.0 for r in judged_runs]),
        f1=_mean(f1s),
        answered=_mean([1.0 if r.answered else 0.0 for r in ok]),
        search=m("n_search"),
        select=m("n_select"),
        extract=m("n_extract"),
        grep=m("n_grep"),
        read=m("n_read"),
        list=m("n_list"),
        other=m("n_other"),
        calls=m("calls"),
        revisit_rate=_mean([r.revisit_rate for r in ok if r.revisit_rate is not None]),
        grep_read_ratio=(sum(r.n_grep for r in ok) / reads) if reads else None,
        whole_cache_grep_share=_mean([1.0 if r.n_whole_cache_grep else 0.0 for r in ok]),
        fetch_repeat_pct=(100.0 * sum(r.n_fetch_repeat for r in ok) / fetches) if fetches else None,
        cache_files=m("cache_files"),
        cache_chars=m("cache_chars"),
        tokens=m("total_tokens"),
        prompt_tokens=m("prompt_tokens"),
        completion_tokens=m("completion_tokens"),
        summary_tokens=m("summary_tokens"),
        wall_s=m("wall_s"),
        distribution={k: v / n_ops for k, v in sorted(ops.items())} if n_ops else {},
        bigrams=[("→".join(k), v) for k, v in bi.most_common(top)],
        trigrams=[("→".join(k), v) for k, v in tri.most_common(top)],
    )


def group_label(run: RunMetrics, several_models: bool) -> str:
    """The row a run belongs to: its profile, or ``profile · model`` when the runs used several models."""
    return f"{run.profile} · {run.model}" if several_models and run.model else run.profile


def summarize(runs: Sequence[RunMetrics]) -> list[ProfileSummary]:
    """One :class:`ProfileSummary` per profile (per profile and model when the runs used more than one
    model, e.g. reports over sweeps of several backbones), in order of first appearance."""
    several = len({r.model for r in runs if r.model}) > 1
    labels = [group_label(r, several) for r in runs]
    groups = list(dict.fromkeys(labels))
    return [summarize_profile(g, [r for r, lab in zip(runs, labels) if lab == g]) for g in groups]
