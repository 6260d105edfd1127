"""Query files, TREC run and qrels files, their evaluation (by ir-measures) and the agreement of two runs,
on hand-made files with hand-computed values (docs/metrics.md, "Retrieval on its own")."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from fte_shell.search.retrievers.base import Hit
from fte_shell.search.trec import (
    TrecFileError,
    agreement,
    evaluate,
    read_qrels,
    read_queries,
    read_run,
    write_run,
)


def test_query_files_tsv_and_jsonl(tmp_path: Path) -> None:
    tsv = tmp_path / "q.tsv"
    tsv.write_text("1\twho wrote ulysses\n\nq-2\t  the capital\tof France \n")
    assert [(q.qid, q.text) for q in read_queries(tsv)] == [("1", "who wrote ulysses"), ("q-2", "the capital\tof France")]
    jsonl = tmp_path / "q.jsonl"
    jsonl.write_text('{"query_id": 7, "query": "a b"}\n{"query_id": "x", "query": "c", "extra": 1}\n')
    assert [(q.qid, q.text) for q in read_queries(jsonl)] == [("7", "a b"), ("x", "c")]


@pytest.mark.parametrize(("content", "message"), [
    ("1\tok\n2 no tab here\n", r"q:2: expected qid<TAB>query"),
    ("1\tok\n1\tagain\n", r"q:2: qid '1' appears twice"),
    ("1\t   \n", r"q:1: query '1' is empty"),
    ("a b\tquery\n", r"q:1: qid 'a b' is empty or holds whitespace"),
    ('{"query_id": 1, "query": "x"}\n{"query_id": 2\n', r"q:2: not JSON"),
    ('{"query_id": 1, "query": "x"}\n{"id": 2, "query": "y"}\n', r"q:2: expected \{\"query_id\""),
    ("\n\n", r"q: no queries"),
])
def test_a_bad_query_line_is_named(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "q"
    path.write_text(content)
    with pytest.raises(TrecFileError, match=message):
        read_queries(path)


def test_run_files_round_trip_and_refuse_spaces(tmp_path: Path) -> None:
    run = tmp_path / "out" / "run.txt"
    n = write_run(run, [("q1", [Hit("a", 2.5), Hit("b", 1.25)]), ("q2", []), ("q3", [Hit("c", -0.5)])], "bm25")
    assert n == 3
    assert run.read_text() == "q1 Q0 a 1 2.500000 bm25\nq1 Q0 b 2 1.250000 bm25\nq3 Q0 c 1 -0.500000 bm25\n"
    assert read_run(run) == {"q1": {"a": 2.5, "b": 1.25}, "q3": {"c": -0.5}}
    with pytest.raises(TrecFileError, match="docid 'x y' holds whitespace"):
        write_run(tmp_path / "bad.txt", [("q1", [Hit("x y", 1.0)])], "t")
    assert not (tmp_path / "bad.txt").exists() and not list(tmp_path.glob(".bad*"))
    bad = tmp_path / "bad-run.txt"
    bad.write_text("q1 Q0 a 1 2.5 t\nq1 Q0 b two 1 t\n")
    with pytest.raises(TrecFileError, match="bad-run.txt:2: rank 'two'"):
        read_run(bad)
    qrels = tmp_path / "qrels"
    qrels.write_text("q1 0 a 1\nq1 0 b\n")
    with pytest.raises(TrecFileError, match="qrels:2: expected 4 whitespace-separated columns"):
        read_qrels(qrels)


def test_evaluate_on_hand_computed_values() -> None:
    qrels = {
        "q1": {"a": 1, "b": 1, "c": 0},
        "q2": {"x": 2},
        "q3": {"z": 0},  # no relevant document: not a query of the mean
        "q4": {"m": 1},  # not answered by the run: counts 0
    }
    run = {
        "q1": {"d1": 9.0, "a": 8.0, "e": 7.0, "f": 6.0, "g": 5.0, "b": 4.0},
        "q2": {"x": 1.0},
        "q3": {"z": 1.0},
        "q9": {"a": 1.0},  # not in the qrels: ignored
    }
    result = evaluate(run, qrels)
    assert (result.queries, result.answered) == (3, 2)
    # q1: a at rank 2, b at rank 6 -> R@5 1/2, R@100 1; DCG = 1/log2(3) + 1/log2(7), ideal 1 + 1/log2(3)
    ndcg_q1 = (1 / math.log2(3) + 1 / math.log2(7)) / (1 + 1 / math.log2(3))
    assert result.means["R@5"] == pytest.approx((0.5 + 1 + 0) / 3)
    assert result.means["R@100"] == pytest.approx((1 + 1 + 0) / 3)
    assert result.means["R@1000"] == pytest.approx((1 + 1 + 0) / 3)
    assert result.means["nDCG@10"] == pytest.approx((ndcg_q1 + 1 + 0) / 3)
    assert result.means["nDCG@10"] == pytest.approx(0.535087, abs=1e-6)


def test_agreement_on_hand_made_runs() -> None:
    ref = {
        "q1": [("a", 10.0), ("b", 9.0), ("c", 8.0), ("d", 7.0), ("e", 6.0), ("f", 5.0)],
        "q2": [("a", 4.0), ("b", 3.0)],
        "q3": [("x", 1.0)],
        "q4": [],
    }
    run = {
        "q1": [("a", 10.005), ("b", 9.0), ("c", 8.0), ("d", 7.0), ("e", 6.0), ("g", 1.0)],  # same top 5
        "q2": [("b", 4.0), ("a", 3.0)],  # same set, other order
        "q4": [],  # both empty: agree
    }  # q3 unanswered
    a = agreement(run, ref)
    assert a.queries == 4
    assert a.same_top == pytest.approx(2 / 4)  # q1, q4
    assert a.same_first == pytest.approx(2 / 4)  # q1, q4
    assert a.first_score == pytest.approx(3 / 4)  # q1 (0.005 <= 0.01), q2 (4.0 = 4.0), q4
    assert a.overlap == pytest.approx((1 + 1 + 0 + 1) / 4)
