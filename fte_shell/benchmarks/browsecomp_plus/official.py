"""BrowseComp-Plus's official figures, computed the way its evaluation script computes them
(``scripts_evaluation/evaluate_with_openai.py`` of texttron/BrowseComp-Plus; definitions and the script's
oddities: docs/metrics.md "BrowseComp-Plus official figures").

The script reads one run file per query (:mod:`.runfile` builds them) and, per run, the grader's reply to
the benchmark's ``GRADER_TEMPLATE``. This module holds what it computes from them, on plain values:

- :func:`parse_grader_reply`: ``correct`` and ``confidence`` of a grader reply (first match, the bold
  spellings before the plain one; a confidence above 100 is 100; no ``correct`` = a parse error);
- :func:`cited_docids`: every run of digits inside ``[...]`` or ``【...】`` of the response;
- :func:`read_raw_qrels`: a qrels file as the script reads it (every line, relevance not read);
- :func:`calibration_error`: HLE's ``calib_err`` (p=2) with bins of 100 sorted confidences, the last bin
  (which takes the remainder) left out, and 0 below 100 confidences;
- :func:`evaluate`: accuracy, evidence recall, tool calls per query, calibration error and citation
  precision/recall of one run directory's worth of runs (:class:`OfficialRun`).

The gold-document variant is the same computation with ``qrel_golds.txt`` in place of
``qrel_evidence.txt`` (the script's ``--qrel_evidence``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import ConfigError

PRESET = "browsecomp-plus"
"""The grading preset that asks the benchmark's own ``GRADER_TEMPLATE`` (the verdicts these figures read)."""
CALIBRATION_BIN = 100
"""Confidences per calibration bin (the script's ``beta``); fewer confidences than this give 0."""
QREL_FILES = {"evidence": ("topics-qrels/qrel_evidence.txt", "qrel_evidence.txt"),
              "gold": ("topics-qrels/qrel_golds.txt", "qrel_golds.txt", "topics-qrels/qrel_gold.txt")}
"""Where a dataset directory keeps its qrels, per kind (the clone's ``topics-qrels/``; the benchmark's
README spells the gold file ``qrel_gold.txt``, its repository ``qrel_golds.txt``)."""


def qrels_file(root: Path, kind: str) -> Path | None:
    """The ``evidence`` or ``gold`` qrels file of the dataset directory ``root``, if it has one."""
    return next((root / n for n in QREL_FILES[kind] if (root / n).is_file()), None)


# --- the grader's reply ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class GraderReply:
    """What the script reads from one grader reply."""

    correct: bool | None
    """``yes``/``no`` of the first ``correct:`` field; None = a parse error."""
    confidence: float | None
    """The first ``confidence:`` number (decimals allowed), 100 when above 100; None when absent."""
    extracted_final_answer: str | None = None
    """The first ``extracted_final_answer:`` value, stripped."""

    @property
    def parse_error(self) -> bool:
        return self.correct is None


def _field_patterns(name: str, value: str) -> list[re.Pattern[str]]:
    """The three spellings the script tries, in its order: ``**name:**``, ``**name**:``, ``name:``."""
    return [re.compile(rf"\*\*{name}:\*\*\s*{value}", re.IGNORECASE | re.DOTALL),
            re.compile(rf"\*\*{name}\*\*:\s*{value}", re.IGNORECASE | re.DOTALL),
            re.compile(rf"{name}:\s*{value}", re.IGNORECASE | re.DOTALL)]


_ANSWER = _field_patterns("extracted_final_answer", r"(.*?)(?=\n|$)")
_CORRECT = _field_patterns("correct", r"(yes|no)")
_CONFIDENCE = _field_patterns("confidence", r"(\d+(?:\.\d+)?)")


def _first(patterns: Sequence[re.Pattern[str]], text: str) -> str | None:
    for p in patterns:
        m = p.search(text)
        if m:
            return m.group(1)
    return None


def parse_grader_reply(text: str | None) -> GraderReply:
    """The fields of a grader reply as the script reads them: each field's first match anywhere in the
    reply (so ``incorrect: no`` reads as ``correct: no``), trying the bold spellings first."""
    if not text:
        return GraderReply(correct=None, confidence=None)
    correct = _first(_CORRECT, text)
    conf = _first(_CONFIDENCE, text)
    answer = _first(_ANSWER, text)
    return GraderReply(correct=None if correct is None else correct.lower() == "yes",
                       confidence=None if conf is None else min(float(conf), 100.0),
                       extracted_final_answer=None if answer is None else answer.strip())


