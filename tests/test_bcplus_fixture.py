"""The shared BrowseComp-Plus fixture reads back through the benchmark loader as it was written."""

from __future__ import annotations

import ast
from pathlib import Path

from bcplus_fixture import make_bcplus_clone

from fte_shell.benchmarks.browsecomp_plus import corpus_docs, load_browsecomp_plus


def test_fixture_reads_back(tmp_path: Path) -> None:
    fx = make_bcplus_clone(tmp_path / "bc", n_docs=60, n_queries=4)
    qs = load_browsecomp_plus(fx.root)
    assert [q.meta["query_id"] for q in qs] == list(fx.evidence)
    assert all(q.meta["evidence_docids"] == fx.evidence[q.meta["query_id"]] for q in qs)
    assert all(q.meta["gold_docids"] == fx.gold[q.meta["query_id"]] for q in qs)
    docs = {d.docid: d.text for d in corpus_docs(fx.root)}
    assert docs == fx.docs and len(docs) == 60 and all(d.isdigit() for d in docs)
    for q in fx.queries:  # the gold document holds the answer
        assert q["answer"] in fx.docs[q["gold_docs"][0]["docid"]]
    tree = ast.parse((fx.root / "search_agent" / "prompts.py").read_text())
    names = {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    assert {"QUERY_TEMPLATE", "QUERY_TEMPLATE_NO_GET_DOCUMENT", "GRADER_TEMPLATE"} <= names


def test_fixture_generates_any_size(tmp_path: Path) -> None:
    """Past the 400 two-syllable names (about 195 queries) the names grow longer: a large fixture finishes,
    every answer still distinct from every other name."""
    fx = make_bcplus_clone(tmp_path / "big", n_docs=3 * 1000, n_queries=1000, corpus="none", prompts=False)
    answers = [q["answer"] for q in fx.queries]
    assert len(fx.queries) == 1000 and len(set(answers)) == 1000
    towns = {q["query"].rsplit(" ", 1)[-1].rstrip("?") for q in fx.queries[::2]}
    assert not towns & set(answers)
