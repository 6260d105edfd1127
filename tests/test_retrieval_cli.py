"""``fte-shell corpus retrieve`` and ``corpus evaluate`` on the HotpotQA pages, run as a user runs them (the
real CLI in a child process, the real Anserini behind ``bm25``).

The 600 questions are the queries; the qrels are each question's supporting pages that the corpus holds. bm25's run file must
carry Anserini's own ranking (its run scores the same by ir-measures), and recall@5 of bm25 and bm25s is
printed for the note. Bad input ends with a one-line error naming the file and line, or the setting.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fte_shell.search.trec import evaluate, read_qrels, read_run
from tests.lucene_fixture import (
    anserini_run,
    hotpotqa_dir,
    hotpotqa_pages,
    hotpotqa_questions,
    require_lucene,
)

REPO = Path(__file__).resolve().parents[1]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "300"}
    return subprocess.run([sys.executable, "-m", "fte_shell", "corpus", *args], capture_output=True, text=True,
                          env=env, check=False)


def metrics(out: str) -> dict[str, float]:
    return {k: float(v) for k, v in (ln.split("\t") for ln in out.splitlines() if "\t" in ln)}


@pytest.fixture(scope="module")
def hotpotqa(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(corpus directory, queries TSV, qrels) of the HotpotQA pages and questions."""
    from fte_shell.search.corpus import build_corpus, hotpotqa_docs

    require_lucene()
    root = tmp_path_factory.mktemp("hotpotqa")
    corpus = build_corpus(hotpotqa_docs(hotpotqa_dir()), root / "corpus")
    _, docid_of = hotpotqa_pages()
    questions = hotpotqa_questions()
    queries = root / "queries.tsv"
    queries.write_text("".join(f"{qid}\t{q}\n" for qid, q, _ in questions), encoding="utf-8")
    qrels = root / "qrels.txt"
    # the supporting pages the corpus holds (AMOR's data lists some supporting pages that no question's
    # context has: 774 of the 1,200 are pages of the corpus)
    qrels.write_text("".join(f"{qid} 0 {docid_of[t]} 1\n" for qid, _, titles in questions
                             for t in sorted(titles) if t in docid_of))
    return corpus, queries, qrels


def test_retrieve_and_evaluate_the_hotpotqa_pages(hotpotqa: tuple[Path, Path, Path], tmp_path: Path) -> None:
    corpus, queries, qrels = hotpotqa
    recall = {}
    for retriever in ("bm25", "bm25s"):
        run = tmp_path / f"{retriever}.run"
        done = cli("retrieve", str(corpus), "--retriever", retriever, "--queries", str(queries), "--k", "100",
                   "--out", str(run))
        assert done.returncode == 0, done.stderr
        lines = run.read_text().splitlines()
        assert lines[0].split()[1:4:2] == ["Q0", "1"] and lines[0].split()[5] == retriever
        evaluated = cli("evaluate", str(run), "--qrels", str(qrels))
        assert evaluated.returncode == 0, evaluated.stderr
        recall[retriever] = metrics(evaluated.stdout)
        assert set(recall[retriever]) == {"R@5", "R@100", "R@1000", "nDCG@10", "queries", "answered"}
        assert recall[retriever]["queries"] == 522
    print(f"\nrecall@5 of the supporting pages, 522 HotpotQA questions with one in the corpus: bm25 {recall['bm25']['R@5']:.3f}, "
          f"bm25s {recall['bm25s']['R@5']:.3f}; nDCG@10 bm25 {recall['bm25']['nDCG@10']:.3f}, "
          f"bm25s {recall['bm25s']['nDCG@10']:.3f}")

    # bm25's run is Anserini's: the same documents in the same order, the same scores, the same figures
    pages, _ = hotpotqa_pages()
    reference = anserini_run(pages, [(qid, q) for qid, q, _ in hotpotqa_questions()], 100, tmp_path / "anserini")
    ours = read_run(tmp_path / "bm25.run")
    assert {q: list(d) for q, d in ours.items()} == {q: [d for d, _ in hits] for q, hits in reference.items()}
    theirs = evaluate({q: dict(hits) for q, hits in reference.items()}, read_qrels(qrels))
    assert theirs.means == pytest.approx({k: recall["bm25"][k] for k in theirs.means}, abs=1e-4)


def test_bad_input_is_named(hotpotqa: tuple[Path, Path, Path], tmp_path: Path) -> None:
    corpus, _, qrels = hotpotqa
    bad = tmp_path / "q.tsv"
    bad.write_text("1\tfine\n2 no tab\n")
    done = cli("retrieve", str(corpus), "--queries", str(bad), "--out", str(tmp_path / "r"))
    assert done.returncode == 1 and f"{bad}:2: expected qid<TAB>query" in done.stderr
    assert not (tmp_path / "r").exists()
    done = cli("retrieve", str(corpus), "--retriever", "bm26", "--queries", str(bad), "--out", str(tmp_path / "r"))
    assert done.returncode == 1 and "unknown retriever" in done.stderr
    run = tmp_path / "run"
    run.write_text("1 Q0 a 1 1.0\n")
    done = cli("evaluate", str(run), "--qrels", str(qrels))
    assert done.returncode == 1 and f"{run}:1: expected 6 whitespace-separated columns" in done.stderr