# --- citations and qrels --------------------------------------------------------------------------------
_BRACKETS = (re.compile(r"\[([^\[\]]*)\]"), re.compile(r"【([^【】]*)】"))


def cited_docids(response: str | None) -> list[str]:
    """The docids a response cites as the script finds them: every run of digits inside a ``[...]`` or
    ``【...】`` that holds no bracket itself (so ``[12, 40]`` cites 12 and 40, and a year in brackets
    counts too); sorted, each once."""
    found: set[str] = set()
    for rx in _BRACKETS:
        for inside in rx.findall(response or ""):
            found.update(re.findall(r"\d+", inside))
    return sorted(found)


def read_raw_qrels(path: Path) -> dict[str, list[str]]:
    """``{query_id: [docid, …]}`` of a qrels file as the script reads it: every line of 4 fields, in file
    order, whatever its relevance (a line with relevance 0 counts, a repeated line counts twice)."""
    out: dict[str, list[str]] = {}
    for i, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 4:
            raise ConfigError(f"{path}:{i}: a qrels line has 4 fields (query_id iteration docid relevance)")
        out.setdefault(parts[0], []).append(parts[2])
    return out


def citation_scores(cited: Sequence[str], relevant: Sequence[str]) -> tuple[float, float]:
    """(precision, recall) of one response's citations: relevant cited / cited, and relevant cited / the
    qrels lines of its query (0 when there are none, or no citations)."""
    if not cited:
        return 0.0, 0.0
    hit = len(set(cited) & set(relevant))
    return hit / len(cited), (hit / len(relevant) if relevant else 0.0)


# --- calibration ----------------------------------------------------------------------------------------
def calibration_error(confidences: Sequence[float], correct: Sequence[bool], beta: int = CALIBRATION_BIN) -> float:
    """HLE's RMS calibration error in percent as the script computes it: confidences (0-100) sorted
    ascending (numpy's default argsort, so ties keep numpy's order), cut into ``len // beta`` bins of
    ``beta``, the last bin stretched to the end; every bin but that last one adds
    ``size / n * (mean confidence - accuracy)²``; the result is ``100 * sqrt(sum)``. Fewer than ``beta``
    confidences give 0 (the script prints a warning and reports 0.0)."""
    if len(confidences) != len(correct):
        raise ValueError("one correctness per confidence")
    n = len(confidences)
    if n < beta:
        return 0.0
    import numpy as np

    conf = np.asarray(confidences, dtype=float) / 100.0
    ok = np.asarray(correct, dtype=float)
    order = np.argsort(conf)
    conf, ok = conf[order], ok[order]
    bins = n // beta
    total = 0.0
    for b in range(bins - 1):  # the last bin (with the remainder) is never added: the script's loop
        lo, hi = b * beta, (b + 1) * beta
        total += (hi - lo) / n * float(np.mean(conf[lo:hi]) - np.mean(ok[lo:hi])) ** 2
    return 100.0 * total ** 0.5


# --- one run directory ----------------------------------------------------------------------------------
@dataclass
class OfficialRun:
    """One run file's worth of what the script reads, with the grader's reply when it was judged."""

    query_id: str
    completed: bool
    """``status == "completed"``."""
    response: str
    """The last ``output_text`` of ``result`` ("" when none)."""
    retrieved_docids: list[str]
    tool_call_counts: dict[str, int]
    grader_reply: str | None = None
    """The grader's reply to ``GRADER_TEMPLATE``; None when not judged."""

    @property
    def judged_by_script(self) -> bool:
        """The script asks the grader only about a completed run with a response."""
        return self.completed and self.response != ""


def from_run_file(data: dict[str, Any], grader_reply: str | None) -> OfficialRun:
    """What the script reads of one run file (:func:`.runfile.run_file`'s object, or one read from disk)."""
    items = data.get("result") or []
    last = items[-1] if items else {}
    return OfficialRun(query_id=str(data.get("query_id")), completed=data.get("status") == "completed",
                       response=str(last.get("output") or "") if last.get("type") == "output_text" else "",
                       retrieved_docids=[str(d) for d in data.get("retrieved_docids") or []],
                       tool_call_counts=dict(data.get("tool_call_counts") or {}), grader_reply=grader_reply)


