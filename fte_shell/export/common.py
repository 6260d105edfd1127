"""What every export reads: the runs of sweeps and run directories (through :mod:`fte_shell.record`), and
each run's conversation rebuilt from its typed events, the way the loop held it (docs/export.md).

A run's conversation: the system prompt and the question (the start event), then per model call the
assistant message, its tool results (``tool_call`` events, whole observations) and the user turns the loop
added (``nudge``, ``final_answer_request``). Events that are not part of the conversation (``retry``,
``text_tool_call``) are kept with their turn; the rest (``warning``, ``error``, ``end``, unknown types) in
:attr:`Conversation.others`, so an exporter can place every event somewhere.
"""

from __future__ import annotations

import datetime as _dt
import gc
import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from ..metrics.edits import context_label
from ..profiles import parse_arguments
from ..record.audit import AuditMark, audit_home, latest_marks, run_key
from ..record.events import (
    EndEvent,
    Event,
    FinalAnswerRequestEvent,
    ModelCallEvent,
    NudgeEvent,
    RetryEvent,
    StartEvent,
    TextToolCallEvent,
    ToolCallEvent,
    event_dict,
)
from ..record.rundir import arm_name, is_run_dir, read_events, read_judgement, read_result, runs_under
from ..record.sweepdir import SweepDir, SweepManifest
from ..stops import is_infra_failure

EPOCH = "1970-01-01T00:00:00+00:00"
"""The time stamped on a run that recorded none (a run the sweep wrote without a trajectory)."""


@dataclass
class Run:
    """One run as an export reads it."""

    run_dir: Path
    profile: str
    qid: str
    rep: int
    task: str
    """The dataset's name (the manifest's ``dataset.kind``; ``runs`` for a lone run directory)."""
    dataset: dict[str, Any]
    """The manifest's ``dataset`` (kind, source, split), or ``{}``."""
    source: Path
    """The sweep (or run) directory it was read from."""
    question: str
    target: str
    """The gold answer (``questions.jsonl``), ``""`` when unknown."""
    question_row: dict[str, Any]
    result: dict[str, Any] | None
    judgement: dict[str, Any] | None
    events: list[Event]
    manifest: SweepManifest | None = None
    audit: AuditMark | None = None
    """The reviewer's latest hand-check mark of the run (``audit.jsonl``), if any."""

    @cached_property
    def start(self) -> StartEvent | None:
        return next((e for e in self.events if isinstance(e, StartEvent)), None)

    @cached_property
    def end(self) -> EndEvent | None:
        return next((e for e in reversed(self.events) if isinstance(e, EndEvent)), None)

    @cached_property
    def context(self) -> str:
        """The run's context strategy as spelled on the command line (``keep_recent:5``; ``keep_all`` for
        runs before ``[agent.context]``)."""
        return context_label(self.events)

    @cached_property
    def retriever(self) -> str | None:
        """The retriever that ranked the run's local corpus (None: no local corpus;
        :func:`fte_shell.metrics.runs.run_retriever`)."""
        from ..metrics.runs import run_retriever

        return run_retriever(self.result, self.start.config if self.start else None)

    @property
    def arm(self) -> str:
        """The run's arm: the profile, ``profile@strategy``, or ``profile@retriever[+strategy]`` in a sweep of
        retrievers (:func:`fte_shell.record.rundir.arm_name`)."""
        from ..metrics.runs import run_corpus_in_box

        axis = self.manifest is not None and bool(getattr(self.manifest, "retrievers", None))
        return arm_name(self.profile, self.context, self.retriever if axis else None, run_corpus_in_box(self.result))

    @property
    def stop_reason(self) -> str | None:
        r = (self.result or {}).get("stop_reason")
        return str(r) if r else None

    @property
    def infra_failure(self) -> bool:
        """Not a result (:func:`fte_shell.stops.is_infra_failure`; no result.json counts too)."""
        return is_infra_failure(self.stop_reason)

    @property
    def model(self) -> str:
        """The agent model: ``result.json``, else the start event, else the sweep's ``[model]`` (a run the
        sweep wrote without a trajectory)."""
        res, st = self.result or {}, self.start
        sweep = (self.manifest.config.get("model") or {}).get("model") if self.manifest is not None else None
        return str(res.get("model") or (st.model if st else None) or sweep or "unknown")

    @property
    def run_id(self) -> str:
        return str((self.result or {}).get("run_id") or (self.start.run_id if self.start else None)
                   or f"{self.qid}-{self.arm}-r{self.rep}")

    @cached_property
    def origin(self) -> tuple[_dt.datetime, float]:
        """(when the loop started, the ``t`` of the start event): see :func:`clock`."""
        st = self.start
        return _time(self.started_at), (st.t if st is not None else 0.0)

    @property
    def started_at(self) -> str:
        """ISO time the loop started (``result.json``'s ``started_at``; else when the sweep wrote it)."""
        res = self.result or {}
        return str(res.get("started_at") or res.get("finished_at") or EPOCH)

    @property
    def cell(self) -> tuple[str, str, str]:
        """(dataset spec, arm, model): one Inspect eval log each (the arm: the profile, or
        ``profile@strategy`` for a context strategy other than keep_all)."""
        spec = str((self.manifest.bench.get("dataset") if self.manifest is not None else None) or self.task)
        return spec, self.arm, self.model


