"""run_question end to end: the run directory format, early failures, and interrupted runs (a real
subprocess signalled during a slow scripted turn) for the structured and the shell profile."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from conftest import trajectory

from fte_shell.config import RunConfig
from fte_shell.errors import ConfigError, ModelError, SandboxUnavailable
from fte_shell.runner import run_question
from fte_shell.standins.research import ResearchPolicy
from fte_shell.standins.server import ScriptedServer, ScriptTurn

Q = "Which function in the json module serializes an object to a JSON formatted str?"
RESULT_KEYS = {
    "question", "answer", "profile", "model", "turns", "stop_reason", "tool_calls", "usage", "summary_usage", "cost_usd",
    "wall_s", "run_id", "started_at", "meta", "config_digest",
}


@pytest.fixture(scope="session")
def pydoc_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from fte_shell.search.pydoc_corpus import build_pydoc_corpus

    return build_pydoc_corpus(tmp_path_factory.mktemp("pydoc") / "index")


def config(base_url: str, corpus: Path, profile: str = "fte") -> RunConfig:
    return RunConfig.model_validate(
        {
            "model": {"base_url": base_url, "model": "policy", "max_retries": 0},
            "agent": {"profile": profile, "max_turns": 12, "current_date": "2026-01-02"},
            "search": {"backend": "local", "corpus": str(corpus), "retriever": "bm25s"},
        }
    )


def test_run_directory_format(tmp_path: Path, pydoc_corpus: Path) -> None:
    seen: list[str] = []
    with ScriptedServer(policy=ResearchPolicy()) as srv:
        cfg = config(srv.base_url, pydoc_corpus)
        result = run_question(Q, cfg, tmp_path / "run", qid="q-7", log=lambda e: seen.append(e["type"]))
    run = tmp_path / "run"
    assert result.answer == "json.dumps" and result.stop_reason == "answer" and result.run_dir == run
    events = trajectory(run)
    assert [e["type"] for e in events] == seen  # the live log saw every event as it was written
    assert events[0]["type"] == "start" and events[-1]["type"] == "end"
    assert all(isinstance(e["t"], float) for e in events)
    assert [e["t"] for e in events] == sorted(e["t"] for e in events)
    start = events[0]
    assert start["question"] == Q and start["profile"] == "fte" and start["model"] == "policy"
    assert start["system_prompt"].endswith("Current date: 2026-01-02")
    assert {t["function"]["name"] for t in start["tools"]} == {"search", "fetch", "grep", "read", "list_fetched"}
    assert start["config"]["agent"]["profile"] == "fte"
    calls = [e for e in events if e["type"] == "model_call"]
    tools = [e for e in events if e["type"] == "tool_call"]
    assert [c["turn"] for c in calls] == list(range(1, result.turns + 1))
    for c in calls:
        assert set(c["usage"]) == {"prompt_tokens", "completion_tokens", "total_tokens"}
        assert c["message"]["role"] == "assistant" and c["latency_s"] >= 0
    for t in tools:
        assert {"turn", "id", "name", "arguments", "raw_arguments", "observation", "error", "duration_s", "meta"} <= set(t)
        assert t["error"] is False and json.loads(t["raw_arguments"]) == t["arguments"]
    assert [t["name"] for t in tools] == ["search", "fetch", "fetch", "list_fetched", "grep", "read"]
    r = json.loads((run / "result.json").read_text())
    assert set(r) == RESULT_KEYS
    assert r["answer"] == "json.dumps" and r["run_id"] == "q-7" and r["meta"] == {"qid": "q-7", "retriever": cfg.search.retriever}
    assert r["tool_calls"] == {"search": 1, "fetch": 2, "list_fetched": 1, "grep": 1, "read": 1}
    assert r["usage"] == {k: sum(c["usage"][k] for c in calls) for k in r["usage"]}
    assert r["usage"]["total_tokens"] == sum(x["usage"]["total_tokens"] for x in srv.responses)
    files = sorted(p.name for p in (run / "workspace").glob("*.txt"))
    assert len(files) == 2 and all(f.startswith("json") for f in files)
    fetched = [t["observation"].split()[0] for t in tools if t["name"] == "fetch"]
    assert sorted(Path(p).name for p in fetched) == files


def test_no_endpoint_fails_before_anything_is_created(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ModelError, match="--base-url"):
        run_question(Q, RunConfig(), tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_bad_input_fails_before_anything_is_created(tmp_path: Path, pydoc_corpus: Path) -> None:
    with ScriptedServer(["<answer>x</answer>"]) as srv:
        cfg = config(srv.base_url, pydoc_corpus)
        cfg.agent.profile = "telepathy"
        with pytest.raises(ConfigError, match="unknown profile 'telepathy'"):
            run_question(Q, cfg, tmp_path / "run")
        with pytest.raises(ConfigError, match="the question is empty"):
            run_question("  ", config(srv.base_url, pydoc_corpus), tmp_path / "run")
    assert not (tmp_path / "run").exists() and srv.requests == []


@pytest.mark.docker
def test_profile_that_cannot_start_is_recorded_without_a_result(
    tmp_path: Path, pydoc_corpus: Path, docker_ready: None
) -> None:
    with ScriptedServer(["<answer>x</answer>"]) as srv:
        cfg = config(srv.base_url, pydoc_corpus, profile="shell")
        cfg.sandbox.image = "fte-shell-test-missing-image:none"
        cfg.sandbox.auto_build = False
        with pytest.raises(SandboxUnavailable, match="fte-shell-test-missing-image"):
            run_question(Q, cfg, tmp_path / "run")
    (ev,) = trajectory(tmp_path / "run")
    assert ev["type"] == "error" and ev["turn"] == 0 and "profile 'shell' failed to start" in ev["message"]
    assert not (tmp_path / "run" / "result.json").exists() and srv.requests == []


CHILD = """
import sys
from pathlib import Path
from fte_shell.config import RunConfig
from fte_shell.runner import run_question
base_url, corpus, profile, out, qid = sys.argv[1:6]
cfg = RunConfig.model_validate({"model": {"base_url": base_url, "model": "slow", "max_retries": 0},
    "agent": {"profile": profile}, "search": {"backend": "local", "corpus": corpus, "retriever": "bm25s"}})
