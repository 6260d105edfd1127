"""Runs that ended for an infrastructure reason: the ``failures.jsonl`` log of every such attempt (the
stop reason of an exception is :func:`fte_shell.stops.stop_of_exception`, the resource it blames
:data:`fte_shell.stops.RESOURCE_OF`).

A run is not a result when its ``stop_reason`` is an infrastructure stop (:mod:`fte_shell.stops`), or
when the harness raised instead of finishing it. Such an attempt is one line of ``OUT/failures.jsonl``
(``{"qid", "profile", "rep", "stop_reason", "error", "when", "run_dir"}``, and ``context`` in an arm of a
context strategy other than keep_all, ``retriever`` in a sweep of retrievers, ``corpus_in_box`` in a
corpus arm); its ``result.json`` keeps the
infrastructure stop reason, so the judge and the report leave it out and a resume redoes it.
"""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any

from ..errors import FteError
from ..record.rundir import read_result, update_result
from .config import Task
from .state import now


def describe_exception(e: BaseException) -> str:
    """``Class: message`` (plus the last frames of the traceback for unexpected exceptions)."""
    text = f"{e.__class__.__name__}: {e}"
    if not isinstance(e, FteError):
        text += "\n" + "".join(traceback.format_exception(e)[-3:])
    return text


def record_raised(t: Task, stop: str, error: str) -> None:
    """Give a run whose harness raised a ``result.json`` naming the infrastructure stop (through
    :func:`fte_shell.record.rundir.update_result`): the runner's own record (``crashed``) is kept, with
    ``stop_reason`` set to the resource when the exception named one and ``error`` added unless it has one;
    without a record a minimal one is written."""
    old = read_result(t.run_dir) or {}
    changes: dict[str, Any] = {} if stop == "failed" and old else {"stop_reason": stop}
    if "error" not in old:
        changes["error"] = error
    update_result(t.run_dir, changes, default={
        "question": t.question.question, "answer": None, "profile": t.profile, "stop_reason": stop,
        "error": error, "qid": t.question.id, "rep": t.rep, "finished_at": now(),
    })


def failure_row(out: Path, t: Task, stop_reason: str, error: str | None) -> dict[str, Any]:
    """The ``failures.jsonl`` line of an infrastructure-failed attempt of ``t`` (appended by
    :meth:`fte_shell.record.sweepdir.SweepDir.add_failure`)."""
    try:
        rel = str(t.run_dir.relative_to(out))
    except ValueError:
        rel = str(t.run_dir)
    return {"qid": t.question.id, "profile": t.profile, "rep": t.rep, "stop_reason": stop_reason,
            "error": error, "when": now(), "run_dir": rel,
            **({"context": t.context.label} if t.context is not None and t.context.strategy != "keep_all" else {}),
            **({"retriever": t.retriever} if t.retriever is not None else {}),
            **({"corpus_in_box": True} if t.corpus else {})}
