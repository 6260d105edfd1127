"""The hand check's numbers (docs/metrics.md "Hand check"): how many runs a reviewer marked, the accuracy
with the reviewer's marks in place of the judge's verdicts, and how often judge and reviewer agree."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from ..record.audit import AuditMark, audit_home, latest_marks, run_key
from .runs import RunMetrics
from .stats import cohen_kappa


class AuditSummary(BaseModel):
    """The hand check of one group of runs (a report row)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    label: str
    """The row (profile, or profile @ model)."""

    scored: int
    """Runs that are results (no infrastructure failure) with a judge's verdict or a reviewer's mark."""

    audited: int
    """Of those, runs a reviewer marked."""

    judge_accuracy: float | None
    """Correct by the judge / runs with a judge's verdict (None without any)."""

    audited_accuracy: float | None
    """Correct / ``scored``, taking the reviewer's mark where there is one and the judge's verdict
    elsewhere (None when ``scored`` is 0)."""

    agree: int
    """Marked runs with a judge's verdict on which judge and reviewer agree."""

    compared: int
    """Marked runs with a judge's verdict (the denominator of ``agreement``)."""

    agreement: float | None
    """``agree / compared`` (None when nothing was compared)."""

    kappa: float | None
    """Cohen's κ of judge and reviewer over the compared runs (None when nothing was compared)."""


def marks_of(runs: Sequence[RunMetrics]) -> dict[str, AuditMark]:
    """``{resolved run directory: its latest mark}`` for ``runs``, reading each audit file once."""
    homes: dict[Path, dict[str, AuditMark]] = {}
    out: dict[str, AuditMark] = {}
    for r in runs:
        d = Path(r.run_dir).resolve()
        home = audit_home(d)
        if home not in homes:
            homes[home] = latest_marks(home)
        mark = homes[home].get(run_key(home, d))
        if mark is not None:
            out[str(d)] = mark
    return out


def audit_summary(label: str, runs: Sequence[RunMetrics], marks: Mapping[str, AuditMark]) -> AuditSummary:
    """The hand check of ``runs``; ``marks`` by resolved run directory (:func:`marks_of`)."""
    scored = audited = agree = compared = right = judged_n = judged_right = 0
    pairs: list[tuple[bool, bool]] = []
    for r in runs:
        if r.infra_failure:
            continue
        mark = marks.get(str(Path(r.run_dir).resolve()))
        human = None if mark is None else mark.mark == "correct"
        if r.correct is None and human is None:
            continue
        scored += 1
        if r.correct is not None:
            judged_n += 1
            judged_right += r.correct
        if human is not None:
            audited += 1
            right += human
            if r.correct is not None:
                compared += 1
                agree += r.correct == human
                pairs.append((r.correct, human))
        else:
            right += bool(r.correct)
    return AuditSummary(
        label=label, scored=scored, audited=audited,
        judge_accuracy=judged_right / judged_n if judged_n else None,
        audited_accuracy=right / scored if scored else None,
        agree=agree, compared=compared, agreement=agree / compared if compared else None,
        kappa=cohen_kappa(pairs) if pairs else None,
    )