@dataclass
class OfficialFigures:
    """The script's summary of one run directory (and the counts behind each figure)."""

    runs: int
    """Runs evaluated (the denominator of accuracy and of the tool-call means)."""
    completed: int
    """Runs with status ``completed`` and a response (the ones the grader is asked about)."""
    unjudged: int
    """Of those, runs with no grader reply yet (accuracy and the citation figures need them all)."""
    correct: int
    """Runs the grader called correct."""
    accuracy: float | None
    """``correct / runs`` (None while runs are unjudged)."""
    recall: float | None
    """Mean over runs whose query has qrels lines of |retrieved ∩ qrels| / qrels lines (None: no such run)."""
    recall_runs: int
    """Runs in that mean."""
    no_qrels: list[str]
    """Query ids without qrels lines (the script divides by zero on them; left out of the recall here)."""
    tool_calls: dict[str, float]
    """Per tool: calls summed over runs / runs."""
    confidences: int
    """Judged runs without a parse error and with a confidence (the calibration's points)."""
    calibration_error: float
    """:func:`calibration_error` of them (0 below 100)."""
    with_citations: int
    """Judged runs whose response cites at least one docid."""
    citations_per_response: float
    """Cited docids per response among those."""
    citation_precision: float
    """Mean citation precision over the responses with citations (0 when none)."""
    citation_recall: float
    """Mean citation recall over the responses with citations (0 when none)."""
    parse_errors: int = 0
    """Judged runs whose grader reply has no ``correct:`` field."""
    per_query: list[dict[str, object]] = field(default_factory=list)
    """``{query_id, correct, recall}`` per run (recall in [0, 1]; None without qrels)."""


def evaluate(runs: Sequence[OfficialRun], qrels: dict[str, list[str]]) -> OfficialFigures:
    """The script's figures of ``runs`` against ``qrels`` (:func:`read_raw_qrels` of ``qrel_evidence.txt``,
    or of ``qrel_golds.txt`` for the gold variant)."""
    n = len(runs)
    correct = 0
    unjudged = parse_errors = 0
    confs: list[float] = []
    oks: list[bool] = []
    cites: list[tuple[int, float, float]] = []
    recalls: list[float] = []
    no_qrels: list[str] = []
    tools: dict[str, int] = {}
    per_query: list[dict[str, object]] = []
    for r in runs:
        for name, count in r.tool_call_counts.items():
            tools[name] = tools.get(name, 0) + count
        relevant = qrels.get(r.query_id, [])
        recall = len(set(r.retrieved_docids) & set(relevant)) / len(relevant) if relevant else None
        if recall is None:
            no_qrels.append(r.query_id)
        else:
            recalls.append(recall)
        ok = False
        if r.judged_by_script:
            if r.grader_reply is None:
                unjudged += 1
            else:
                reply = parse_grader_reply(r.grader_reply)
                ok = reply.correct is True
                if reply.parse_error:
                    parse_errors += 1
                elif reply.confidence is not None:
                    confs.append(reply.confidence)
                    oks.append(bool(reply.correct))
                cited = cited_docids(r.response)
                if cited:
                    cites.append((len(cited), *citation_scores(cited, relevant)))
        correct += ok
        per_query.append({"query_id": r.query_id, "correct": ok, "recall": recall})
    k = len(cites)
    return OfficialFigures(
        runs=n, completed=sum(1 for r in runs if r.judged_by_script), unjudged=unjudged, correct=correct,
        accuracy=(correct / n if n else 0.0) if not unjudged else None,
        recall=sum(recalls) / len(recalls) if recalls else None, recall_runs=len(recalls), no_qrels=no_qrels,
        tool_calls={t: c / n for t, c in tools.items()} if n else {},
        confidences=len(confs), calibration_error=calibration_error(confs, oks),
        with_citations=k, citations_per_response=sum(c[0] for c in cites) / k if k else 0.0,
        citation_precision=sum(c[1] for c in cites) / k if k else 0.0,
        citation_recall=sum(c[2] for c in cites) / k if k else 0.0,
        parse_errors=parse_errors, per_query=per_query,
    )
