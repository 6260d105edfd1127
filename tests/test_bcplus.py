"""BrowseComp-Plus on a small corpus in the benchmark's own formats (decrypted queries JSONL, corpus
JSONL / parquet with docid/text/url, TREC qrels): loading, indexing, a scripted sweep through bench →
judge → report, and the evidence metrics with hand-computed values."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_paper_metrics import mk_run
from typer.testing import CliRunner

from fte_shell.benchmarks.browsecomp_plus import load_browsecomp_plus, profile_evidence, run_evidence
from fte_shell.benchmarks.registry import load_dataset
from fte_shell.cli import app
from fte_shell.errors import ConfigError
from fte_shell.metrics import run_metrics

DOCS = {
    "101": ("---\ntitle: Quornbridge river\n---\nThe Quornbridge river flows through Zanzibarville into the lake.",
            "https://example.org/quornbridge"),
    "102": ("Zanzibarville market\nThe town of Zanzibarville holds a market every Thursday.", "https://example.org/market"),
    "103": ("Lake Ommen\nLake Ommen lies north of the hills and freezes in winter.", "https://example.org/ommen"),
    "104": ("Harbour\nBoats leave the harbour at dawn.", "https://example.org/harbour"),
}


def doc(docid: str) -> dict[str, str]:
    return {"docid": docid, "text": DOCS[docid][0], "url": DOCS[docid][1]}


def make_bcplus(root: Path, *, corpus: str = "jsonl", qrels: bool = True) -> Path:
    """A dataset directory as the benchmark's scripts leave it."""
    (root / "data").mkdir(parents=True)
    rows = [
        {"query_id": "769", "query": "Which river flows through Zanzibarville?", "answer": "Quornbridge",
         "evidence_docs": [doc("101"), doc("103")], "gold_docs": [doc("101")], "negative_docs": [doc("104")]},
        {"query_id": "770", "query": "On which weekday is the Zanzibarville market held?", "answer": "Thursday",
         "evidence_docs": json.dumps([doc("102")]), "gold_docs": json.dumps([doc("102")])},  # JSON strings
    ]
    (root / "data" / "browsecomp_plus_decrypted.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    corpus_rows = [doc(d) for d in DOCS]
    if corpus == "jsonl":
        (root / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus_rows))
    elif corpus == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        (root / "corpus").mkdir()
        pq.write_table(pa.Table.from_pylist(corpus_rows), root / "corpus" / "train-00000-of-00001.parquet")
    if qrels:
        (root / "topics-qrels").mkdir()
        # the qrels replace query 769's evidence list: 101 and 102 relevant, 103 judged not relevant
        (root / "topics-qrels" / "qrel_evidence.txt").write_text("769 0 101 1\n769 0 102 1\n769 0 103 0\n")
        (root / "topics-qrels" / "qrel_golds.txt").write_text("769 0 101 1\n")
    return root


def test_load_queries_and_qrels(tmp_path: Path) -> None:
    qs = load_dataset(f"browsecomp-plus:{make_bcplus(tmp_path / 'bc')}").questions
    assert [(q.id, q.answer) for q in qs] == [("769", "Quornbridge"), ("770", "Thursday")]
    assert qs[0].meta["evidence_docids"] == ["101", "102"] and qs[0].meta["gold_docids"] == ["101"]
    assert qs[1].meta["evidence_docids"] == ["102"] and qs[1].meta["doc_urls"] == {"102": DOCS["102"][1]}
    no_qrels = load_browsecomp_plus(make_bcplus(tmp_path / "bc2", qrels=False))
    assert no_qrels[0].meta["evidence_docids"] == ["101", "103"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="no BrowseComp-Plus queries file"):
        load_dataset(f"browsecomp-plus:{tmp_path / 'empty'}")
    bad = make_bcplus(tmp_path / "bc3")
    (bad / "topics-qrels" / "qrel_golds.txt").write_text("769 101 1\n")
    with pytest.raises(ConfigError, match="qrel_golds.txt:1: a qrels line has 4 fields"):
        load_browsecomp_plus(bad)


def test_corpus_from_parquet(tmp_path: Path) -> None:
    from fte_shell.benchmarks.browsecomp_plus import corpus_docs

    docs = {d.docid: d for d in corpus_docs(make_bcplus(tmp_path / "bc", corpus="parquet"))}
    assert set(docs) == set(DOCS) and docs["101"].title == "Quornbridge river" and docs["103"].title == "Lake Ommen"
    assert docs["102"].url == DOCS["102"][1]
    embedded = {d.docid for d in corpus_docs(make_bcplus(tmp_path / "bc2", corpus="none"))}
    assert embedded == {"101", "102", "103", "104"}  # the documents inside the queries file


