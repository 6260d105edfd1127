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

from fte_shell.bench.widesearch.cells import norm_str
from fte_shell.bench.widesearch.table import extract_markdown_table, read_gold_csv
from fte_shell.cli import app
from fte_shell.scripted import ScriptedServer
from tests.widesearch_data import write_tasks

pytestmark = [pytest.mark.docker, pytest.mark.slow]
runner = CliRunner()
EVAL = {"required": ["Answer", "Note"], "unique_columns": ["answer"],
        "eval_pipeline": {"answer": {"preprocess": ["norm_str"], "metric": ["exact_match"]},
                          "note": {"metric": ["llm_judge"], "criterion": "anything counts"}}}
PROFILES = ["shell", "fte", "visit-summary"]
RIGHT = "5add0ff6554299473435381f"  # HotpotQA dev: the research policy's fte answer is the gold one


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory, hotpotqa_dir: Path) -> Path:
    from fte_shell.bench.sweep import ensure_hotpotqa_corpus

    return ensure_hotpotqa_corpus(hotpotqa_dir, tmp_path_factory.mktemp("corpus") / "hotpotqa")


def judge_policy(body: dict[str, Any]) -> str:
    prompt = body["messages"][0]["content"]
    if "List A (agent)" in prompt:
        return "```json\n{}\n```"  # no key maps to a gold value
    return "```json\n{\"idx_0\": 1}\n```"  # the llm_judge column: always right


def test_bench_judge_report_widesearch(tmp_path: Path, docker_ready: None, hotpotqa_dir: Path,
                                       corpus_dir: Path) -> None:
    dev = {r["_id"]: r for r in map(json.loads, (hotpotqa_dir / "dev.jsonl").read_text().splitlines()[:30])}
    rows = [dev[RIGHT], next(iter(dev.values()))]  # one the policy answers right (fte at least), one it does not
    data = write_tasks(tmp_path / "ws", [
        {"instance_id": f"ws_en_{i:03d}", "query": r["question"], "evaluation": EVAL,
         "gold": f"Answer,Note\n\"{r['answer']}\",fine\n"} for i, r in enumerate(rows, 1)])
    out = tmp_path / "sweep"
    r = runner.invoke(app, ["bench", f"widesearch:{data}", "--profiles", ",".join(PROFILES), "--out", str(out),
                            "--scripted", "--corpus", str(corpus_dir), "--search", "local", "--no-progress",
                            "-j", "3"])
    assert r.exit_code == 0, r.output
    assert "6 run(s) finished now (6 answered, 0 failed)" in r.output
    for p in PROFILES:
        res = json.loads((out / "runs" / p / "ws_en_001" / "r0" / "result.json").read_text())
        table = extract_markdown_table(res["answer"])
        assert table is not None and table.columns == ["answer", "note"], res["answer"]
    # an infrastructure failure is not a result: it must not be scored
    broken = out / "runs" / "fte" / "ws_en_002" / "r0"
    res = json.loads((broken / "result.json").read_text())
    (broken / "result.json").write_text(json.dumps({**res, "stop_reason": "endpoint_unavailable"}))
    (broken / "judgement.json").unlink(missing_ok=True)

    with ScriptedServer(policy=judge_policy) as srv:
        r = runner.invoke(app, ["judge", str(out), "--judge-model", "grader", "--base-url", srv.base_url,
                                "--api-key", "k"])
        assert r.exit_code == 0, r.output
        assert all(b["temperature"] == 0 and b["model"] == "grader" for b in srv.requests)
    assert "1 skipped" in r.output
    assert not (broken / "judgement.json").exists() and not (broken / "widesearch_cells.csv").exists()
    entries: dict[str, list[dict[str, Any]]] = {}
    for p in PROFILES:
        for i, row in enumerate(rows, 1):
            d = out / "runs" / p / f"ws_en_{i:03d}" / "r0"
            if d == broken:
                continue
            e = json.loads((d / "judgement.json").read_text())["widesearch"]
            answer = json.loads((d / "result.json").read_text())["answer"]
            span = extract_markdown_table(answer).rows[0][0]  # type: ignore[union-attr]
            gold = read_gold_csv(f"Answer,Note\n\"{row['answer']}\",fine\n").rows[0][0]
            # one gold row, one answer row: right key -> the row joins, the judge scores the note 1 -> all six 1
            right = norm_str(span) == norm_str(gold)
            assert e["score"] == e["f1_by_row"] == e["f1_by_item"] == (1.0 if right else 0.0), (span, gold, e)
            assert e["judge_model"] == ("grader" if e["judge_calls"] else None)
            assert (d / "widesearch_cells.csv").read_text().startswith("row_key,column,response,gold,metric")
            entries.setdefault(p, []).append(e)

    assert entries["fte"][0]["score"] == 1.0  # the success path was taken (no key map: the key matched)
    r = runner.invoke(app, ["report", str(out), "--out", str(tmp_path / "rep")])
    assert r.exit_code == 0, r.output
    md = (tmp_path / "rep" / "report.md").read_text()
    assert md.index("| shell |", md.index("## WideSearch")) < md.index("| fte |", md.index("## WideSearch"))
    assert "## WideSearch" in md and "| Profile | Tasks | Scored runs | Not scored | Success | Row-F1 | Item-F1 |" in md
    section = json.loads((tmp_path / "rep" / "widesearch.json").read_text())["profiles"]
    by = {g["profile"]: g for g in section}
    assert set(by) == set(PROFILES) and (by["fte"]["scored"], by["fte"]["not_scored"]) == (1, 1)
    for p, es in entries.items():
        mean = sum(e["f1_by_item"] for e in es) / len(es)
        assert by[p]["f1_by_item"]["avg_n"] == pytest.approx(mean)
        assert f"| {p} | {len(es)} | {len(es)} | {by[p]['not_scored']} | " in md
