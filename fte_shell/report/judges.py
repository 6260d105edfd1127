"""The report's "Judges" section: which judge (grading preset, and grading model) graded each row's runs,
the accuracy under each judge kept in ``judgement.json``, Cohen's κ of every pair of judges, and
Avg@K / Best@K / Pass@K under each judge when the runs have repetitions. Definitions: docs/metrics.md
"Judge agreement"."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from ..benchmarks.sections import ReportData, Section, Table, kappa, pct
from ..metrics.judges import Agreement, agreement
from ..metrics.stats import Repetitions, repetitions_of
from ..record.rundir import primary_key, read_judgement, verdicts


def _cell(k: int, n: int) -> str:
    return "–" if n == 0 else f"{pct(k / n)} ({k}/{n})"


def judges_section(d: ReportData) -> Section | None:
    """None unless some verdict names its preset or the runs hold more than one judge's verdicts (a
    sweep judged before presets existed reads as before)."""
    rows: dict[str, dict[str, dict[str, bool]]] = {}  # label -> run -> judge -> correct
    primary: dict[str, Counter[str]] = {}
    reps: dict[str, dict[str, tuple[str, int]]] = {}  # run -> (qid, rep)
    tagged = False
    for label, runs in d.groups.items():
        for r in runs:
            if r.infra_failure:
                continue
            j = read_judgement(Path(r.run_dir))
            vs = verdicts(j)
            if not vs:
                continue
            tagged = tagged or any(v.get("preset") for v in vs.values())
            rows.setdefault(label, {})[r.run_dir] = {k: bool(v["correct"]) for k, v in vs.items()}
            primary.setdefault(label, Counter())[primary_key(j) or "?"] += 1
            reps[r.run_dir] = (r.qid, r.rep)
    judges = sorted({k for by_run in rows.values() for row in by_run.values() for k in row})
    if not judges or (not tagged and len(judges) < 2):
        return None
    by_profile: dict[str, Agreement] = {label: agreement(by_run) for label, by_run in rows.items()}
    head = ["Profile", "Graded by (runs)", *judges]
    body = []
    for label, a in by_profile.items():
        score = {s.judge: s for s in a.judges}
        body.append([label, ", ".join(f"{k} ({n})" for k, n in primary[label].most_common()),
                     *[_cell(score[j].correct, score[j].judged) if j in score else "–" for j in judges]])
    tables: list[Table] = [(head, body)]
    pooled = agreement({run: row for by_run in rows.values() for run, row in by_run.items()})
    if pooled.pairs:
        tables.append((["Judge A", "Judge B", "Both judged", "Agree", "Cohen's κ"],
                       [[p.a, p.b, str(p.n), str(p.agree), kappa(p.kappa)]
                        for p in pooled.pairs]))
    at_k: list[Repetitions] = []
    for label, by_run in rows.items():
        for j in judges:
            v = {reps[run]: row[j] for run, row in by_run.items() if j in row}
            if (x := repetitions_of(f"{label} · {j}", v)) is not None:
                at_k.append(x)
    if at_k:
        tables.append((["Profile · judge", "K", "Avg@K", "Best@K", "Pass@K"],
                       [[x.label, str(x.k), pct(x.mean), pct(x.best_of_k), pct(x.pass_at_k)] for x in at_k]))
    notes = [
        ("Graded by: the judge of each run's primary verdict (the one the main results count: the judge that "
         "graded it last; a grading model's verdict is never displaced by a model-free one), with its run count. "
         "A judge is a grading preset, with the grading model after @ when it calls one. Each judge column: "
         "accuracy over the runs that judge graded (correct/graded)."),
        (f"κ: Cohen's kappa of two judges' verdicts over the runs both graded (all rows pooled); "
         f"{len(pooled.disagreements)} run(s) with differing verdicts (listed in metrics.json and by "
         "`fte-shell judge SWEEP --compare`)."),
    ]
    if at_k:
        notes.append("Avg@K: mean of the K repetitions' accuracies; Best@K: the best repetition's accuracy; "
                     "Pass@K: share of questions some repetition got right — each under one judge's verdicts.")
    metrics = {"judges": {
        "primary": {label: dict(c) for label, c in primary.items()},
        "by_profile": {label: [s.model_dump(mode="json") for s in a.judges] for label, a in by_profile.items()},
        "agreement": pooled.model_dump(mode="json"),
        "repetitions": [x.model_dump(mode="json") for x in at_k],
    }}
    return Section("Judges", tables, notes, metrics=metrics)

