"""``fte-shell export inspect|atif`` on real scripted sweeps (docs/export.md).

Two sweeps: HotpotQA (2 questions × 2 repetitions × the shell and fte profiles, the scripted research
policy over loopback; the model endpoint answers one fte request with HTTP 400, so exactly one run ends
``bad_request``, an infrastructure failure), judged model-free and by a scripted LLM judge; and one
WideSearch task (fte) scored by its model-free table grader. Exported to Inspect AI eval logs and read back
with inspect-ai's own reader and dataframes, opened in the real ``inspect view`` in headless Chromium (a
screenshot of a sample's conversation with its tool calls: docs/img/inspect-view.png via
$FTE_SCREENSHOT_DIR), exported again to check the files are the same, and exported to ATIF (validated and
round-tripped through the atif models)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from fte_shell.cli import app
from fte_shell.config import ModelConfig, RunConfig
from fte_shell.config.budget import ModelPrice
from fte_shell.standins.research import ResearchPolicy
from fte_shell.standins.server import ScriptedServer, ScriptTurn
from fte_shell.sweep import BenchConfig, run_sweep
from tests.test_widesearch_cli import EVAL_EXACT, RIGHT
from tests.widesearch_data import write_tasks

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
CHROMIUM = Path(os.environ.get("FTE_CHROMIUM", "/usr/bin/chromium"))
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
REASONING = "The response's final answer is compared with the reference answer."
LLM = "llm-equivalence@grader"
"""The LLM judge's verdict key in judgement.json (HotpotQA's preset, the grading model's name)."""
pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(600)]
runner = CliRunner()


def _need(what: str, ok: bool) -> None:
    if not ok:
        if IN_CI:
            pytest.fail(f"{what} is missing (the test extra installs it)")
        pytest.skip(f"{what} is missing")


def _events(run: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (run / "trajectory.jsonl").read_text().splitlines() if x.strip()]


def _json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())




def judge_policy(body: dict[str, Any]) -> str:
    """The scripted LLM judge: right for the San Juan question, wrong for the other."""
    prompt = body["messages"][-1]["content"]
    ok = "San Juan" in prompt
    return (f"extracted_final_answer: as given\nreasoning: {REASONING}\ncorrect: {'yes' if ok else 'no'}\n"
            "confidence: 100")


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory: pytest.TempPathFactory, docker_ready: None, hotpotqa_dir: Path,
           hotpotqa_corpus: Path) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("sweeps")
    hot = root / "hotpot"
    policy, lock, fired = ResearchPolicy(), threading.Lock(), []

    def flaky(body: dict[str, Any]) -> Any:
        msgs = body.get("messages") or []
        tools = {t["function"]["name"] for t in body.get("tools") or []}
        question = next((m["content"] for m in msgs if m["role"] == "user"), "")
        if "grep" in tools and "San Juan" in question and any(m["role"] == "assistant" for m in msgs):
            with lock:
                if not fired:
                    fired.append(1)
                    return ScriptTurn(status=400, error="scripted: the request was refused")
        return policy(body)

    with ScriptedServer(policy=flaky) as srv:
        cfg = RunConfig(model=ModelConfig(base_url=srv.base_url, model="scripted", api_key="x", max_retries=1,
                                          backoff_s=0.01))
        bench = BenchConfig(dataset=f"hotpotqa:{hotpotqa_dir}", limit=2, runs=2, profiles=["shell", "fte"],
                            concurrency=2, out=hot, corpus_dir=hotpotqa_corpus)
        stats = run_sweep(bench, cfg)
    assert (stats.total, stats.done, stats.failed) == (8, 7, 1) and fired == [1]
    r = runner.invoke(app, ["judge", str(hot)])
    assert r.exit_code == 0, r.output
    with ScriptedServer(policy=judge_policy) as judge:
        r = runner.invoke(app, ["judge", str(hot), "--judge-model", "grader", "--base-url", judge.base_url,
                                "--api-key", "k"])
        assert r.exit_code == 0, r.output

    dev = {x["_id"]: x for x in map(json.loads, (hotpotqa_dir / "dev.jsonl").read_text().splitlines()[:30])}
    data = write_tasks(root / "ws-data", [{"instance_id": "ws_en_001", "query": dev[RIGHT]["question"],
                                           "evaluation": EVAL_EXACT,
                                           "gold": f"Answer,Note\n\"{dev[RIGHT]['answer']}\",\n"}])
    ws = root / "ws"
    r = runner.invoke(app, ["bench", f"widesearch:{data}", "--profiles", "fte", "--out", str(ws), "--scripted",
                            "--corpus", str(hotpotqa_corpus), "--search", "local", "--no-progress"])
    assert r.exit_code == 0, r.output
    return {"hotpot": hot, "ws": ws}


