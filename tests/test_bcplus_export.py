"""A scripted BrowseComp-Plus sweep on the clone-shaped fixture, graded with the clone's GRADER_TEMPLATE by a
loopback grader, then ``report`` (its "BrowseComp-Plus official figures") and ``fte-shell export
browsecomp-plus``: the exported run files have the official fields, and the figures the report shows are
the ones computed by hand, from those files, by the official definitions. The sweep manifest pins the
data (content hashes computed by hand here)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from bcplus_fixture import make_bcplus_clone
from typer.testing import CliRunner

from fte_shell.benchmarks.browsecomp_plus.pins import content_pin, hf_snapshot
from fte_shell.benchmarks.llmjudge import LLMJudge, judge_model_config
from fte_shell.benchmarks.registry import load_dataset
from fte_shell.cli import app
from fte_shell.errors import ConfigError
from fte_shell.report.build import write_report
from fte_shell.standins.server import ScriptedServer
from fte_shell.sweep.judge import judge_runs
from fte_shell.sweep.state import check_compatible


def grade(prompt: str) -> str:
    """The loopback grader: correct when the gold answer is in the response; confidence 90 / 30."""
    response = prompt.split("[response]: ", 1)[1].split("\n\n[correct_answer]: ", 1)[0]
    gold = prompt.split("[correct_answer]: ", 1)[1].split("\n", 1)[0].strip()
    ok = gold.lower() in response.lower()
    return (f"extracted_final_answer: {response.strip().splitlines()[-1][:60]}\nreasoning: compared\n"
            f"correct: {'yes' if ok else 'no'}\nconfidence: {90 if ok else 30}")


def by_hand(files: list[dict[str, Any]], qrels: dict[str, list[str]], gold: dict[str, str]) -> dict[str, Any]:
    """The official definitions, written out again: accuracy over every file, recall over the queries with
    qrels lines, search calls per file, citations over the graded responses that cite."""
    n = len(files)
    correct = recalls = 0.0
    cites: list[tuple[float, float]] = []
    for f in files:
        rel = qrels[f["query_id"]]
        recalls += len(set(f["retrieved_docids"]) & set(rel)) / len(rel)
        if f["status"] != "completed":
            continue
        response = f["result"][-1]["output"]
        correct += gold[f["query_id"]].lower() in response.lower()
        cited = {d for inside in re.findall(r"\[([^\[\]]*)\]", response) for d in re.findall(r"\d+", inside)}
        if cited:
            hit = len(cited & set(rel))
            cites.append((hit / len(cited), hit / len(rel)))
    return {"accuracy": correct / n, "recall": recalls / n,
            "search": sum(f["tool_call_counts"].get("search", 0) for f in files) / n, "with_citations": len(cites),
            "precision": sum(c[0] for c in cites) / len(cites) if cites else 0.0,
            "citation_recall": sum(c[1] for c in cites) / len(cites) if cites else 0.0}


def test_sweep_export_and_report_agree(tmp_path: Path) -> None:
    fx = make_bcplus_clone(tmp_path / "bc", n_docs=60, n_queries=3)
    out, exp = tmp_path / "sweep", tmp_path / "export"
    runner = CliRunner()
    r = runner.invoke(app, ["bench", f"browsecomp-plus:{fx.root}", "--profiles", "fte,open-find", "--out", str(out),
                            "--scripted", "--corpus-dir", str(tmp_path / "idx"), "--no-progress"])
    assert r.exit_code == 0, r.output
    with ScriptedServer(policy=lambda body: {"content": grade(body["messages"][-1]["content"])}) as srv:
        s = judge_runs([out], judge=LLMJudge(judge_model_config("grader", base_url=srv.base_url, api_key="k",
                                                                max_retries=0)))
        prompts = [b["messages"][-1]["content"] for b in srv.requests]
    assert not s.errors and s.judged > 0 and s.judges == ["browsecomp-plus@grader"]
    assert all(p.startswith("[fixture wording] Decide whether") for p in prompts)  # the clone's GRADER_TEMPLATE
    rep = write_report([out], tmp_path / "rep")
    official = {x["arm"]: x for x in json.loads(rep.metrics.read_text())["browsecomp_plus_official"]}
    r = runner.invoke(app, ["export", "browsecomp-plus", str(out), "--out", str(exp), "--no-progress"])
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in exp.iterdir()) == ["fte", "open-find"] == sorted(official)
    gold = {q["query_id"]: q["answer"] for q in fx.queries}
    evidence = {q: [*ds, next(x["negative_docs"][0]["docid"] for x in fx.queries if x["query_id"] == q)]
                for q, ds in fx.evidence.items()}  # the fixture's qrels judge the negative too (relevance 0)
    for arm in ("fte", "open-find"):
        files = [json.loads(p.read_text()) for p in sorted((exp / arm).glob("*.json"))]
        assert sorted(f["query_id"] for f in files) == sorted(gold)
        for f in files:
            assert {"query_id", "tool_call_counts", "status", "retrieved_docids", "result", "metadata", "usage"} <= set(f)
            assert set(f["retrieved_docids"]) <= set(fx.docs)  # corpus docids, URLs resolved
            assert f["metadata"]["arm"] == arm and f["metadata"]["output_dir"] == str(exp / arm)
            calls = [x for x in f["result"] if x["type"] == "tool_call"]
            assert sum(f["tool_call_counts"].values()) == len(calls)
        want = by_hand(files, evidence, gold)
        ev, gd = official[arm]["evidence"], official[arm]["gold"]
        assert ev["runs"] == len(files) == 3 and ev["unjudged"] == 0
        assert ev["accuracy"] == pytest.approx(want["accuracy"])
        assert ev["recall"] == pytest.approx(want["recall"]) and ev["recall"] > 0
        assert ev["tool_calls"].get("search", 0.0) == pytest.approx(want["search"])
        assert ev["with_citations"] == want["with_citations"]
        assert ev["citation_precision"] == pytest.approx(want["precision"])
        assert ev["citation_recall"] == pytest.approx(want["citation_recall"])
        assert ev["calibration_error"] == 0.0 and ev["confidences"] == ev["completed"] - ev["parse_errors"]
        assert gd["recall"] == pytest.approx(by_hand(files, fx.gold, gold)["recall"])
    md = rep.markdown.read_text()
    assert "## BrowseComp-Plus official figures" in md and "data pinned — dataset: content sha256" in md


def test_manifest_pins_the_data(tmp_path: Path) -> None:
    fx = make_bcplus_clone(tmp_path / "bc", n_docs=30, n_queries=2)
    ds = load_dataset(f"browsecomp-plus:{fx.root}")
    h = hashlib.sha256()
    names = ["data/browsecomp_plus_decrypted.jsonl", "topics-qrels/qrel_evidence.txt", "topics-qrels/qrel_golds.txt"]
    for name in names:
        b = (fx.root / name).read_bytes()
        h.update(f"{name}\0{len(b)}\0{hashlib.sha256(b).hexdigest()}\n".encode())
    assert ds.revisions["dataset"] == {"sha256": h.hexdigest(), "files": names}
    b = (fx.root / "corpus.jsonl").read_bytes()
    corpus = hashlib.sha256(f"corpus.jsonl\0{len(b)}\0{hashlib.sha256(b).hexdigest()}\n".encode()).hexdigest()
    assert ds.revisions["corpus"] == {"sha256": corpus, "files": ["corpus.jsonl"]}
    # the sweep records them, and refuses to go on over changed data
    out = tmp_path / "sweep"
    r = CliRunner().invoke(app, ["bench", f"browsecomp-plus:{fx.root}", "--profiles", "fte", "--out", str(out),
                                 "--scripted", "--limit", "1", "--corpus-dir", str(tmp_path / "idx"), "--no-progress"])
    assert r.exit_code == 0, r.output
    assert json.loads((out / "sweep.json").read_text())["dataset"]["revisions"] == ds.revisions
    with (fx.root / "topics-qrels" / "qrel_golds.txt").open("a") as f:
        f.write("700 Q0 10007 1\n")
    with pytest.raises(ConfigError, match="other data .*changed since it began: dataset"):
        check_compatible(out, load_dataset(f"browsecomp-plus:{fx.root}"))


def test_a_file_is_hashed_once_while_it_is_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The content pin remembers each file's SHA-256 by its path and stat: an unchanged file is not read
    again (shown by a same-size, same-time rewrite the pin does not see), an edit is hashed anew and
    replaces the path's entry."""
    monkeypatch.setenv("FTE_CACHE_DIR", str(tmp_path / "cache"))
    f = tmp_path / "corpus.jsonl"
    f.write_bytes(b'{"docid": "1", "text": "alpha"}\n')
    first = content_pin(tmp_path, [f])
    want = hashlib.sha256(f"corpus.jsonl\0{f.stat().st_size}\0{hashlib.sha256(f.read_bytes()).hexdigest()}\n"
                          .encode()).hexdigest()
    assert first == {"sha256": want, "files": ["corpus.jsonl"]}
    assert len(list((tmp_path / "cache" / "sha256").iterdir())) == 1
    st = f.stat()
    f.write_bytes(b'{"docid": "1", "text": "omega"}\n')  # same size; its time put back: taken as unchanged
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert content_pin(tmp_path, [f]) == first
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # as any edit leaves it
    assert content_pin(tmp_path, [f]) != first
    assert len(list((tmp_path / "cache" / "sha256").iterdir())) == 1  # the path's entry replaced, not a second
    shutil.rmtree(tmp_path / "cache")  # an unwritable or missing cache: hashed each time, same figure
    (tmp_path / "cache").write_text("not a directory")
    f.write_bytes(b'{"docid": "1", "text": "alpha"}\n')
    assert content_pin(tmp_path, [f]) == first


