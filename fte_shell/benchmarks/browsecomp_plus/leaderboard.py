"""A BrowseComp-Plus sweep as the leaderboard sees it: its run files (:mod:`.runfile`) per arm and
repetition, with the qrels and corpus they are scored against (:func:`sweep_data`, :func:`run_files`;
``fte-shell export browsecomp-plus`` writes them), and the report section of the official figures
(:func:`official_section`, :mod:`.official`; docs/metrics.md "BrowseComp-Plus official figures").
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ...errors import FteError
from ...record.rundir import primary_key, read_judgement, verdicts
from ...record.sweepdir import SweepDir
from ..sections import ReportData, Section, pct
from .official import PRESET, QREL_FILES, OfficialFigures, evaluate, from_run_file, qrels_file, read_raw_qrels
from .pins import describe
from .runfile import CorpusDocids, run_file

KIND = "browsecomp-plus"


@dataclass
class SweepData:
    """What a BrowseComp-Plus sweep's run files are made and scored with."""

    root: Path
    questions: dict[str, dict[str, Any]]
    """``questions.jsonl`` by qid."""
    qrels: dict[str, dict[str, list[str]]]
    """``evidence``/``gold`` → the qrels as the official script reads them (:func:`.official.read_raw_qrels`)."""
    qrels_from: dict[str, str]
    """Where each came from (a qrels file, or the queries' own lists when the dataset has none)."""
    resolve: CorpusDocids
    revisions: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    """What a reader must know (no qrels file, queries without judgments, qrels docids not in the corpus)."""

    def query_id(self, qid: str) -> str:
        """The dataset's own query id of a question (the run file's ``query_id``)."""
        return str(((self.questions.get(qid) or {}).get("meta") or {}).get("query_id") or qid)


def sweep_data(root: Path) -> SweepData:
    """Read what :class:`SweepData` holds from the sweep ``root`` (its manifest, questions, dataset
    directory and corpus index); a qrels docid the corpus lacks, or a query without judgments, is named in
    ``problems``."""
    sd = SweepDir(root)
    manifest = sd.manifest()
    if manifest is None or manifest.dataset.kind != KIND:
        raise FteError(f"{root}: not a BrowseComp-Plus sweep (its sweep.json names dataset kind "
                       f"{manifest.dataset.kind if manifest else None!r}); run `fte-shell bench browsecomp-plus:DIR` first")
    questions = sd.questions()
    source = Path(manifest.dataset.source) if manifest.dataset.source else None
    corpus = (manifest.config.get("search") or {}).get("corpus")
    urls = {d: u for q in questions.values() for d, u in ((q.get("meta") or {}).get("doc_urls") or {}).items()}
    resolve = CorpusDocids(Path(corpus) if corpus else None, urls)
    data = SweepData(root=Path(root), questions=questions, qrels={}, qrels_from={}, resolve=resolve,
                     revisions=dict(manifest.dataset.revisions))
    ids = {data.query_id(q) for q in questions}
    for kind in QREL_FILES:
        path = qrels_file(source, kind) if source is not None and source.is_dir() else None
        if path is not None:
            data.qrels[kind], data.qrels_from[kind] = read_raw_qrels(path), str(path)
        else:
            data.qrels[kind] = {data.query_id(q): list((row.get("meta") or {}).get(f"{kind}_docids") or [])
                                for q, row in questions.items()}
            data.qrels_from[kind] = "the queries file's lists"
            data.problems.append(f"no {kind} qrels file in {source} ({QREL_FILES[kind][0]}): {kind} figures use the "
                                 "queries file's own lists; the official script reads the qrels file")
        if missing := sorted(q for q in ids if not data.qrels[kind].get(q)):
            data.problems.append(f"{len(missing)} quer{'y' if len(missing) == 1 else 'ies'} without {kind} judgments "
                                 f"in {data.qrels_from[kind]} ({', '.join(missing[:5])}): left out of the {kind} recall "
                                 "(the official script stops with a division by zero on them)")
        if resolve.checked:
            absent = sorted({d for q in ids for d in data.qrels[kind].get(q, []) if not resolve.has(d)})
            if absent:
                data.problems.append(f"{len(absent)} {kind} docid(s) of {data.qrels_from[kind]} are not in the corpus "
                                     f"({', '.join(absent[:5])}): no run can retrieve them, so the {kind} recall of "
                                     "their queries cannot reach 100%")
    if not resolve.checked:
        data.problems.append(f"the corpus index {corpus} is not there: URLs are mapped to docids only for the "
                             "evidence and gold documents, and docids are not checked against the corpus")
    return data


def grader_reply(run_dir: Path) -> str | None:
    """The grader's reply of a run's ``browsecomp-plus`` verdict (the primary one when several models
    graded), None when no such verdict exists."""
    judgement = read_judgement(run_dir)
    mine = {k: v for k, v in verdicts(judgement).items() if v.get("preset") == PRESET}
    if not mine:
        return None
    key = primary_key(judgement)
    entry = mine[key] if key in mine else mine[max(mine)]
    raw = entry.get("raw")
    return raw if isinstance(raw, str) else None