@pytest.fixture(scope="module")
def logs(sweeps: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    _need("inspect-ai", _importable("inspect_ai"))
    out = tmp_path_factory.mktemp("inspect") / "logs"
    r = runner.invoke(app, ["export", "inspect", str(sweeps["hotpot"]), str(sweeps["ws"]), "--out", str(out),
                            "--no-progress"])
    assert r.exit_code == 0, r.output
    assert "wrote 3 eval log(s) for 9 run(s)" in r.output
    return out


def _importable(name: str) -> bool:
    try:
        __import__(name)
    except ImportError:
        return False
    return True


def _runs(sweep: Path) -> dict[tuple[str, str, int], Path]:
    return {(d.parent.parent.name, d.parent.name, int(d.name[1:])): d for d in sweep.glob("runs/*/*/r*")}


def test_inspect_logs_read_back(logs: Path, sweeps: dict[str, Path], hotpotqa_dir: Path) -> None:
    from inspect_ai.log import read_eval_log

    assert sorted(p.name for p in logs.iterdir()) == [
        "hotpotqa_fte_scripted.eval", "hotpotqa_shell_scripted.eval", "widesearch_fte_scripted.eval"]
    dev = {x["_id"]: x for x in map(json.loads, (hotpotqa_dir / "dev.jsonl").read_text().splitlines()[:30])}
    runs = _runs(sweeps["hotpot"])
    failed = [k for k, d in runs.items() if _json(d / "result.json")["stop_reason"] == "bad_request"]
    assert len(failed) == 1 and failed[0][0] == "fte"
    for profile in ("shell", "fte"):
        log = read_eval_log(str(logs / f"hotpotqa_{profile}_scripted.eval"), resolve_attachments=True)
        assert (log.eval.task, log.eval.solver, log.eval.model) == ("hotpotqa", profile, "scripted")
        assert log.eval.config.epochs == 2 and log.eval.dataset.samples == 2
        assert log.samples is not None and len(log.samples) == 4
        assert log.results is not None and log.results.completed_samples == (3 if profile == "fte" else 4)
        for s in log.samples:
            d = runs[(profile, str(s.id), s.epoch - 1)]
            res, events = _json(d / "result.json"), _events(d)
            assert s.input == dev[str(s.id)]["question"] and s.target == dev[str(s.id)]["answer"]
            assert s.metadata["fte_shell"]["stop_reason"] == res["stop_reason"]
            assert s.model_usage["scripted"].input_tokens == res["usage"]["prompt_tokens"]
            assert s.model_usage["scripted"].output_tokens == res["usage"]["completion_tokens"]
            assert s.working_time == res["wall_s"]
            calls = [e for e in events if e["type"] == "tool_call"]
            model_calls = [e for e in events if e["type"] == "model_call"]
            # the conversation: system, question, then each reply and its tool results, whole
            assert [m.role for m in s.messages[:2]] == ["system", "user"]
            assert s.messages[0].text == events[0]["system_prompt"] and s.messages[1].text == s.input
            assistant = [m for m in s.messages if m.role == "assistant"]
            assert len(assistant) == len(model_calls)
            sent = [tc for m in assistant for tc in (m.tool_calls or [])]
            assert [(tc.id, tc.function, tc.arguments) for tc in sent] == [
                (c["id"], c["name"], c["arguments"]) for c in calls]
            tool_msgs = [m for m in s.messages if m.role == "tool"]
            assert [(m.tool_call_id, m.text) for m in tool_msgs] == [(c["id"], c["observation"]) for c in calls]
            # events: one model event per model call, one tool event per tool call
            model_evs = [e for e in s.events if e.event == "model"]
            tool_evs = [e for e in s.events if e.event == "tool"]
            assert [e.output.usage.input_tokens for e in model_evs] == [
                c["usage"]["prompt_tokens"] for c in model_calls]
            assert [e.call.request["max_tokens"] for e in model_evs] == [c["request"]["max_tokens"]
                                                                           for c in model_calls]
            assert [e.output.response_id for e in model_evs] == [c["response"]["id"] for c in model_calls]
            assert [(e.id, e.function, e.arguments, e.result) for e in tool_evs] == [
                (c["id"], c["name"], c["arguments"], c["observation"]) for c in calls]
            if profile == "shell":
                assert all(e.metadata["fte_shell"]["meta"]["exit_code"] == c["meta"]["exit_code"]
                           for e, c in zip(tool_evs, calls, strict=True))
            # a model event's input is the conversation before the call (resolved by inspect's reader)
            for e, k in zip(model_evs, [i for i, m in enumerate(s.messages) if m.role == "assistant"], strict=True):
                assert [m.id for m in e.input] == [m.id for m in s.messages[:k]]
            key = (profile, str(s.id), s.epoch - 1)
            if key in failed:
                assert s.error is not None and s.error.message.startswith("bad_request: ")
                assert s.scores is None
                continue
            assert s.error is None
            j = _json(d / "judgement.json")
            assert s.scores is not None and set(s.scores) == {LLM, "match", "match_f1", "match_em", "verdict"}
            assert s.scores["match"].value == ("C" if j["match"]["correct"] else "I")
            assert s.scores["match_f1"].value == j["match"]["f1"]
            assert s.scores[LLM].value == ("C" if "San Juan" in s.input else "I")
            assert s.scores[LLM].explanation == REASONING
            assert j["primary"] == LLM and s.scores["verdict"].value == s.scores[LLM].value
            assert s.output.completion == res["answer"]
    ws = read_eval_log(str(logs / "widesearch_fte_scripted.eval"), resolve_attachments=True)
    assert ws.samples is not None and len(ws.samples) == 1
    s = ws.samples[0]
    assert s.target == "Answer,Note\n\"" + dev[RIGHT]["answer"] + "\",\n"
    assert s.scores is not None and s.scores["widesearch"].value == {
        "score": 1.0, "precision_by_row": 1.0, "recall_by_row": 1.0, "f1_by_row": 1.0,
        "precision_by_item": 1.0, "recall_by_item": 1.0, "f1_by_item": 1.0}
    assert s.scores["widesearch"].explanation == "1 answer row(s) against 1 gold row(s); 0 judge call(s)"


def test_samples_dataframe(logs: Path) -> None:
    _need("pandas", _importable("pandas"))
    from inspect_ai.analysis import samples_df

    df = samples_df([str(p) for p in sorted(logs.iterdir())])
    assert len(df) == 9  # one row per sample
    hot = df[df["log"].str.contains("hotpotqa_")]
    assert len(hot) == 8 and hot["score_match"].notna().sum() == 7 and hot["score_verdict"].notna().sum() == 7
    assert set(hot["score_verdict"].dropna()) == {"C", "I"} and hot["score_match_f1"].notna().sum() == 7
    assert hot[f"score_{LLM}"].notna().sum() == 7
    assert (hot["error"].fillna("") != "").sum() == 1  # the infrastructure failure: an error, no score
    assert df[df["log"].str.contains("widesearch_")]["score_widesearch"].notna().sum() == 1


def test_json_format_and_single_file(sweeps: dict[str, Path], tmp_path: Path) -> None:
    from inspect_ai.log import read_eval_log

    r = runner.invoke(app, ["export", "inspect", str(sweeps["hotpot"]), "--out", str(tmp_path / "j"),
                            "--format", "json", "--no-progress"])
    assert r.exit_code == 0, r.output
    log = read_eval_log(str(tmp_path / "j" / "hotpotqa_shell_scripted.json"))
    assert log.samples is not None and len(log.samples) == 4
    r = runner.invoke(app, ["export", "inspect", str(sweeps["ws"]), "--out", str(tmp_path / "one.eval")])
    assert r.exit_code == 0, r.output
    assert len(read_eval_log(str(tmp_path / "one.eval")).samples or []) == 1
    r = runner.invoke(app, ["export", "inspect", str(sweeps["hotpot"]), "--out", str(tmp_path / "two.eval")])
    assert r.exit_code == 2 and "2 (dataset, arm, model) cells" in r.output
    assert not (tmp_path / "two.eval").exists()


def test_export_is_deterministic(sweeps: dict[str, Path], tmp_path: Path) -> None:
    """The same sweep gives the same files: .json byte for byte, .eval member by member (the zip stamps
    each member with the time it was written, the one thing the format adds itself)."""
    paths = [str(sweeps["hotpot"]), str(sweeps["ws"])]
    for k in ("a", "b"):
        for fmt in ("eval", "json"):
            r = runner.invoke(app, ["export", "inspect", *paths, "--out", str(tmp_path / k / fmt), "--format",
                                    fmt, "--no-progress"])
            assert r.exit_code == 0, r.output
        time.sleep(1.1)  # a second apart: a time stamped from the clock would differ
    for f in sorted((tmp_path / "a" / "json").iterdir()):
        assert f.read_bytes() == (tmp_path / "b" / "json" / f.name).read_bytes(), f.name
    for f in sorted((tmp_path / "a" / "eval").iterdir()):
        with zipfile.ZipFile(f) as za, zipfile.ZipFile(tmp_path / "b" / "eval" / f.name) as zb:
            assert za.namelist() == zb.namelist()
            for name in za.namelist():
                assert za.read(name) == zb.read(name), (f.name, name)


def test_atif_validates_and_round_trips(sweeps: dict[str, Path], tmp_path: Path) -> None:
    _need("atif", _importable("atif"))
    from atif import Trajectory

    from fte_shell.export.atif_trajectory import dumps, trajectory
    from fte_shell.export.common import read_runs

    out = tmp_path / "atif"
    r = runner.invoke(app, ["export", "atif", str(sweeps["hotpot"]), str(sweeps["ws"]), "--out", str(out),
                            "--no-progress"])
    assert r.exit_code == 0, r.output
    files = sorted(out.rglob("*.json"))
    assert len(files) == 9
    by_dir = {run.run_dir: run for run in read_runs([sweeps["hotpot"], sweeps["ws"]])}
    for (profile, qid, rep), d in {**_runs(sweeps["hotpot"]), **_runs(sweeps["ws"])}.items():
        sweep = d.parents[3]
        f = out / sweep.name / profile / qid / f"r{rep}.json"
        text = f.read_text()
        traj = Trajectory.model_validate_json(text)  # validates against ATIF v1.8's models
        assert dumps(traj) == text and traj == trajectory(by_dir[d])  # lossless round trip
        res, events = _json(d / "result.json"), _events(d)
        assert traj.schema_version == "ATIF-v1.8" and traj.session_id == res["run_id"]
        assert (traj.agent.name, traj.agent.model_name) == ("fte-shell", "scripted")
        assert traj.agent.tool_definitions == events[0]["tools"]
        calls = [e for e in events if e["type"] == "model_call"]
        tools = [e for e in events if e["type"] == "tool_call"]
        agent = [s for s in traj.steps if s.source == "agent"]
        assert [s.source for s in traj.steps[:2]] == ["system", "user"]
        assert traj.steps[1].message == res["question"]
        assert len(agent) == len(calls)
        assert [s.metrics.prompt_tokens for s in agent] == [c["usage"]["prompt_tokens"] for c in calls]
        assert [(tc.tool_call_id, tc.function_name, tc.arguments) for s in agent for tc in s.tool_calls or []] == [
            (t["id"], t["name"], t["arguments"]) for t in tools]
        results = [x for s in agent for x in (s.observation.results if s.observation else [])]
        assert [(x.source_call_id, x.content) for x in results] == [(t["id"], t["observation"]) for t in tools]
        for s in agent:  # every observation answers a call of its own step
            ids = {tc.tool_call_id for tc in s.tool_calls or []}
            assert all(x.source_call_id in ids for x in (s.observation.results if s.observation else []))
        assert traj.final_metrics is not None
        assert traj.final_metrics.total_prompt_tokens == res["usage"]["prompt_tokens"]
        assert traj.final_metrics.total_completion_tokens == res["usage"]["completion_tokens"]
        assert traj.final_metrics.total_steps == len(traj.steps)
        assert traj.extra is not None and traj.extra["stop_reason"] == res["stop_reason"]
        if res["stop_reason"] == "bad_request":
            assert traj.extra["infrastructure_failure"] is True
            assert traj.steps[-1].source == "system" and "refused" in traj.steps[-1].message


@pytest.mark.parametrize(("kind", "module", "extra"), [("inspect", "inspect_ai", "inspect"), ("atif", "atif", "atif")])
def test_missing_extra_is_named(sweeps: dict[str, Path], tmp_path: Path, kind: str, module: str, extra: str) -> None:
    """Without the library (its import blocked in a fresh interpreter) the command names the extra."""
    code = (f"import sys; sys.modules[{module!r}] = None; sys.argv = ['fte-shell', 'export', {kind!r}, "
            f"{str(sweeps['ws'])!r}, '--out', {str(tmp_path / 'out')!r}]; from fte_shell.cli import main; main()")
    p = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent), "COLUMNS": "200"})
    assert p.returncode == 2, p.stderr
    assert f"pip install 'fte-shell[{extra}]'" in p.stderr
    assert not (tmp_path / "out").exists()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def inspect_view(logs: Path) -> Iterator[str]:
    inspect = shutil.which("inspect") or str(Path(sys.executable).parent / "inspect")
    _need("the inspect CLI", Path(inspect).exists())
    port = _free_port()
    proc = subprocess.Popen([inspect, "view", "--log-dir", str(logs), "--host", "127.0.0.1", "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(url + "/api/logs", timeout=5) as r:
                    if len(json.loads(r.read())["files"]) == 3:
                        break
            except OSError:
                pass
            assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
            assert time.monotonic() < deadline, "inspect view did not answer"
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_inspect_view_shows_a_conversation_with_tool_calls(inspect_view: str, sweeps: dict[str, Path],
                                                           tmp_path: Path) -> None:
    _need(str(CHROMIUM), CHROMIUM.exists())
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _need("the playwright package", False)
    runs = _runs(sweeps["hotpot"])
    (_profile, qid, rep), d = next((k, v) for k, v in sorted(runs.items()) if k[0] == "shell")
    calls = [e for e in _events(d) if e["type"] == "tool_call"]
    fetch = next(c for c in calls if c["arguments"]["command"].startswith("fetch "))
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS, headless=True)
        page = browser.new_page(viewport={"width": 1360, "height": 1000})
        page.goto(f"{inspect_view}/#/tasks/hotpotqa_shell_scripted.eval")
        page.get_by_text(qid).first.wait_for(timeout=60_000)  # the samples table lists the question
        page.goto(f"{inspect_view}/#/tasks/hotpotqa_shell_scripted.eval/samples/sample/{qid}/{rep + 1}/messages")
        command = page.get_by_text(fetch["arguments"]["command"], exact=True).first
        command.wait_for(timeout=60_000)  # the bash tool call, as the model made it
        command.scroll_into_view_if_needed()
        page.get_by_text(fetch["observation"].split("  ")[0]).first.wait_for(timeout=10_000)  # and its result
        body = page.inner_text("body")
        assert "ASSISTANT" in body.upper() and "bash" in body
        shot = tmp_path / "inspect-view.png"
        page.wait_for_timeout(500)
        page.screenshot(path=str(shot))
        browser.close()
    assert shot.stat().st_size > 20_000  # a rendered page, not a blank one
    if extra := os.environ.get("FTE_SCREENSHOT_DIR"):
        Path(extra).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(extra) / shot.name)


