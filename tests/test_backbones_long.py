"""The shell and fte profiles complete a 300-turn budget against every emulated server (the chat-completions
ones and the Responses API's) without a harness-side failure, and a small ``fte-shell bench`` runs through
every server for both profiles."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from conftest import trajectory
from emulator_responses import RESPONSES, serve, settings, settings_lines
from emulators import PERSONALITIES, Emulator, Steady
from typer.testing import CliRunner

from fte_shell.cli import app
from fte_shell.config import AgentConfig, ModelConfig, RunConfig, SearchConfig
from fte_shell.runner import run_question
from fte_shell.standins.research import ResearchPolicy
from fte_shell.stops import RESULT_STOP_REASONS

Q = "Which function in the json module serializes an object to a JSON formatted str?"
TURNS = 300
SERVERS = [*PERSONALITIES, *RESPONSES]
"""The chat-completions emulators and the Responses API's."""


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from fte_shell.search.pydoc_corpus import build_pydoc_corpus

    return build_pydoc_corpus(tmp_path_factory.mktemp("pydoc") / "index")


def long_run(name: str, profile: str, out: Path, corpus: Path) -> tuple[Any, list[dict[str, Any]], Emulator]:
    st = settings(name)
    with serve(name, Steady()) as emu:
        cfg = RunConfig(
            model=ModelConfig(base_url=emu.base_url, model=emu.model, **st["model"]),
            agent=AgentConfig(profile=profile, max_turns=TURNS, stuck_repeats=None,  # fte: list_fetched every turn
                              **st["agent"]),
            search=SearchConfig(backend="local", corpus=str(corpus), retriever="bm25s"),
        )
        result = run_question(Q, cfg, out)
    return result, trajectory(out), emu


def check_long(name: str, result: Any, events: list[dict[str, Any]], emu: Emulator) -> None:
    assert result.stop_reason == "max_turns" and result.turns == TURNS, (name, result.stop_reason, result.turns)
    assert not [e for e in events if e["type"] == "error"], name
    assert len([e for e in events if e["type"] == "model_call"]) == TURNS == len(emu.requests)
    assert {s for s, _ in emu.replies} == {200}
    assert sum(result.tool_calls.values()) == TURNS and not any(
        e["error"] for e in events if e["type"] == "tool_call"
    ), name


@pytest.mark.parametrize("profile", ["fte", pytest.param("shell", marks=pytest.mark.docker)])
def test_300_turns_against_every_server(profile: str, tmp_path: Path, corpus: Path, request: pytest.FixtureRequest) -> None:
    if profile == "shell":
        request.getfixturevalue("docker_ready")
    names = SERVERS
    with ThreadPoolExecutor(max_workers=len(names)) as pool:  # the runs wait on sockets and the container: overlap them
        done = list(pool.map(lambda n: long_run(n, profile, tmp_path / n, corpus), names))
    for name, (result, events, emu) in zip(names, done, strict=True):
        check_long(name, result, events, emu)
    ollama = done[names.index("ollama")][2].personality
    assert max(ollama.truncated) > 0  # Ollama really dropped history (silently, HTTP 200) and the run went on
    # the reasoning chains stayed intact: OpenRouter refuses a dropped or altered detail, so every request
    # carried every earlier reply's reasoning_details unchanged
    assert done[names.index("openrouter")][2].personality.preserved == list(range(TURNS))
    for name in ("sglang", "sglang-deepseek"):  # the template read the switch every turn; a third of the calls
        _, events, emu = done[names.index(name)]   # came back as text (parser misses) and were executed
        assert emu.personality.thinking_seen == [True] * TURNS
        assert len([e for e in events if e["type"] == "tool_call" and e.get("salvaged")]) == TURNS // 3
    _, events, _ = done[names.index("inline-think")]
    assert all("DECOY" in e["reasoning"] for e in events if e["type"] == "model_call")
    for name in RESPONSES:  # each request carried every earlier reasoning item, verified (the emulator refuses less)
        assert done[names.index(name)][2].personality.intact == list(range(TURNS))




@pytest.mark.docker
@pytest.mark.parametrize("name", SERVERS)
def test_bench_through_every_server(name: str, tmp_path: Path, hotpotqa_dir: Path, hotpotqa_corpus: Path,
                                    docker_ready: None) -> None:
    st = settings_lines(name)
    with serve(name, ResearchPolicy()) as emu:
        toml = tmp_path / "c.toml"
        lines = ["[model]", f'base_url = "{emu.base_url}"', f'model = "{emu.model}"', *st["model"]]
        lines += ["[agent]", *st["agent"]]
        toml.write_text("\n".join(lines) + "\n")
        out = tmp_path / "sweep"
        args = ["bench", f"hotpotqa:{hotpotqa_dir}", "--profiles", "shell,fte", "--limit", "1", "--out", str(out),
                "-c", str(toml), "--corpus-dir", str(hotpotqa_corpus), "--no-progress", "--max-turns", "30"]
        res = CliRunner().invoke(app, args, env={"OPENAI_BASE_URL": "", "OPENAI_MODEL": "", "SERPER_API_KEY": ""})
    assert res.exit_code == 0, res.output
    results = sorted((out / "runs").glob("*/*/r0/result.json"))
    assert len(results) == 2, res.output
    for path in results:
        r = json.loads(path.read_text())
        assert r["stop_reason"] in RESULT_STOP_REASONS, (name, r["stop_reason"])  # answered or a named result stop
        assert r["tool_calls"], r
        events = trajectory(path.parent)
        assert events[0]["type"] == "start" and events[-1]["type"] == "end"
    assert not (out / "failures.jsonl").exists() or not (out / "failures.jsonl").read_text().strip()
    if name in RESPONSES:  # no refusal: both runs sent their reasoning chains back intact
        assert {s for s, _ in emu.replies} == {200} and max(emu.personality.intact) > 0
