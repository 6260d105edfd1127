"""Retrieval on its own: query files in, TREC run files out, and their evaluation against qrels.

* A **query file** is a TSV (``qid<TAB>query`` per line, as Anserini's ``TsvString`` topics) or a JSONL
  (``{"query_id", "query"}`` per line, as BrowseComp-Plus's queries); which one is told by the first
  non-blank line (a JSON object or not).
* A **run file** is TREC's ``qid Q0 docid rank score tag`` (one line per retrieved document, whitespace
  separated: qids, docids and the tag hold no whitespace).
* A **qrels file** is TREC's ``qid 0 docid relevance``.
* :func:`evaluate` gives recall@5/100/1000 and nDCG@10 computed by ir-measures (pytrec_eval underneath),
  over the queries of the qrels with at least one relevant document; such a query the run does not answer
  counts 0 (``trec_eval -c``). docs/metrics.md defines them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import FteError
from ..record.jsonio import iter_lines, write_lines_atomic
from .retrievers.base import Hit

MEASURES = ("R@5", "R@100", "R@1000", "nDCG@10")
"""What ``fte-shell corpus evaluate`` prints, in ir-measures' names."""


class TrecFileError(FteError):
    """A query, run or qrels file cannot be read (a bad line, named by file and line number)."""


@dataclass(frozen=True, slots=True)
class Query:
    """One query of a query file."""

    qid: str
    text: str


def _bad(path: Path, no: int, what: str) -> TrecFileError:
    return TrecFileError(f"{path}:{no}: {what}")


def _check_id(path: Path, no: int, what: str, value: str) -> str:
    if not value or any(c.isspace() for c in value):
        raise _bad(path, no, f"{what} {value!r} is empty or holds whitespace (TREC files split on whitespace)")
    return value


def read_queries(path: Path) -> list[Query]:
    """The queries of a TSV or JSONL query file, in file order. A bad line, an empty query or a repeated
    qid raises :class:`TrecFileError` naming the file and line."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise TrecFileError(f"{path}: cannot read the query file ({e})") from e
    first = next((ln for ln in lines if ln.strip()), "")
    jsonl = first.lstrip().startswith("{")
    out: list[Query] = []
    seen: set[str] = set()
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        if jsonl:
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise _bad(path, no, f"not JSON ({e.msg}); a JSONL query file has {{query_id, query}} lines") from e
            if not isinstance(obj, dict) or "query_id" not in obj or not isinstance(obj.get("query"), str):
                raise _bad(path, no, "expected {\"query_id\": …, \"query\": \"…\"}")
            qid, text = str(obj["query_id"]), obj["query"]
        else:
            qid, tab, text = line.partition("\t")
            if not tab:
                raise _bad(path, no, "expected qid<TAB>query (no tab on the line)")
        qid = _check_id(path, no, "qid", qid.strip())
        if not text.strip():
            raise _bad(path, no, f"query {qid!r} is empty")
        if qid in seen:
            raise _bad(path, no, f"qid {qid!r} appears twice")
        seen.add(qid)
        out.append(Query(qid, text.strip()))
    if not out:
        raise TrecFileError(f"{path}: no queries")
    return out


def format_run_lines(qid: str, hits: Sequence[Hit], tag: str) -> Iterable[str]:
    """The run-file lines of one query's ranked hits (rank from 1)."""
    for rank, hit in enumerate(hits, 1):
        yield f"{qid} Q0 {hit.docid} {rank} {hit.score:.6f} {tag}\n"


def write_run(path: Path, results: Iterable[tuple[str, Sequence[Hit]]], tag: str) -> int:
    """Write ``(qid, hits)`` pairs as a TREC run file, atomically; returns the number of lines. A docid,
    qid or tag holding whitespace raises :class:`TrecFileError` (nothing is written)."""
    path = Path(path)
    if not tag or any(c.isspace() for c in tag):
        raise TrecFileError(f"run tag {tag!r} is empty or holds whitespace")
    path.parent.mkdir(parents=True, exist_ok=True)

    def lines() -> Iterator[str]:
        for qid, hits in results:
            for hit in hits:
                if not hit.docid or any(c.isspace() for c in hit.docid):
                    raise TrecFileError(f"query {qid}: docid {hit.docid!r} holds whitespace; a TREC run "
                                        "file cannot carry it")
            yield from format_run_lines(qid, hits, tag)

    return write_lines_atomic(path, lines())


