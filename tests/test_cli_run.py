"""``fte-shell run`` through typer's CliRunner: no endpoint, an end-to-end run over the scripted policy,
config precedence (TOML < env < flags), bad config keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fte_shell.cli import app
from fte_shell.cli.run import _meta_facts, preview
from fte_shell.config import deep_merge, env_overrides
from fte_shell.standins.research import ResearchPolicy
from fte_shell.standins.server import ScriptedServer

Q = "Which function in the json module serializes an object to a JSON formatted str?"
CLEAN_ENV = {"OPENAI_BASE_URL": "", "OPENAI_API_KEY": "", "OPENAI_MODEL": "", "SERPER_API_KEY": "", "COLUMNS": "200"}


@pytest.fixture(scope="module")
def pydoc_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from fte_shell.search.pydoc_corpus import build_pydoc_corpus

    return build_pydoc_corpus(tmp_path_factory.mktemp("pydoc") / "index")


def invoke(args: list[str], env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, args, env={**CLEAN_ENV, **(env or {})})


def test_no_endpoint_stops_at_once_naming_the_ways(tmp_path: Path) -> None:
    res = invoke(["run", Q, "--out", str(tmp_path / "run")])
    assert res.exit_code == 2
    for way in ("--base-url", "--model", "[model]", "--config", "OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL"):
        assert way in res.output
    assert "fte-shell demo" in res.output
    assert not (tmp_path / "run").exists()


def test_run_end_to_end_with_live_log(tmp_path: Path, pydoc_corpus: Path) -> None:
    out = tmp_path / "run"
    with ScriptedServer(policy=ResearchPolicy()) as srv:
        args = ["run", Q, "--profile", "fte", "--base-url", srv.base_url, "--model", "policy", "--corpus", str(pydoc_corpus), "--retriever", "bm25s"]
        res = invoke([*args, "--out", str(out), "--max-turns", "10", "--date", "2030-05-06"])
    assert res.exit_code == 0, res.output
    text = res.output
    assert "local corpus" in text and "no SERPER_API_KEY is set" in text  # says which search it uses
    assert "turn 1" in text and "turn 6" in text and "tokens" in text
    assert 'search({"query":' in text and 'grep({"pattern":' in text
    assert "json.dumps" in text and f"run directory: {out}" in text
    r = json.loads((out / "result.json").read_text())
    assert r["answer"] == "json.dumps" and r["profile"] == "fte"
    assert srv.requests[0]["messages"][0]["content"].endswith("Current date: 2030-05-06")
    assert len(list((out / "workspace").glob("*.txt"))) == 2


def test_run_without_answer_says_so(tmp_path: Path, pydoc_corpus: Path) -> None:
    with ScriptedServer(["hmm", "hmm"]) as srv:
        res = invoke(
            ["run", Q, "-p", "fte", "--base-url", srv.base_url, "-m", "m", "--corpus", str(pydoc_corpus), "--retriever", "bm25s",
             "--max-turns", "2", "-o", str(tmp_path / "r"), "--quiet"]
        )
    assert res.exit_code == 0, res.output
    assert "No answer: the run stopped with 'max_turns'" in res.output
    assert "turn 1" not in res.output  # --quiet: no live log


def test_precedence_toml_then_env_then_flags(tmp_path: Path, pydoc_corpus: Path) -> None:
    with ScriptedServer(["<answer>a</answer>"] * 3) as srv:
        toml = tmp_path / "c.toml"
        toml.write_text(
            f'[model]\nbase_url = "{srv.base_url}"\nmodel = "from-toml"\ntemperature = 0.25\n'
            f'[agent]\nprofile = "fte"\n[search]\nbackend = "local"\ncorpus = "{pydoc_corpus}"\nretriever = "bm25s"\n'
        )
        base = ["run", Q, "--config", str(toml)]
        assert invoke([*base, "-o", str(tmp_path / "1"), "-q"]).exit_code == 0
        assert invoke([*base, "-o", str(tmp_path / "2"), "-q"], env={"OPENAI_MODEL": "from-env"}).exit_code == 0
        res = invoke([*base, "-o", str(tmp_path / "3"), "-q", "--model", "from-flag", "--temperature", "0.5"], env={"OPENAI_MODEL": "from-env"})
        assert res.exit_code == 0, res.output
    assert [(r["model"], r["temperature"]) for r in srv.requests] == [
        ("from-toml", 0.25), ("from-env", 0.25), ("from-flag", 0.5)
    ]


def test_unknown_config_key_is_named(tmp_path: Path) -> None:
    toml = tmp_path / "bad.toml"
    toml.write_text('[model]\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\ntemprature = 1.0\n')
    res = invoke(["run", Q, "--config", str(toml)])
    assert res.exit_code == 2 and "unknown key 'model.temprature'" in res.output


def test_helpers() -> None:
    assert env_overrides({"OPENAI_MODEL": "x", "SERPER_API_KEY": "k", "OTHER": "y"}) == {
        "model": {"model": "x"},
        "search": {"serper_api_key": "k"},
    }
    assert deep_merge({"a": {"b": 1, "c": 2}}, {"a": {"b": None, "c": 3}, "d": {"e": None}}) == {"a": {"b": 1, "c": 3}, "d": {}}
    assert preview("\n".join(str(i) for i in range(20)), lines=3) == "0\n1\n2\n… 17 more lines"
    assert _meta_facts({"exit_code": 2, "truncated": True}) == ["exit 2", "output truncated"]
    assert _meta_facts({"exit_code": None, "timed_out": True, "restarted": True}) == ["timed out", "shell restarted"]
    assert _meta_facts({"exit_code": 0}) == []


@pytest.mark.docker
def test_run_shell_profile_end_to_end(tmp_path: Path, pydoc_corpus: Path, docker_ready: None) -> None:
    out = tmp_path / "run"
    with ScriptedServer(policy=ResearchPolicy()) as srv:
        args = ["run", Q, "--base-url", srv.base_url, "--model", "policy", "--corpus", str(pydoc_corpus), "--retriever", "bm25s", "-o", str(out)]
        res = invoke(args)
    assert res.exit_code == 0, res.output
    assert "$ search " in res.output and "$ fetch json" in res.output and "$ sed -n" in res.output
    r = json.loads((out / "result.json").read_text())
    assert r["profile"] == "shell" and r["answer"] == "json.dumps" and r["tool_calls"] == {"bash": 5}
    assert len(list((out / "workspace").glob("*.txt"))) == 2


def test_ctrl_c_exits_130_with_the_partial_run(tmp_path: Path, pydoc_corpus: Path) -> None:
    import signal
    import subprocess
    import sys
    import time

    from fte_shell.standins.server import ScriptTurn

    out = tmp_path / "run"
    script = [ScriptTurn(tool_calls=[{"name": "search", "arguments": {"query": "json"}}]), ScriptTurn(content="x", delay_s=20)]
    with ScriptedServer(script) as srv:
        cmd = [sys.executable, "-m", "fte_shell", "run", Q, "-p", "fte", "--base-url", srv.base_url, "-m", "m",
               "--corpus", str(pydoc_corpus), "--retriever", "bm25s", "-o", str(out)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 60
        while len(srv.requests) < 2 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        text, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, text
    assert "interrupted" in text and str(out) in text
    assert json.loads((out / "result.json").read_text())["stop_reason"] == "interrupted"
