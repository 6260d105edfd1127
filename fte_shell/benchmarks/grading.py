"""Grading a sweep's runs: what a judge pass is asked (:class:`JudgeRequest`), what it did
(:class:`JudgeSummary`), and the default grading of a question/answer benchmark
(:func:`judge_answers`: one grading preset, :mod:`.presets`, over every finished run).

Verdicts are kept per run in ``RUN_DIR/judgement.json``, each judge's under its own key (the preset, and
the grading model when there is one: ``match``, ``llm-equivalence@gpt-4.1``; format: :mod:`fte_shell.record.rundir`),
so the verdicts of several judges stand side by side; a benchmark with a grading of its own keeps it
under its own entry (WideSearch: ``widesearch``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from ..errors import ConfigError, ModelError
from ..record.events import Event, ModelCallEvent
from ..record.rundir import (
    find_runs,
    judge_key,
    made_primary,
    read_events,
    read_judgement,
    read_result,
    remove_judgement,
    verdicts,
    with_verdict,
    write_judgement,
)
from ..record.sweepdir import SweepDir
from ..stops import is_infra_failure
from .llmjudge import LLMJudge
from .presets import BUILTIN, Preset


class JudgeSummary(BaseModel):
    """What one ``judge`` pass did."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    judged: int = 0
    """Runs judged now."""

    cached: int = 0
    """Runs whose verdict was already in ``judgement.json``."""

    skipped: int = 0
    """Runs not judged: unfinished, or no gold answer known."""

    infra_failed: int = 0
    """Runs not judged because they ended for an infrastructure reason (``stops.is_infra_failure``): not
    results, never graded (their old verdicts are removed). Not counted in ``skipped``."""

    errors: list[str] = Field(default_factory=list)
    """One line per run whose judging failed (the others go on)."""

    correct: int = 0
    """Correct verdicts among judged + cached."""

    judges: list[str] = Field(default_factory=list)
    """The judges (``judgement.json`` keys: ``preset`` or ``preset@model``) that graded, in order."""

    notes: list[str] = Field(default_factory=list)
    """What the user should know about the grading chosen (a default preset replaced, and why)."""


@dataclass
class JudgeRequest:
    """One judge pass over one root (a sweep or a single run directory), as a benchmark gets it."""

    root: Path
    """The sweep or run directory to grade."""

    sweep: Path | None
    """The sweep directory holding ``root`` (its ``questions.jsonl`` has the gold answers), or None."""

    preset: Preset = BUILTIN["match"]
    """How to grade (the dataset's default preset or ``--judge-preset``'s)."""

    llm: LLMJudge | None = None
    """The grading model (needed by a model preset; a benchmark may use it for its own grading steps too)."""

    golds: dict[str, str] = field(default_factory=dict)
    """Extra gold answers by qid or ``"question:" + text`` (they win over the sweep's)."""

    force: bool = False
    """Grade again even when a cached verdict is current."""

    concurrency: int = 8
    """Grading calls in flight."""

    on_done: Callable[[], None] | None = None
    """Called after each run graded now."""


def load_golds(root: Path) -> dict[str, str]:
    """``{qid: gold}`` and ``{question text: gold}`` from a sweep's ``questions.jsonl``."""
    out: dict[str, str] = {}
    for q in SweepDir(root).questions().values():
        if q.get("answer") is not None:
            out[str(q["id"])] = str(q["answer"])
            out["question:" + str(q.get("question"))] = str(q["answer"])
    return out


def final_response(events: list[Event]) -> str | None:
    """Content of the last assistant message of a run."""
    for ev in reversed(events):
        if isinstance(ev, ModelCallEvent) and (content := ev.message.get("content")):
            return str(content)
    return None


_Task = tuple[Path, str, str, str | None, str | None, str | None]
"""One run to grade: its directory, question, gold, answer, final response (for a model judge), and the
key of the entry the new verdict replaces."""


def _to_grade(req: JudgeRequest, summary: JudgeSummary, key: str, olds: list[str], model: str | None) -> list[_Task]:
    """The runs under ``req.root`` the judge must grade; the others counted in ``summary`` on the way (no
    result, an infrastructure failure — its old verdicts removed —, no gold, or a cached verdict of the same
    preset, model and gold, made primary again)."""
    preset = req.preset
    known = dict(load_golds(req.sweep) if req.sweep else {})
    known.update(req.golds)
    tasks: list[_Task] = []
    for d, _profile, qid, _rep in find_runs(req.root):
        result = read_result(d)
        if result is None:
            summary.skipped += 1
            continue
        if is_infra_failure(result.get("stop_reason")):  # not a result: never graded
            summary.infra_failed += 1
            remove_judgement(d)
            continue
        question = str(result.get("question") or "")
        gold = known.get(qid or "") if qid else None
        gold = gold or known.get("question:" + question)
        if gold is None:
            summary.skipped += 1
            continue
        data = read_judgement(d) or {}
        kept = verdicts(data)
        old = next((o for o in olds if o in kept), None)
        prev = kept.get(key) or (kept.get(old) if old else None)
        if not req.force and prev is not None and prev.get("gold") == gold and prev.get("judge_model") == model \
                and prev.get("preset") in (None, preset.name, *preset.formerly):
            summary.cached += 1
            summary.correct += bool(prev.get("correct"))
            again = made_primary(data, key) if key in kept else with_verdict(data, key, {**prev, "preset": preset.name},
                                                                               replaces=old)
            if again != data:
                write_judgement(d, again)
            continue
        answer = result.get("answer")
        tasks.append((d, question, gold, answer, final_response(read_events(d)) if preset.needs_model else None,
                      old))
    return tasks


def judge_answers(req: JudgeRequest, summary: JudgeSummary) -> None:
    """Grade every finished run under ``req.root`` against its gold answer with ``req.preset`` and keep
    the verdicts under that judge's key (a cached verdict of the same preset, model and gold is reused and
    made primary again); runs that ended for an infrastructure reason are never graded (old verdicts
    removed)."""
    preset, judge = req.preset, req.llm
    if preset.needs_model and judge is None:
        raise ConfigError(f"the {preset.name} judge preset needs a grading model: pass --judge-model")
    model = judge.model if preset.needs_model and judge is not None else None
    key = judge_key(preset.name, model)
    # the entries it continues: the pre-preset one, those under its former names
    olds = [judge_key(n, model) for n in ((preset.legacy,) if preset.legacy and model else ()) + preset.formerly]
    if key not in summary.judges:
        summary.judges.append(key)
    lock = threading.Lock()
    tasks = _to_grade(req, summary, key, olds, model)

    def one(task: _Task) -> None:
        d, question, gold, answer, response, old = task
        try:
            v = preset.grade(question, response, answer, gold, judge)
        except ModelError as e:
            with lock:
                summary.errors.append(f"{d}: {e}")
            return
        with lock:
            write_judgement(d, with_verdict(read_judgement(d), key, v.model_dump(mode="json"), replaces=old))
            summary.judged += 1
            summary.correct += v.correct
        if req.on_done:
            req.on_done()

    with ThreadPoolExecutor(max_workers=max(1, req.concurrency)) as pool:
        list(pool.map(one, tasks))