def run_files(data: SweepData, runs: Iterable[tuple[Path, str, str, int]]
              ) -> Iterator[tuple[Path, str, int, dict[str, Any] | None]]:
    """(run_dir, arm, rep, run file) of each run ``(run_dir, arm, qid, rep)``; the run file is None for a run
    that is not a result (an infrastructure failure: it is to be run again, not scored)."""
    for run_dir, arm, qid, rep in runs:
        yield run_dir, arm, rep, run_file(run_dir, data.query_id(qid), data.resolve, arm=arm, rep=rep)


def sweep_runs(root: Path) -> list[tuple[Path, str, str, int]]:
    """``(run_dir, arm, qid, rep)`` of every run of a sweep (the arm is the run's directory under ``runs/``)."""
    return [(d, d.parent.parent.name, str(qid), rep) for d, _p, qid, rep in SweepDir(root).runs() if qid is not None]


# --- the report section ---------------------------------------------------------------------------------
HEAD = ["Arm", "Runs", "Completed", "Accuracy", "Recall", "Gold recall", "Search calls", "Calibration error",
        "Cited responses", "Citation precision", "Citation recall", "Gold citation precision", "Gold citation recall"]


def figures_of(data: SweepData, files: list[dict[str, Any]], replies: list[str | None]) -> dict[str, OfficialFigures]:
    """The official figures of one arm's run files against the evidence and the gold qrels."""
    runs = [from_run_file(f, r) for f, r in zip(files, replies, strict=True)]
    return {kind: evaluate(runs, data.qrels[kind]) for kind in QREL_FILES}


def _row(label: str, ev: OfficialFigures, gold: OfficialFigures) -> list[str]:
    return [label, str(ev.runs), str(ev.completed), pct(ev.accuracy, 2), pct(ev.recall, 2), pct(gold.recall, 2),
            f"{ev.tool_calls.get('search', 0.0):.2f}", f"{ev.calibration_error:.2f}%",
            f"{ev.with_citations}/{ev.runs}", pct(ev.citation_precision, 2), pct(ev.citation_recall, 2),
            pct(gold.citation_precision, 2), pct(gold.citation_recall, 2)]


def official_section(d: ReportData) -> Section | None:
    """The BrowseComp-Plus official figures per arm (and repetition), as the benchmark's evaluation script
    computes them from the run files ``fte-shell export browsecomp-plus`` writes."""
    roots = [Path(r) for r in d.roots if SweepDir(Path(r)).dataset_kind() == KIND]
    if not roots:
        return None
    table: list[list[str]] = []
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    for root in roots:
        data = sweep_data(root)
        groups: dict[tuple[str, int], tuple[list[dict[str, Any]], list[str | None]]] = {}
        reps: dict[str, set[int]] = {}
        for run_dir, arm, rep, f in run_files(data, sweep_runs(root)):
            if f is None:
                continue
            files, replies = groups.setdefault((arm, rep), ([], []))
            files.append(f)
            replies.append(grader_reply(run_dir))
            reps.setdefault(arm, set()).add(rep)
        for (arm, rep), (files, replies) in sorted(groups.items()):
            label = arm if len(reps[arm]) == 1 else f"{arm} r{rep}"
            fig = figures_of(data, files, replies)
            table.append(_row(label, fig["evidence"], fig["gold"]))
            rows.append({"sweep": str(root), "arm": arm, "rep": rep,
                         **{kind: asdict(x) for kind, x in fig.items()}})
            if fig["evidence"].unjudged:
                notes.append(f"{label}: {fig['evidence'].unjudged} completed run(s) have no {PRESET} verdict, so "
                             f"accuracy and the citation figures are not final: run `fte-shell judge {root} "
                             "--judge-model MODEL`.")
            if 0 < fig["evidence"].confidences < 100:
                notes.append(f"{label}: {fig['evidence'].confidences} confidence(s): the official script needs at "
                             "least 100 for a calibration error and reports 0.")
        notes += [f"{root}: {p}" for p in data.problems]
        notes += [f"{root}: data pinned — {line}" for line in describe(data.revisions)] or \
                 [f"{root}: no data revisions recorded (a sweep written before they were)."]
    notes.insert(0, "As BrowseComp-Plus's evaluation script computes them from the run files `fte-shell export "
                 "browsecomp-plus` writes (docs/metrics.md, 'BrowseComp-Plus official figures'): accuracy over "
                 "every result run (an unanswered run counts, not correct), recall of the evidence (gold) qrels "
                 "among the retrieved docids, search calls per run, calibration error over the grader's "
                 "confidences, citation figures over the responses that cite.")
    return Section("BrowseComp-Plus official figures", [(HEAD, table)], notes,
                   metrics={"browsecomp_plus_official": rows})