def test_hugging_face_revision_from_the_cache_path(tmp_path: Path) -> None:
    snap = tmp_path / "hub" / "datasets--Tevatron--browsecomp-plus-corpus" / "snapshots" / "0123abc" / "data"
    snap.mkdir(parents=True)
    (snap / "train.parquet").write_bytes(b"x")
    assert hf_snapshot(snap / "train.parquet") == ("Tevatron/browsecomp-plus-corpus", "0123abc")
    (tmp_path / "clone").mkdir()
    (tmp_path / "clone" / "corpus").symlink_to(snap)  # the clone's corpus/ linked into the cache
    assert hf_snapshot(tmp_path / "clone" / "corpus" / "train.parquet") == ("Tevatron/browsecomp-plus-corpus", "0123abc")
    assert hf_snapshot(tmp_path / "clone" / "x.parquet") is None


def test_bad_input_is_named(tmp_path: Path) -> None:
    """A query without judgments, a qrels docid the corpus lacks, a run without a parsable answer, an
    infrastructure failure, a sweep of another dataset: each a clear message, nothing mis-scored."""
    fx = make_bcplus_clone(tmp_path / "bc", n_docs=30, n_queries=3)
    lost = fx.queries[2]["query_id"]
    ev = fx.root / "topics-qrels" / "qrel_evidence.txt"
    lines = [x for x in ev.read_text().splitlines() if not x.startswith(f"{lost} ")]
    ev.write_text("\n".join([*lines, f"{fx.queries[0]['query_id']} Q0 88888 1"]) + "\n")
    out = tmp_path / "sweep"
    runner = CliRunner()
    r = runner.invoke(app, ["bench", f"browsecomp-plus:{fx.root}", "--profiles", "fte", "--out", str(out),
                            "--scripted", "--corpus-dir", str(tmp_path / "idx"), "--no-progress"])
    assert r.exit_code == 0, r.output
    runs = sorted((out / "runs" / "fte").glob("*/r0"))
    # one run ends unanswered, one as an infrastructure failure
    for d, change in ((runs[0], {"answer": None, "stop_reason": "max_turns"}), (runs[1], {"stop_reason": "model_error"})):
        res = json.loads((d / "result.json").read_text())
        (d / "result.json").write_text(json.dumps({**res, **change}))
    r = runner.invoke(app, ["export", "browsecomp-plus", str(out), "--out", str(tmp_path / "exp"), "--no-progress"])
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert f"1 query without evidence judgments in {ev} ({lost})" in text
    assert "(the official script stops with a division by zero on them)" in text
    assert "1 evidence docid(s) of" in text and "are not in the corpus (88888)" in text
    assert "1 run(s) are not results" in text and "2 run file(s) in" in text
    files = {json.loads(p.read_text())["query_id"]: json.loads(p.read_text()) for p in (tmp_path / "exp" / "fte").glob("*.json")}
    assert sorted(files) == sorted([runs[0].parent.name, lost])  # the failed run has no run file
    assert files[runs[0].parent.name]["status"] == "max_turns"  # unanswered: the evaluation grades it not correct
    rep = write_report([out], tmp_path / "rep")
    fig = json.loads(rep.metrics.read_text())["browsecomp_plus_official"][0]["evidence"]
    # 2 result runs: the unanswered one counts (not correct, not graded), the failure is no run file
    assert fig["runs"] == 2 and fig["completed"] == 1 and fig["no_qrels"] == [lost]
    assert fig["recall_runs"] == 1 and fig["accuracy"] is None  # the completed run is not graded yet
    other = tmp_path / "other"
    other.mkdir()
    (other / "sweep.json").write_text(json.dumps({"dataset": {"kind": "hotpotqa"}}))
    r = runner.invoke(app, ["export", "browsecomp-plus", str(other), "--out", str(tmp_path / "x"), "--no-progress"])
    assert r.exit_code == 2 and "not a BrowseComp-Plus sweep" in r.output