def _time(iso: str) -> _dt.datetime:
    t = _dt.datetime.fromisoformat(iso)
    return t if t.tzinfo else t.replace(tzinfo=_dt.UTC)


def clock(run: Run) -> tuple[_dt.datetime, float]:
    """(when the loop started, the ``t`` of the start event): an event's time is
    ``base + (ev.t - t0)``, deterministic for a given record."""
    return run.origin


def at(run: Run, t: float) -> _dt.datetime:
    base, t0 = clock(run)
    return base + _dt.timedelta(seconds=max(0.0, t - t0))


def stable_id(*parts: object, n: int = 22) -> str:
    """A deterministic id from ``parts`` (hex of SHA-256)."""
    return hashlib.sha256(json.dumps([str(p) for p in parts]).encode()).hexdigest()[:n]


@contextmanager
def records_frozen() -> Iterator[None]:
    """Keep the objects alive now (the run records read) out of the garbage collector's passes while an
    export builds its output: they live until the export ends, and a large sweep's records made each
    full collection walk them again (a quarter of an export's time at 200 runs, more with more runs)."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def read_runs(paths: Iterable[Path]) -> list[Run]:
    """Every run under ``paths`` (sweep directories or run directories), in path order; ConfigError for a
    path that is neither (:func:`fte_shell.record.rundir.runs_under`)."""
    out: list[Run] = []
    for p in paths:
        p = Path(p)
        found: list[tuple[Path, str | None, str | None, int | None]] = list(runs_under(p))
        home = audit_home(p)
        marks = latest_marks(home)
        if is_run_dir(p):
            found = [(p, None, None, None)]  # the repetition it recorded, not find_runs' 0
            manifest, questions = None, {}
        else:
            sd = SweepDir(p)
            manifest, questions = sd.manifest(), sd.questions()
        for d, profile, qid, rep in found:
            run = read_run(d, profile, qid, rep, p, manifest, questions)
            run.audit = marks.get(run_key(home, d))
            out.append(run)
    return out


def read_run(d: Path, profile: str | None, qid: str | None, rep: int | None, source: Path,
             manifest: SweepManifest | None, questions: dict[str, dict[str, Any]]) -> Run:
    """One run directory ``d`` (of the sweep ``source`` with its manifest and questions, or on its own)."""
    result, events = read_result(d), read_events(d)
    st = next((e for e in events if isinstance(e, StartEvent)), None)
    meta = (result or {}).get("meta") or {}
    qid = qid or str(meta.get("qid") or (result or {}).get("qid") or d.name)
    if rep is None:  # a run directory on its own: the repetition it recorded
        r = meta.get("rep", (result or {}).get("rep"))
        rep = r if isinstance(r, int) and not isinstance(r, bool) else 0
    row = questions.get(qid, {})
    dataset = manifest.dataset.model_dump(mode="json", exclude_unset=True) if manifest is not None else {}
    question = str(row.get("question") or (result or {}).get("question") or (st.question if st else ""))
    gold = row.get("answer")
    return Run(run_dir=d, profile=str(profile or (result or {}).get("profile") or (st.profile if st else None)
                                      or "unknown"),
               qid=qid, rep=rep, task=str(dataset.get("kind") or "runs"), dataset=dataset, source=source,
               question=question, target="" if gold is None else str(gold), question_row=row, result=result,
               judgement=read_judgement(d), events=events, manifest=manifest)


# --- the conversation -------------------------------------------------------------------------------------
@dataclass
class Message:
    """One message of the conversation as the loop held it (OpenAI roles)."""

    role: str
    content: str
    event: Event | None
    """The event it comes from (start, model_call, tool_call, nudge, final_answer_request)."""


@dataclass
class Turn:
    """One model call: where in the conversation it was made, and what belongs to it."""

    call: ModelCallEvent
    context: int
    """Messages of the conversation before the call (its input)."""
    message: int
    """Index of the assistant message it produced."""
    tools: list[ToolCallEvent] = field(default_factory=list)
    retries: list[RetryEvent] = field(default_factory=list)
    text_calls: list[TextToolCallEvent] = field(default_factory=list)


@dataclass
class Conversation:
    messages: list[Message]
    turns: list[Turn]
    others: list[Event]
    """Events that are neither a message nor part of a turn (warnings, errors, the end, unknown types)."""


def conversation(run: Run) -> Conversation:
    """The run's conversation and its turns, from its events."""
    msgs: list[Message] = []
    turns: list[Turn] = []
    others: list[Event] = []
    pending: dict[int, tuple[list[RetryEvent], list[TextToolCallEvent]]] = {}
    for ev in run.events:
        if isinstance(ev, StartEvent):
            msgs += [Message("system", ev.system_prompt or "", ev), Message("user", ev.question, ev)]
        elif isinstance(ev, RetryEvent):
            pending.setdefault(ev.turn, ([], []))[0].append(ev)
        elif isinstance(ev, TextToolCallEvent):
            pending.setdefault(ev.turn, ([], []))[1].append(ev)
        elif isinstance(ev, ModelCallEvent):
            retries, texts = pending.pop(ev.turn, ([], []))
            turns.append(Turn(ev, len(msgs), len(msgs), retries=retries, text_calls=texts))
            msgs.append(Message("assistant", str(ev.message.get("content") or ""), ev))
        elif isinstance(ev, ToolCallEvent):
            if turns and turns[-1].call.turn == ev.turn:
                turns[-1].tools.append(ev)
            else:
                others.append(ev)  # a tool call with no recorded model call (never written by the loop)
            msgs.append(Message("tool", ev.observation, ev))
        elif isinstance(ev, NudgeEvent | FinalAnswerRequestEvent):
            msgs.append(Message("user", ev.message, ev))
        else:
            others.append(ev)
    for retries, texts in pending.values():  # retries of a call that failed in the end
        others += [*retries, *texts]
    return Conversation(msgs, turns, sorted(others, key=lambda e: e.t))


