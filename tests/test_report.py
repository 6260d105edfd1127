"""The report on hand-made runs: tables carry the hand-computed numbers, the HTML is self-contained."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from test_metrics import fte_run, shell_run

from fte_shell.errors import ConfigError
from fte_shell.report.build import write_report


def test_report_tables_and_files(tmp_path: Path) -> None:
    shell_run(tmp_path / "s")
    d = fte_run(tmp_path / "s")
    (d / "judgement.json").write_text(json.dumps({"match": {"correct": True, "f1": 1.0, "gold": "42"}}))
    rep = write_report([tmp_path / "s"], tmp_path / "out", title="Hand-made")
    md = rep.markdown.read_text()
    # shell first (side by side with the structured profile)
    assert [p.profile for p in rep.profiles] == ["shell", "fte"]
    # main: shell 1 search, 4 select, 5 extract, 8 calls, 500 tokens, 12.5 s; fte judged correct
    # (model column; failed = infrastructure; Wilson 1/1 = [20.7, 100]; no refused calls)
    assert "| shell | m | 1 | 0 | 0 | – | – | – | 100.0% | 1.00 | 4.00 | 5.00 | 8.00 | 0.00 | 500 | 12.5 |" in md
    assert ("| fte | m | 1 | 0 | 1 | 100.0% | [20.7, 100.0] | 1.00 | 100.0% | 1.00 | 3.00 | 5.00 | 10.00 | 0.00 | 300 "
            "| 12.5 |") in md
    # behaviour: revisit 1/3 and 2/2, grep:read 2/3 and 3/2, fetch repeat 1/4 and 1/3, cache 3 files 1,350 chars
    assert "| shell | 33.3% | 0.67 | 100.0% | 25.0% | 3.0 | 1,350 | 2.00 | 3.00 |" in md
    assert "| fte | 100.0% | 1.50 | 100.0% | 33.3% | 2.0 | 1,250 | 3.00 | 2.00 |" in md
    assert "fetch→fetch (2, 15.4%)" in md  # 2 of the shell run's 13 bigrams
    html = rep.html.read_text()
    assert "<h1>Hand-made</h1>" in html and "<table>" in html
    imgs = html.split("data:image/png;base64,")[1:]
    assert len(imgs) == 5
    for chunk in imgs:
        assert base64.b64decode(chunk.split("'", 1)[0])[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in rep.plots) == ["accuracy.png", "cache.png", "calls.png", "revisit.png", "tokens.png"]
    data = json.loads(rep.metrics.read_text())
    assert len(data["runs"]) == 2 and data["profiles"][0]["revisit_rate"] == pytest.approx(1 / 3)


def test_report_of_several_dirs_and_single_run(tmp_path: Path) -> None:
    a = shell_run(tmp_path / "a")
    fte_run(tmp_path / "b")
    rep = write_report([a, tmp_path / "b"], tmp_path / "out")
    assert {p.profile: p.runs for p in rep.profiles} == {"shell": 1, "fte": 1}


def test_report_rows_per_model_when_several(tmp_path: Path) -> None:
    shell_run(tmp_path / "a")
    d = fte_run(tmp_path / "b")
    res = json.loads((d / "result.json").read_text())
    (d / "result.json").write_text(json.dumps({**res, "model": "other-model"}))
    rep = write_report([tmp_path / "a", tmp_path / "b"], tmp_path / "out")
    assert [p.label for p in rep.profiles] == ["shell · m", "fte · other-model"]
    assert [(p.profile, p.model) for p in rep.profiles] == [("shell", "m"), ("fte", "other-model")]
    md = rep.markdown.read_text()
    assert "| shell | m | 1 |" in md and "| fte | other-model | 1 |" in md and "| shell · m | 33.3% |" in md


def test_report_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="x: no such file or directory"):
        write_report([tmp_path / "x"], tmp_path / "out")
    with pytest.raises(ConfigError, match="neither a run directory nor a sweep directory with runs"):
        write_report([tmp_path], tmp_path / "out")


def test_report_on_a_null_and_a_perfect_profile(tmp_path: Path) -> None:
    """A scripted sweep where fte answers every question right and fte-no-grep every one wrong: the
    Wilson intervals at 0/n and n/n hold their estimate, so the accuracy plot's error bars are not negative
    (matplotlib raised "'yerr' must not contain negative values" at 0/3)."""
    from fte_shell.config import ModelConfig, RunConfig, SearchConfig
    from fte_shell.standins.server import ScriptedServer
    from fte_shell.sweep import BenchConfig, run_sweep
    from fte_shell.sweep.judge import judge_runs
    from tests.servers import run_key

    gold = {"Who wrote Hamlet?": "William Shakespeare", "What is 6 times 7?": "42", "Capital of France?": "Paris"}
    qs = tmp_path / "qs.jsonl"
    qs.write_text("".join(json.dumps({"id": f"q{i}", "question": q, "answer": a}) + "\n"
                          for i, (q, a) in enumerate(gold.items())))

    def policy(body: dict) -> str:  # type: ignore[type-arg]
        key = run_key(body)
        assert key is not None, "answers on the first turn"
        question, profile = key  # fte-no-grep has no grep tool: run_key calls it snippet-only
        return f"<answer>{gold[question] if profile == 'fte' else 'no idea'}</answer>"

    out = tmp_path / "sweep"
    with ScriptedServer(policy=policy) as srv:
        cfg = RunConfig(model=ModelConfig(base_url=srv.base_url, model="scripted", api_key="x"),
                        search=SearchConfig(backend="none"))
        bench = BenchConfig(dataset=f"jsonl:{qs}", profiles=["fte", "fte-no-grep"], out=out, concurrency=2)
        stats = run_sweep(bench, cfg)
    assert (stats.done, stats.answered, stats.failed) == (6, 6, 0)
    js = judge_runs([out], "match")
    assert (js.judged, js.correct) == (6, 3)

    rep = write_report([out], tmp_path / "report")
    acc = {p.profile: (p.accuracy, p.accuracy_ci95) for p in rep.profiles}
    assert acc["fte"][0] == 1.0 and acc["fte"][1][1] == 1.0  # type: ignore[index]
    assert acc["fte-no-grep"][0] == 0.0 and acc["fte-no-grep"][1][0] == 0.0  # type: ignore[index]
    assert "accuracy.png" in {p.name for p in rep.plots}
    for p in rep.plots:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