def test_evidence_metrics_by_hand(tmp_path: Path) -> None:
    q = {"meta": {"evidence_docids": ["101", "102"], "gold_docids": ["101"], "doc_urls": {"101": DOCS["101"][1],
                                                                                          "102": DOCS["102"][1]}}}
    search = f'2 results for "q":\n[1] Q\n    {DOCS["101"][1]}\n    s\n[2] L\n    {DOCS["103"][1]}\n    s'
    rec = lambda name, d, new: f'/work/{name}  10 chars  {"new" if new else "held"}  {d}  "T"'
    calls = [("search", {"query": "q"}, search, False, {}),
             ("fetch", {"url": "101"}, rec("101-a.txt", "101", True), False, {}),
             ("fetch", {"url": "103"}, rec("103-b.txt", "103", True), False, {}),
             ("read", {"path": "/work/101-a.txt"}, "5: x", False, {}),
             ("read", {"path": "/work/103-b.txt"}, "5: x", False, {}),
             ("read", {"path": "/work/101-a.txt"}, "5: x", False, {}),  # 101 revisited
             ("read", {"path": "/work/103-b.txt"}, "5: x", False, {})]  # 103 revisited
    m = run_metrics(mk_run(tmp_path / "r", "fte", calls, qid="769"))
    e = run_evidence(m, q)
    # fetched {101, 103}: evidence 1/2, gold 1/1; seen {101 (by url), 103}: same; revisited {101, 103}: 1 evidence
    assert e == {"evidence_recall_fetched": 0.5, "gold_recall_fetched": 1.0, "evidence_recall_seen": 0.5,
                 "gold_recall_seen": 1.0, "revisited": 2, "revisited_evidence": 1}
    of = run_metrics(mk_run(tmp_path / "o", "open-find", [
        ("open", {"url": DOCS["102"][1]}, "Open page", False, {"source": "102"})]))
    assert run_evidence(of, q)["evidence_recall_fetched"] == 0.5  # type: ignore[index]
    assert run_evidence(of, {"meta": {}}) is None
    m.qid, of.qid = "769", "769"
    p = profile_evidence("x", [m, of], {"769": q})
    # means over the two runs: evidence fetched (0.5 + 0.5) / 2, gold fetched (1 + 0) / 2; the open-find run
    # saw no search results: evidence seen (0.5 + 0) / 2, gold seen (1 + 0) / 2; revisited evidence pooled 1 / 2
    assert p == {"label": "x", "runs": 2, "evidence_recall_fetched": 0.5, "gold_recall_fetched": 0.5,
                 "evidence_recall_seen": 0.25, "gold_recall_seen": 0.5, "revisited_evidence_share": 0.5}


def test_bench_judge_report_over_browsecomp_plus(tmp_path: Path) -> None:
    root = make_bcplus(tmp_path / "bc")
    out = tmp_path / "sweep"
    runner = CliRunner()
    args = ["bench", f"browsecomp-plus:{root}", "--profiles", "fte,open-find,fte-single-grep,fte-no-grep", "--out",
            str(out), "--scripted",
            "--corpus-dir", str(tmp_path / "idx"), "--no-progress"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    assert runner.invoke(app, ["judge", str(out)]).exit_code == 0
    r = runner.invoke(app, ["report", str(out), "--out", str(tmp_path / "rep")])
    assert r.exit_code == 0, r.output
    data = json.loads((tmp_path / "rep" / "metrics.json").read_text())
    ev = {e["label"]: e for e in data["evidence"]}
    assert set(ev) == {"fte", "open-find", "fte-single-grep", "fte-no-grep"} and ev["fte"]["runs"] == 2
    prof = {p["profile"]: p for p in data["profiles"]}
    assert prof["fte-single-grep"]["refused"] == 1.0  # its whole-cache grep, once per question
    assert prof["fte-no-grep"]["grep"] == 0.0 and prof["fte-no-grep"]["read"] >= 1.0
    assert [p["profile"] for p in data["profiles"]] == ["fte", "fte-no-grep", "fte-single-grep", "open-find"]
    # every fetched source is a corpus docid; recall is computed from them against the judgments
    fte_runs = [x for x in data["runs"] if x["profile"] == "fte"]
    assert all(set(x["fetched_sources"]) <= set(DOCS) for x in fte_runs)
    qrels = {"769": ["101", "102"], "770": ["102"]}
    by_hand = sum(len(set(x["fetched_sources"]) & set(qrels[x["qid"]])) / len(qrels[x["qid"]]) for x in fte_runs) / 2
    assert ev["fte"]["evidence_recall_fetched"] == pytest.approx(by_hand) and by_hand > 0
    per_run = [e for e in data["evidence_runs"] if e["label"] == "fte"]
    assert sorted(e["qid"] for e in per_run) == ["769", "770"]
    assert sum(e["evidence_recall_fetched"] for e in per_run) / 2 == pytest.approx(by_hand)
    assert "## BrowseComp-Plus evidence" in (tmp_path / "rep" / "report.md").read_text()