def tool_calls_of(turn: Turn) -> list[dict[str, Any]]:
    """The turn's tool calls ``{id, name, arguments (dict), raw, parse_error}``: the reply's own, then any
    executed call the reply does not hold (taken from text), in order."""
    out: list[dict[str, Any]] = []
    for tc in turn.call.message.get("tool_calls") or []:
        fn = tc.get("function") or {}
        raw = fn.get("arguments")
        args, err = _parsed(raw)
        out.append({"id": str(tc.get("id") or ""), "name": str(fn.get("name") or ""), "arguments": args,
                    "raw": raw if isinstance(raw, str) else json.dumps(raw), "parse_error": err})
    ids = {c["id"] for c in out}
    for ev in turn.tools:
        if (ev.id or "") not in ids:
            args, err = _parsed(ev.raw_arguments) if ev.arguments is None else (ev.arguments, None)
            out.append({"id": ev.id or "", "name": ev.name, "arguments": args, "raw": ev.raw_arguments,
                        "parse_error": err})
    return out


def _parsed(raw: Any) -> tuple[dict[str, Any], str | None]:
    """Raw tool-call arguments as the episode parsed them (:func:`fte_shell.profiles.parse_arguments`): the
    dict (``{}`` when unusable) and the reason when they are not a JSON object."""
    args, problem = parse_arguments(raw)
    return args or {}, None if problem is None else f"arguments {problem}"


def plain(ev: Event) -> dict[str, Any]:
    """An event as the JSON object in ``trajectory.jsonl``."""
    return event_dict(ev)


def safe_name(*parts: str) -> str:
    """A file-name part from ``parts`` (``[A-Za-z0-9._-]``, joined by ``_``)."""
    return "_".join(re.sub(r"[^A-Za-z0-9._-]+", "-", p).strip("-") or "x" for p in parts)
