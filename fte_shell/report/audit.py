"""The report's "Hand check" section: per row, the runs a reviewer marked in ``fte-shell view``, the
accuracy with those marks in place of the judge's verdicts, and judge–reviewer agreement (numbers defined
in docs/metrics.md "Hand check"). Absent when no run of the report was marked."""

from __future__ import annotations

from ..benchmarks.sections import ReportData, Section, integer, num, pct
from ..metrics.audit import audit_summary, marks_of


def audit_section(d: ReportData) -> Section | None:
    marks = marks_of(d.runs)
    if not marks:
        return None
    rows = [audit_summary(label, runs, marks) for label, runs in d.groups.items()]
    head = ["Row", "Scored", "Audited", "Judge accuracy", "Audited accuracy", "Agreement", "κ (judge, human)"]
    body = [[s.label, integer(s.scored), integer(s.audited), pct(s.judge_accuracy), pct(s.audited_accuracy),
             f"{pct(s.agreement)} ({s.agree}/{s.compared})", num(s.kappa)] for s in rows]
    notes = [("Audited: runs a reviewer marked correct or wrong in fte-shell view (audit.jsonl; the latest mark of "
              "a run counts). Audited accuracy: correct / scored, taking the reviewer's mark where there is one "
              "and the judge's verdict elsewhere. Agreement and Cohen's κ: judge against reviewer over the marked "
              "runs that have a judge's verdict.")]
    return Section("Hand check", [(head, body)], notes, metrics={"audit": [s.model_dump(mode="json") for s in rows]})