run_question("Which function serializes JSON?", cfg, Path(out), qid=qid)
"""


def _interrupt_child(tmp_path: Path, corpus: Path, profile: str, sig: signal.Signals) -> tuple[Path, str, int]:
    qid = f"test-interrupt-{uuid.uuid4().hex[:8]}"
    out = tmp_path / "run"
    script = [
        ScriptTurn(tool_calls=[{"name": "bash" if profile == "shell" else "search", "arguments": {"command": "search json dumps"} if profile == "shell" else {"query": "json dumps"}}]),
        ScriptTurn(content="<answer>too late</answer>", delay_s=20),
    ]
    with ScriptedServer(script) as srv:
        proc = subprocess.Popen([sys.executable, "-c", CHILD, srv.base_url, str(corpus), profile, str(out), qid])
        try:
            deadline = time.monotonic() + 120
            while len(srv.requests) < 2 and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            assert len(srv.requests) == 2, "the child never reached the slow turn"
            proc.send_signal(sig)
            rc = proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return out, qid, rc


def _assert_interrupted(out: Path, rc: int) -> None:
    assert rc != 0
    lines = (out / "trajectory.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines]  # every line parses
    assert events[0]["type"] == "start"
    assert [e["type"] for e in events if e["type"] == "tool_call"] == ["tool_call"]
    assert events[-1]["type"] == "end" and events[-1]["stop_reason"] == "interrupted"
    r = json.loads((out / "result.json").read_text())
    assert r["stop_reason"] == "interrupted" and r["answer"] is None and r["turns"] == 2


def test_sigterm_mid_run_leaves_a_valid_trajectory(tmp_path: Path, pydoc_corpus: Path) -> None:
    out, _, rc = _interrupt_child(tmp_path, pydoc_corpus, "fte", signal.SIGTERM)
    _assert_interrupted(out, rc)


@pytest.mark.docker
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_shell_run_interrupted_leaves_trajectory_and_no_container(
    tmp_path: Path, pydoc_corpus: Path, docker_ready: None, sig: signal.Signals
) -> None:
    import docker

    out, qid, rc = _interrupt_child(tmp_path, pydoc_corpus, "shell", sig)
    _assert_interrupted(out, rc)
    left = docker.from_env().containers.list(all=True, filters={"label": f"fte-shell.run-id={qid}"})
    assert left == [], f"containers left behind: {[c.id[:12] for c in left]}"
    assert os.listdir(out / "workspace") == []  # the search call fetched nothing