def test_run_without_trajectory_and_lone_run_dir(sweeps: dict[str, Path], tmp_path: Path) -> None:
    """A run the sweep recorded itself (its harness raised before the loop: result.json only, no model
    name) stays in its cell as an error sample; a run directory on its own exports too."""
    from inspect_ai.log import read_eval_log

    from fte_shell.record.audit import AuditMark, append_mark, run_key
    from fte_shell.record.rundir import write_result

    sweep = tmp_path / "sweep"
    shutil.copytree(sweeps["hotpot"], sweep, ignore=shutil.ignore_patterns("shared"))
    runs = _runs(sweep)
    key = next(k for k in sorted(runs) if k[0] == "shell")
    d = runs[key]
    (d / "trajectory.jsonl").unlink()
    (d / "judgement.json").unlink()
    write_result(d, {"question": "q", "answer": None, "profile": "shell", "stop_reason": "sandbox_unavailable",
                     "error": "the Docker daemon went away", "qid": key[1], "rep": key[2],
                     "finished_at": "2026-12-01T12:00:00+00:00"})
    marked = next(k for k in sorted(runs) if k[0] == "shell" and k != key)  # a reviewer's hand check
    append_mark(sweep, AuditMark(run=run_key(sweep, runs[marked]), mark="wrong", note="the gold names two things",
                                 who="ana", at="2026-12-01T12:00:00+00:00"))
    r = runner.invoke(app, ["export", "inspect", str(sweep), "--out", str(tmp_path / "logs"), "--no-progress"])
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == [
        "hotpotqa_fte_scripted.eval", "hotpotqa_shell_scripted.eval"]
    log = read_eval_log(str(tmp_path / "logs" / "hotpotqa_shell_scripted.eval"))
    assert log.samples is not None and len(log.samples) == 4
    s = next(x for x in log.samples if (x.id, x.epoch) == (key[1], key[2] + 1))
    assert s.error is not None and s.error.message == "sandbox_unavailable: the Docker daemon went away"
    assert s.scores is None and s.messages == [] and s.events == []
    m = next(x for x in log.samples if (x.id, x.epoch) == (marked[1], marked[2] + 1))
    assert m.scores is not None and m.scores["hand_check"].value == "I"
    assert m.scores["hand_check"].explanation == "the gold names two things"
    assert sum(1 for x in log.samples if x.scores and "hand_check" in x.scores) == 1
    other = next(k for k in sorted(runs, key=lambda k: -k[2]) if k[0] == "fte")  # a repetition 1
    r = runner.invoke(app, ["export", "inspect", str(runs[other]), "--out", str(tmp_path / "one.json")])
    assert r.exit_code == 0, r.output
    one = read_eval_log(str(tmp_path / "one.json"))
    assert one.eval.task == "runs" and one.samples is not None and [x.id for x in one.samples] == [other[1]]
    r = runner.invoke(app, ["export", "atif", str(runs[other]), "--out", str(tmp_path / "atif")])
    assert r.exit_code == 0, r.output
    assert [p.relative_to(tmp_path / "atif").as_posix() for p in (tmp_path / "atif").rglob("*.json")] == [
        f"fte/{other[1]}/r{other[2]}.json"]


