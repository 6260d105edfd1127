"""WideSearch end to end: ``fte-shell bench widesearch:DIR --profiles shell,fte,visit-summary --scripted``
(the deterministic research policy answers with a one-row table), then ``judge`` with a scripted judge
model over loopback, then ``report``. Tasks are HotpotQA questions written in WideSearch's layout, searched
in the HotpotQA local corpus."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from fte_shell.benchmarks.widesearch.cells import norm_str
from fte_shell.benchmarks.widesearch.table import extract_markdown_table, read_gold_csv
from fte_shell.cli import app
from fte_shell.standins.server import ScriptedServer
from tests.widesearch_data import write_tasks

pytestmark = [pytest.mark.docker, pytest.mark.slow]
runner = CliRunner()
KEY = {"preprocess": ["norm_str"], "metric": ["exact_match"]}
# task 1: no llm_judge column (a run whose key is right needs no model); task 2: an llm_judge column
EVAL_EXACT = {"required": ["Answer", "Note"], "unique_columns": ["answer"],
              "eval_pipeline": {"answer": KEY, "note": {"metric": ["exact_match"]}}}
EVAL_LLM = {"required": ["Answer", "Note"], "unique_columns": ["answer"],
            "eval_pipeline": {"answer": KEY, "note": {"metric": ["llm_judge"], "criterion": "anything counts"}}}
PROFILES = ["shell", "fte", "visit-summary"]
RIGHT = "5add0ff6554299473435381f"  # HotpotQA dev: the research policy's shell/fte answer is the gold one


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory, hotpotqa_dir: Path) -> Path:
    from fte_shell.benchmarks.hotpotqa import ensure_hotpotqa_corpus

    return ensure_hotpotqa_corpus(hotpotqa_dir, tmp_path_factory.mktemp("corpus") / "hotpotqa")


def judge_policy(body: dict[str, Any]) -> str:
    prompt = body["messages"][0]["content"]
    if "List A (agent)" in prompt:
        return "```json\n{}\n```"  # no key maps to a gold value
    return "```json\n{\"idx_0\": 1}\n```"  # the llm_judge column: always right


def test_bench_judge_report_widesearch(tmp_path: Path, docker_ready: None, hotpotqa_dir: Path,
                                       corpus_dir: Path) -> None:
    dev = {r["_id"]: r for r in map(json.loads, (hotpotqa_dir / "dev.jsonl").read_text().splitlines()[:30])}
    rows = [dev[RIGHT], next(iter(dev.values()))]
    golds = [f"Answer,Note\n\"{rows[0]['answer']}\",\n",  # the policy leaves Note empty: right when empty
             f"Answer,Note\n\"{rows[1]['answer']}\",fine\n"]
    data = write_tasks(tmp_path / "ws", [
        {"instance_id": f"ws_en_{i:03d}", "query": r["question"], "evaluation": ev, "gold": g}
        for i, (r, ev, g) in enumerate(zip(rows, [EVAL_EXACT, EVAL_LLM], golds), 1)])
    out = tmp_path / "sweep"
    r = runner.invoke(app, ["bench", f"widesearch:{data}", "--profiles", ",".join(PROFILES), "--out", str(out),
                            "--scripted", "--corpus", str(corpus_dir), "--search", "local", "--no-progress",
                            "-j", "3"])
    assert r.exit_code == 0, r.output
    assert "6 run(s) finished now (6 answered), 0 infrastructure failure(s)" in r.output
    spans: dict[tuple[str, int], str] = {}
    for p in PROFILES:
        for i in (1, 2):
            res = json.loads((out / "runs" / p / f"ws_en_{i:03d}" / "r0" / "result.json").read_text())
            table = extract_markdown_table(res["answer"])
            assert table is not None and table.columns == ["answer", "note"], res["answer"]
            spans[(p, i)] = table.rows[0][0]
    gold_keys = [read_gold_csv(g).rows[0][0] for g in golds]
    right = {k: norm_str(v) == norm_str(gold_keys[k[1] - 1]) for k, v in spans.items()}
    assert right[("fte", 1)] and not any(right[(p, 2)] for p in PROFILES)
    # bench's own model-free pass scored exactly the runs that need no model: task 1 with the right key
    verdicts = {(p, i): out / "runs" / p / f"ws_en_{i:03d}" / "r0" / "judgement.json" for p in PROFILES for i in (1, 2)}
    pre = {k for k, f in verdicts.items() if f.exists() and "widesearch" in json.loads(f.read_text())}
    assert pre == {k for k, ok in right.items() if ok and k[1] == 1 and spans[k] == gold_keys[0]} and ("fte", 1) in pre
    # an infrastructure failure is not a result: it must not be scored
    broken = out / "runs" / "fte" / "ws_en_002" / "r0"
    res = json.loads((broken / "result.json").read_text())
    (broken / "result.json").write_text(json.dumps({**res, "stop_reason": "endpoint_unavailable"}))
    (broken / "judgement.json").unlink(missing_ok=True)

    with ScriptedServer(policy=judge_policy) as srv:
        r = runner.invoke(app, ["judge", str(out), "--judge-model", "grader", "--base-url", srv.base_url,
                                "--api-key", "k"])
        assert r.exit_code == 0, r.output
        assert srv.requests and all(b["temperature"] == 0 and b["model"] == "grader" for b in srv.requests)
    assert f"({5 - len(pre)} judged now, {len(pre)} cached, 1 skipped" in r.output
    assert not (broken / "judgement.json").exists() and not (broken / "widesearch_cells.csv").exists()
    entries: dict[str, list[dict[str, Any]]] = {}
    for (p, i), ok in right.items():
        d = out / "runs" / p / f"ws_en_{i:03d}" / "r0"
        if d == broken:
            continue
        e = json.loads((d / "judgement.json").read_text())["widesearch"]
        # one gold row, one answer row: the right key joins the row and its note scores 1 (equal empty cells,
        # or the judge) -> all six values 1; a wrong key joins nothing -> all 0
        assert e["score"] == e["f1_by_row"] == e["f1_by_item"] == (1.0 if ok else 0.0), (p, i, e)
        assert e["judge_model"] == ("grader" if e["judge_calls"] else None)
        assert bool(e["judge_calls"]) == ((p, i) not in pre)
        assert (d / "widesearch_cells.csv").read_text().startswith("row_key,column,response,gold,metric")
        entries.setdefault(p, []).append(e)
    # one run directory on its own, without a model: task 2 needs one, so the run is listed as an error and
    # its entry stays as it was — never scored as wrong
    one = out / "runs" / "shell" / "ws_en_002" / "r0"
    before = (one / "judgement.json").read_text()
    r = runner.invoke(app, ["judge", str(one), "--force"])
    assert r.exit_code == 1 and "--judge-model" in r.output and (one / "judgement.json").read_text() == before

    r = runner.invoke(app, ["report", str(out), "--out", str(tmp_path / "rep")])
    assert r.exit_code == 0, r.output
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "| Profile | Tasks | Scored runs | Not scored | Success | Row-F1 | Item-F1 |" in md
    at = md.index("## WideSearch")
    assert md.index("| shell |", at) < md.index("| fte |", at) < md.index("| visit-summary |", at)
    by = {g["profile"]: g for g in json.loads((tmp_path / "rep" / "widesearch.json").read_text())["profiles"]}
    assert set(by) == set(PROFILES) and (by["fte"]["scored"], by["fte"]["not_scored"]) == (1, 1)
    for p, es in entries.items():
        mean = sum(e["score"] for e in es) / len(es)
        assert by[p]["score"]["avg_n"] == pytest.approx(mean)
        assert f"| {p} | {len(es)} | {len(es)} | {by[p]['not_scored']} | {100 * mean:.1f}% |" in md
