"""A run's verdicts (``judgement.json``) as Inspect AI scores (docs/export.md, "Scores").

One score per verdict (:func:`fte_shell.record.rundir.verdicts`: a grading model's under
``<preset>@<model>``, the model-free ``match``): ``C``/``I`` with the judge's extracted answer and reasoning
as ``answer`` and ``explanation``; a verdict with token F1 / exact match adds ``<key>_f1`` and ``<key>_em``;
``verdict`` repeats the primary verdict (the one the run is counted by); WideSearch's entry
is a dict of its six values and the success score (``score``), explained by its ``msg``; a reviewer's
hand check (``audit.jsonl``, the latest mark) is ``hand_check``, ``C``/``I`` explained by the note. Each
score's ``metadata`` holds the whole entry as recorded."""

from __future__ import annotations

from typing import Any

from ..record.rundir import primary_key, verdicts
from .common import Run

WIDESEARCH_VALUES = ("score", "precision_by_row", "recall_by_row", "f1_by_row", "precision_by_item",
                     "recall_by_item", "f1_by_item")
"""WideSearch's values kept as the score's dict value (their names, as the benchmark reports them)."""
VERDICT = "verdict"
"""The score that repeats the verdict the run is counted by (``judgement.json``'s primary), whichever judge
gave it: one column to compare runs by."""


def scores_of(run: Run) -> dict[str, Any]:
    """``{score name: Score}`` of one run (empty when it was not judged)."""
    from inspect_ai.scorer import Score

    out: dict[str, Any] = {}
    judgement = run.judgement or {}
    kept = verdicts(judgement)
    for name, entry in sorted(kept.items()):
        explanation = entry.get("reasoning") or _match_note(entry)
        out[name] = Score(value="C" if entry.get("correct") else "I",
                          answer=entry.get("extracted_final_answer") or entry.get("answer"),
                          explanation=explanation, metadata=entry)
        if isinstance(entry.get("f1"), int | float):
            out[f"{name}_f1"] = Score(value=float(entry["f1"]), answer=entry.get("answer"),
                                      explanation=f"token F1 against {entry.get('gold')!r}")
        if isinstance(entry.get("em"), int | float):
            out[f"{name}_em"] = Score(value=float(entry["em"]), answer=entry.get("answer"),
                                      explanation=f"normalized exact match against {entry.get('gold')!r}")
    if (primary := primary_key(judgement)) is not None:
        first = out[primary]
        out[VERDICT] = Score(value=first.value, answer=first.answer, explanation=first.explanation,
                             metadata={"judge": primary})
    for name, entry in sorted(judgement.items()):
        if name in kept or not isinstance(entry, dict):
            continue
        if all(isinstance(entry.get(k), int | float) for k in WIDESEARCH_VALUES):
            value = {k: float(entry[k]) for k in WIDESEARCH_VALUES}
            why = entry.get("msg") or (f"{entry.get('response_rows')} answer row(s) against "
                                       f"{entry.get('gold_rows')} gold row(s); {len(entry.get('judge_calls') or [])} "
                                       "judge call(s)")
            out[name] = Score(value=value, answer=(run.result or {}).get("answer"), explanation=why, metadata=entry)
    if run.audit is not None:
        m = run.audit
        out["hand_check"] = Score(value="C" if m.mark == "correct" else "I", answer=(run.result or {}).get("answer"),
                                  explanation=m.note or f"marked {m.mark} by {m.who}", metadata=m.model_dump())
    return out


def _match_note(entry: dict[str, Any]) -> str | None:
    if entry.get("method") != "match":
        return None
    return f"exact match {entry.get('em')}, token F1 {entry.get('f1')} against the gold answer {entry.get('gold')!r}"