@pytest.fixture(scope="module")
def think_sweep(tmp_path_factory: pytest.TempPathFactory, hotpotqa_dir: Path, hotpotqa_corpus: Path) -> Path:
    """One fte run against the vLLM emulator (reasoning in every reply), whose first reply has neither a
    tool call nor an answer (the loop nudges it)."""
    from tests.emulators import VLLM, Emulator

    policy = ResearchPolicy()

    def brain(body: dict[str, Any]) -> Any:
        if not any(m["role"] == "assistant" for m in body["messages"]):
            return "Let me think about where to start."
        return policy(body)

    out = tmp_path_factory.mktemp("think") / "sweep"
    with Emulator(VLLM(), brain, model="emu-model") as emu:
        cfg = RunConfig(model=ModelConfig(base_url=emu.base_url, model="emu-model", api_key="x",
                                          price=ModelPrice(input=1.0, output=2.0)))
        stats = run_sweep(BenchConfig(dataset=f"hotpotqa:{hotpotqa_dir}", limit=1, profiles=["fte"], out=out,
                                      corpus_dir=hotpotqa_corpus), cfg)
    assert (stats.done, stats.failed) == (1, 0)
    return out


def test_reasoning_and_nudges(think_sweep: Path, tmp_path: Path) -> None:
    from inspect_ai.log import read_eval_log
    from inspect_ai.model import ContentReasoning

    from fte_shell.export.atif_trajectory import loads

    (d,) = _runs(think_sweep).values()
    events = _events(d)
    calls = [e for e in events if e["type"] == "model_call"]
    nudges = [e for e in events if e["type"] == "nudge"]
    assert len(nudges) == 1 and all(c.get("reasoning") for c in calls)
    # USD 1 per million prompt tokens, 2 per million completion tokens (no cached tokens reported)
    costs = [(c["usage"]["prompt_tokens"] + 2 * c["usage"]["completion_tokens"]) / 1e6 for c in calls]
    assert [c["cost_usd"] for c in calls] == pytest.approx(costs)
    r = runner.invoke(app, ["export", "inspect", str(think_sweep), "--out", str(tmp_path / "log.eval")])
    assert r.exit_code == 0, r.output
    (s,) = read_eval_log(str(tmp_path / "log.eval"), resolve_attachments=True).samples or []
    assistant = [m for m in s.messages if m.role == "assistant"]
    assert [next(p.reasoning for p in m.content if isinstance(p, ContentReasoning)) for m in assistant] == [
        c["reasoning"] for c in calls]
    assert [m.text for m in assistant] == [c["message"]["content"] or "" for c in calls]
    assert [e.output.usage.total_cost for e in s.events if e.event == "model"] == [c["cost_usd"] for c in calls]
    assert s.model_usage["emu-model"].total_cost == pytest.approx(sum(costs))
    # the nudge is the user turn after the first reply, and an info event
    i = s.messages.index(assistant[0])
    assert s.messages[i + 1].role == "user" and s.messages[i + 1].text == nudges[0]["message"]
    assert [e.data["message"] for e in s.events if e.event == "info" and e.source == "fte-shell:nudge"] == [
        nudges[0]["message"]]
    r = runner.invoke(app, ["export", "atif", str(think_sweep), "--out", str(tmp_path / "atif")])
    assert r.exit_code == 0, r.output
    (f,) = (tmp_path / "atif").rglob("*.json")
    traj = loads(f.read_text())
    agent = [st for st in traj.steps if st.source == "agent"]
    assert [st.reasoning_content for st in agent] == [c["reasoning"] for c in calls]
    assert [st.metrics.cost_usd for st in agent] == [c["cost_usd"] for c in calls]
    assert traj.final_metrics.total_cost_usd == _json(d / "result.json")["cost_usd"] == pytest.approx(sum(costs), abs=1e-8)
    assert [st.source for st in traj.steps[:4]] == ["system", "user", "agent", "user"]
    assert traj.steps[3].message == nudges[0]["message"] and traj.steps[3].extra == {
        "event": "nudge", "turn": 1, "t": nudges[0]["t"], "kind": "no_tool_call"}
