"""The paired BrowseComp-Plus study in one ``bench`` command, on the shared fixture (a clone-shaped dataset,
its own prompts.py): the arms standard, fte and shell (a real Docker box) × the context strategies keep_all
and workspace_reset (DR-DCI's), every arm on the same questions with the scripted policy, then judge and
report: accuracy, evidence recall, search calls and paired comparisons side by side per arm.

The retriever arms (``--retrievers bm25,dense:…``: standard@bm25, standard@dense…) are tests/test_bench_retrievers.py's
and the corpus-in-box arm (``--corpus-arm``: shell with ``/corpus``) tests/test_bench_corpus_arm.py's;
docs/browsecomp-plus.md names the command with them all."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bcplus_fixture import make_bcplus_clone
from typer.testing import CliRunner

from fte_shell.cli import app

runner = CliRunner()
ARMS = {"standard", "fte", "shell", "standard@workspace_reset", "fte@workspace_reset", "shell@workspace_reset"}


@pytest.mark.docker
@pytest.mark.slow
def test_paired_study_on_the_fixture(tmp_path: Path, docker_ready: None) -> None:
    fx = make_bcplus_clone(tmp_path / "bc", n_docs=200, n_queries=4)
    out = tmp_path / "sweep"
    r = runner.invoke(app, ["bench", f"browsecomp-plus:{fx.root}", "--profiles", "standard,fte,shell",
                            "--context", "keep_all,workspace_reset", "--out", str(out), "--scripted",
                            "--corpus-dir", str(tmp_path / "idx"), "--no-progress", "-j", "2"])
    assert r.exit_code == 0, r.output
    assert "24 run(s) finished now (24 answered)" in r.output
    assert {p.name for p in (out / "runs").iterdir()} == ARMS
    results = {p: json.loads(p.read_text()) for p in (out / "runs").glob("*/*/r0/result.json")}
    gold = {q["query_id"]: q["answer"] for q in fx.queries}
    for path, res in results.items():
        arm, qid = path.parent.parent.parent.name, path.parent.parent.name
        if arm.startswith("standard"):  # the clone's own templates, found by bench, and the format parsed
            af = res["answer_format"]
            assert af["official"] is True and af["templates"] == str(fx.root / "search_agent" / "prompts.py")
            assert af["user_message"].startswith("[fixture wording]") and af["exact_answer"] == res["answer"]
            assert af["confidence"] == 80.0 and af["snippets"] == "qwen3"
        else:
            assert "answer_format" not in res
        assert qid in gold
    assert runner.invoke(app, ["judge", str(out)]).exit_code == 0
    r = runner.invoke(app, ["report", str(out), "--out", str(tmp_path / "rep")])
    assert r.exit_code == 0, r.output
    data = json.loads((tmp_path / "rep" / "metrics.json").read_text())
    rows = {p["label"]: p for p in data["profiles"]}
    assert len(data["profiles"]) == 6
    # accuracy by hand: the share of an arm's runs whose answer is the gold one (the model-free judge's match)
    for arm in ARMS:
        profile, _, ctx = arm.partition("@")
        runs = [res for p, res in results.items() if p.parent.parent.parent.name == arm]
        by_hand = sum(res["answer"] == gold[res["meta"]["qid"]] for res in runs) / len(runs)
        row = rows[f"{profile} · {ctx or 'keep_all'}"]
        assert row["accuracy"] == pytest.approx(by_hand)
    assert rows["standard · keep_all"]["search"] == 1.0  # one search call per question
    # evidence recall of the standard arm by hand: the docids it opened with get_document against the qrels
    ev = {e["label"]: e for e in data["evidence"]}
    opened = {}
    for p in (out / "runs" / "standard").glob("*/r0/trajectory.jsonl"):
        events = [json.loads(line) for line in p.read_text().splitlines()]
        opened[p.parent.parent.name] = {e["arguments"]["docid"] for e in events
                                        if e["type"] == "tool_call" and e["name"] == "get_document"}
    by_hand = sum(len(opened[q] & set(fx.evidence[q])) / len(fx.evidence[q]) for q in opened) / len(opened)
    assert ev["standard · keep_all"]["evidence_recall_fetched"] == pytest.approx(by_hand) and by_hand > 0
    pairs = {(p["a"], p["b"]) for p in data["paired"]}
    assert ("fte · keep_all", "standard · keep_all") in pairs or ("standard · keep_all", "fte · keep_all") in pairs
    assert all(p["n"] == 4 for p in data["paired"])  # every arm on the same four questions
    report = (tmp_path / "rep" / "report.md").read_text()
    assert "## Paired comparisons" in report and "## BrowseComp-Plus evidence" in report


def test_a_dataset_that_is_not_a_clone_says_it_is_not_the_leaderboard_format(tmp_path: Path) -> None:
    fx = make_bcplus_clone(tmp_path / "bc", n_docs=40, n_queries=2, prompts=False)
    out = tmp_path / "sweep"
    r = runner.invoke(app, ["bench", f"browsecomp-plus:{fx.root}", "--profiles", "standard", "--out", str(out),
                            "--scripted", "--corpus-dir", str(tmp_path / "idx"), "--no-progress"])
    assert r.exit_code == 0, r.output
    assert "has no search_agent/prompts.py" in r.output and "not the leaderboard's format" in r.output
    for p in (out / "runs" / "standard").glob("*/r0/result.json"):
        af = json.loads(p.read_text())["answer_format"]
        assert af["official"] is False and af["templates"] == "fte-shell"
        assert af["user_message"].startswith("Research the question below") and af["exact_answer"]