def _columns(path: Path, n: int, what: str) -> Iterable[tuple[int, list[str]]]:
    for no, line in iter_lines(path, TrecFileError):
        cols = line.split()
        if len(cols) != n:
            raise _bad(path, no, f"expected {n} whitespace-separated columns in a {what} file, got {len(cols)}")
        yield no, cols


def read_run(path: Path) -> dict[str, dict[str, float]]:
    """A TREC run file as {qid: {docid: score}}; a bad line raises :class:`TrecFileError`."""
    path = Path(path)
    run: dict[str, dict[str, float]] = {}
    for no, (qid, _q0, docid, rank, score, _tag) in _columns(path, 6, "run (qid Q0 docid rank score tag)"):
        try:
            int(rank)
            value = float(score)
        except ValueError:
            raise _bad(path, no, f"rank {rank!r} or score {score!r} is not a number") from None
        if not math.isfinite(value):
            raise _bad(path, no, f"score {score!r} is not finite")
        run.setdefault(qid, {})[docid] = value
    return run


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """A TREC qrels file as {qid: {docid: relevance}}; a bad line raises :class:`TrecFileError`."""
    path = Path(path)
    qrels: dict[str, dict[str, int]] = {}
    for no, (qid, _it, docid, rel) in _columns(path, 4, "qrels (qid 0 docid relevance)"):
        try:
            qrels.setdefault(qid, {})[docid] = int(rel)
        except ValueError:
            raise _bad(path, no, f"relevance {rel!r} is not an integer") from None
    if not qrels:
        raise TrecFileError(f"{path}: no judgements")
    return qrels


@dataclass(frozen=True, slots=True)
class Evaluation:
    """The mean of each measure over the ``queries`` of the qrels with a relevant document; ``answered``
    of them are in the run."""

    means: dict[str, float]
    queries: int
    answered: int


def evaluate(run: dict[str, dict[str, float]], qrels: dict[str, dict[str, int]],
             measures: Sequence[str] = MEASURES) -> Evaluation:
    """:data:`MEASURES` of ``run`` against ``qrels`` by ir-measures, averaged over the qrels' queries with at
    least one relevant document (a query the run does not answer counts 0)."""
    try:
        import ir_measures
    except ImportError as e:
        raise FteError("evaluating a run needs ir-measures: pip install 'fte-shell[ireval]'") from e
    parsed = [ir_measures.parse_measure(m) for m in measures]
    judged = sorted(q for q, docs in qrels.items() if any(r > 0 for r in docs.values()))
    if not judged:
        raise FteError("the qrels judge no document relevant: nothing to evaluate")
    answered = {q: run[q] for q in judged if run.get(q)}
    sums = {str(m): 0.0 for m in parsed}
    if answered:
        for metric in ir_measures.iter_calc(parsed, {q: qrels[q] for q in judged}, answered):
            sums[str(metric.measure)] += float(metric.value)
    means = {name: total / len(judged) for name, total in sums.items()}
    return Evaluation(means=means, queries=len(judged), answered=len(answered))


@dataclass(frozen=True, slots=True)
class Agreement:
    """How far a run agrees with a reference run over the reference's queries (docs/metrics.md):
    ``same_top`` the fraction whose top ``depth`` docids are the same list in the same order; ``same_first``
    the fraction with the same first docid; ``first_score`` the fraction whose first scores differ by at
    most ``rel_tol`` of the reference's; ``overlap`` the mean |top depth ∩ reference top depth| / |reference top depth|."""

    queries: int
    same_top: float
    same_first: float
    first_score: float
    overlap: float


def agreement(run: dict[str, list[tuple[str, float]]], reference: dict[str, list[tuple[str, float]]],
              depth: int = 5, rel_tol: float = 1e-3) -> Agreement:
    """:class:`Agreement` of ``run`` with ``reference`` ({qid: [(docid, score), …] best first}); a query
    ``run`` does not answer agrees on nothing (two empty lists are the same list)."""
    if not reference:
        raise FteError("the reference run has no queries")
    same_top = same_first = first_score = 0
    overlap = 0.0
    for qid, ref in reference.items():
        got = run.get(qid, [])[:depth]
        ref = ref[:depth]
        same_top += [d for d, _ in got] == [d for d, _ in ref]
        if got and ref:
            same_first += got[0][0] == ref[0][0]
            first_score += abs(got[0][1] - ref[0][1]) <= rel_tol * abs(ref[0][1])
        elif not got and not ref:
            same_first += 1
            first_score += 1
        if ref:
            overlap += len({d for d, _ in got} & {d for d, _ in ref}) / len(ref)
        else:
            overlap += not got
    n = len(reference)
    return Agreement(n, same_top / n, same_first / n, first_score / n, overlap / n)