def test_grader_without_the_clones_prompts(tmp_path: Path) -> None:
    """Without search_agent/prompts.py the grader is fte-shell's own wording, and the judge says so; without
    a grading model the sweep is graded by match (noted)."""
    fx = make_bcplus_clone(tmp_path / "bc", n_docs=30, n_queries=2, prompts=False)
    out = tmp_path / "sweep"
    r = CliRunner().invoke(app, ["bench", f"browsecomp-plus:{fx.root}", "--profiles", "fte", "--out", str(out),
                                 "--scripted", "--no-judge", "--corpus-dir", str(tmp_path / "idx"), "--no-progress"])
    assert r.exit_code == 0, r.output
    s = judge_runs([out])
    assert s.judges == ["match"] and "browsecomp-plus needs a grading model" in " ".join(s.notes)
    with ScriptedServer(policy=lambda body: {"content": grade(body["messages"][-1]["content"])}) as srv:
        s = judge_runs([out], judge=LLMJudge(judge_model_config("g", base_url=srv.base_url, api_key="k",
                                                                max_retries=0)))
        prompts = [b["messages"][-1]["content"] for b in srv.requests]
    assert s.judged == 2 and not s.errors
    assert "graded with fte-shell's own grader wording, not the leaderboard's" in " ".join(s.notes)
    assert all(p.startswith("Grade a response to a question against the known correct answer.") for p in prompts)
