"""``fte-shell run`` through every server personality of tests/emulators.py (and the Responses API of
tests/emulator_responses.py), for the ``fte`` and ``shell`` profiles: the run answers, the trajectory and result are intact, the request prefix is byte-stable, and the
``model_call`` events record what was sent and what came back."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import trajectory
from emulator_responses import RESPONSES, serve, settings_lines
from emulators import PERSONALITIES, Emulator
from typer.testing import CliRunner

from fte_shell.cli import app
from fte_shell.model.completion import OUTPUT_ITEMS
from fte_shell.standins.research import ResearchPolicy

Q = "Which function in the json module serializes an object to a JSON formatted str?"
CLEAN_ENV = {"OPENAI_BASE_URL": "", "OPENAI_API_KEY": "", "OPENAI_MODEL": "", "SERPER_API_KEY": "", "COLUMNS": "200"}


@pytest.fixture(scope="module")
def pydoc_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from fte_shell.search.pydoc_corpus import build_pydoc_corpus

    return build_pydoc_corpus(tmp_path_factory.mktemp("pydoc") / "index")


def toml_for(path: Path, name: str, base_url: str, corpus: Path, extra: dict[str, dict[str, Any]] | None = None,
             model: str = "emu-model") -> Path:
    """A config file with what docs/run.md says to set for this server kind (plus ``extra``)."""
    st = settings_lines(name, extra)
    lines = [f'[model]\nbase_url = "{base_url}"\nmodel = "{model}"\nbackoff_s = 0.01', *st["model"]]
    lines += ["[agent]", *st["agent"]]
    lines += [f'[search]\nbackend = "local"\ncorpus = "{corpus}"\nretriever = "bm25s"']
    path.write_text("\n".join(lines) + "\n")
    return path


def cli_run(tmp_path: Path, emu: Emulator, name: str, corpus: Path, profile: str, *more: str,
            extra: dict[str, dict[str, Any]] | None = None) -> tuple[Any, Path]:
    out = tmp_path / "run"
    cfg = toml_for(tmp_path / "c.toml", name, emu.base_url, corpus, extra, emu.model)
    args = ["run", Q, "-p", profile, "-c", str(cfg), "-o", str(out), "--max-turns", "20", *more]
    res = CliRunner().invoke(app, args, env=CLEAN_ENV)
    return res, out


def messages_bytes(raw: bytes, key: bytes = b"messages") -> bytes:
    """The exact bytes of the ``messages`` array (the Responses API's ``input``) inside a request body."""
    start = raw.index(b'"' + key + b'":') + len(key) + 3
    while raw[start:start + 1] in (b" ",):
        start += 1
    text = raw[start:].decode()
    _, end = json.JSONDecoder().raw_decode(text)
    return text[:end].encode()


def check_prefix_stable(emu: Emulator) -> None:
    """Request k+1's messages start with request k's, byte for byte (prefix caches, DeepSeek's discount)."""
    arrays = [messages_bytes(r, b"input" if isinstance(emu.personality, tuple(RESPONSES.values())) else b"messages")
              for r in emu.raw]
    assert len(arrays) >= 3
    for a, b in itertools.pairwise(arrays):
        assert b.startswith(a[:-1]) and len(b) > len(a), (a[-300:], b[: len(a)][-300:])


def check_run(name: str, emu: Emulator, out: Path, res: Any) -> list[dict[str, Any]]:
    assert res.exit_code == 0, res.output
    r = json.loads((out / "result.json").read_text())
    assert r["stop_reason"] == "answer" and r["answer"] == "json.dumps", r
    events = trajectory(out)
    kinds = [e["type"] for e in events]
    assert kinds[0] == "start" and kinds[-1] == "end" and "error" not in kinds
    calls = [e for e in events if e["type"] == "model_call"]
    assert len(calls) == r["turns"] == len(emu.requests)
    assert sum(r["tool_calls"].values()) == len([e for e in events if e["type"] == "tool_call"])
    check_prefix_stable(emu)
    if name in RESPONSES:
        check_responses(emu, calls)
        return events
    for sent, ev, (status, payload) in zip(emu.requests, calls, emu.replies, strict=True):
        assert status == 200
        req = ev["request"]  # what was really sent, not the messages again
        assert "messages" not in req and req["model"] == sent["model"] == emu.model
        for k in ("temperature", "top_p", "max_tokens", "presence_penalty"):
            assert req[k] == sent[k]
        assert req.get("tool_choice") == sent.get("tool_choice")
        assert ev["response"] == {"id": payload["id"], "model": payload["model"],
                                  "system_fingerprint": payload["system_fingerprint"]}
        assert ev["finish_reason"] == payload["choices"][0]["finish_reason"]
        full = {k: v for k, v in payload["usage"].items() if v is not None}
        assert ev["usage_details"] == full
        for m in sent["messages"]:  # every server accepts what was sent
            if m["role"] == "assistant":
                assert isinstance(m["content"], str)
    start = events[0]
    assert start["reasoning_passback"] == "auto" and start["config"]["model"]["reasoning_passback"] == "auto"
    return events


def check_responses(emu: Emulator, calls: list[dict[str, Any]]) -> None:
    """The Responses API's record: the same fields as chat completions, from its own request and response."""
    for sent, ev, (status, payload) in zip(emu.requests, calls, emu.replies, strict=True):
        assert status == 200
        req = ev["request"]
        assert "input" not in req and req["model"] == sent["model"] == "emu-model"
        for k in ("temperature", "top_p", "max_output_tokens", "store", "include"):
            assert req[k] == sent[k]
        assert sent["store"] is False and sent["include"] == ["reasoning.encrypted_content"]
        assert req.get("tool_choice") == sent.get("tool_choice")
        assert ev["response"] == {"id": payload["id"], "model": payload["model"], "system_fingerprint": None}
        kinds = [i["type"] for i in payload["output"]]
        assert ev["finish_reason"] == ("tool_calls" if "function_call" in kinds else "stop")
        u = payload["usage"]
        assert ev["usage_details"] == {
            "prompt_tokens": u["input_tokens"], "completion_tokens": u["output_tokens"], "total_tokens": u["total_tokens"],
            "prompt_tokens_details": u["input_tokens_details"], "completion_tokens_details": u["output_tokens_details"]}
        assert ev["message"][OUTPUT_ITEMS] == payload["output"] and kinds[0] == "reasoning"
    assert emu.personality.intact == list(range(len(calls)))  # every earlier reasoning item came back, verified


SERVERS = [*PERSONALITIES, *RESPONSES]
PARAMS = [pytest.param(n, "fte", id=f"{n}-fte") for n in SERVERS] + [
    pytest.param(n, "shell", id=f"{n}-shell", marks=pytest.mark.docker) for n in SERVERS
]


@pytest.mark.parametrize(("name", "profile"), PARAMS)
def test_run_answers_through_every_server(name: str, profile: str, tmp_path: Path, pydoc_corpus: Path,
                                          request: pytest.FixtureRequest) -> None:
    if profile == "shell":
        request.getfixturevalue("docker_ready")
    with serve(name, ResearchPolicy()) as emu:
        res, out = cli_run(tmp_path, emu, name, pydoc_corpus, profile)
    personality = emu.personality
    events = check_run(name, emu, out, res)
    start = events[0]
    calls = [e for e in events if e["type"] == "model_call"]
    later = emu.requests[1:]
    if name == "vllm":
        # window from /v1/models; reasoning read from `reasoning` and sent back under that name only
        assert start["server"]["context_window"] == personality.window and start["server"]["server"] == "vllm"
        assert start["server"]["source"] == "/v1/models max_model_len"
        assert calls[0]["reasoning_fields"] == ["reasoning"] and calls[0]["reasoning"].startswith("Thinking")
        assert personality.reasoning_seen[-1] == len(calls) - 1  # every earlier assistant turn carried it
        assert all("reasoning_content" not in m for b in later for m in b["messages"])
        assert all(c["request"]["max_tokens"] <= 16384 for c in calls)
    elif name == "deepseek":
        tool_turns = [m for m in emu.requests[-1]["messages"] if m["role"] == "assistant"]
        assert tool_turns and all(m["reasoning_content"].startswith("Thinking") for m in tool_turns)
        assert calls[0]["usage_details"]["completion_tokens_details"]["reasoning_tokens"] > 0
        assert "prompt_cache_hit_tokens" in calls[0]["usage_details"]
        assert start["server"]["context_window"] is None  # DeepSeek publishes none: max_tokens as configured
        assert all(c["request"]["max_tokens"] == 16384 for c in calls)
    elif name == "openai":
        assert calls[0]["response"]["system_fingerprint"] == "fp_openai_emulator"
        assert all(k not in m for b in later for m in b["messages"] for k in ("reasoning", "reasoning_content"))
    elif name == "llama.cpp":
        assert start["server"] == {"context_window": personality.slot_ctx, "source": "/props n_ctx",
                                   "server": "llama.cpp", "warnings": []}
        # max_tokens fitted to the window: min(configured, window - estimate - margin)
        assert all(c["request"]["max_tokens"] <= 16384 for c in calls)
    elif name == "llama-cpp-python":
        # turn 1 forced by a NAMED choice (the profile's first tool); later turns' calls arrive as text
        first_tool = start["tools"][0]["function"]["name"]
        assert emu.requests[0]["tool_choice"] == {"type": "function", "function": {"name": first_tool}}
        assert all("tool_choice" not in b for b in later)
        text = [e for e in events if e["type"] == "text_tool_call"]
        assert text and all(e["executed"] and e["source"] == "content" for e in text)
        salvaged = [e for e in events if e["type"] == "tool_call" and e.get("salvaged")]
        assert len(salvaged) >= 3 and not any(e["error"] for e in salvaged)
    elif name in ("sglang", "sglang-deepseek"):
        # found by /get_model_info (before the vLLM probe its /v1/models would also satisfy), window from /v1/models
        assert start["server"] == {"context_window": personality.window, "source": "/v1/models max_model_len",
                                   "server": "sglang", "warnings": []}
        key = "thinking" if name == "sglang-deepseek" else "enable_thinking"  # what the model's template reads
        assert all(b["chat_template_kwargs"] == {key: True} and b["separate_reasoning"] is True for b in emu.requests)
        assert personality.thinking_seen == [True] * len(calls)  # the template read the switch (deepseek: default off)
        assert calls[0]["reasoning_fields"] == ["reasoning_content"] and calls[0]["reasoning"].startswith("Thinking")
        text = [e for e in events if e["type"] == "text_tool_call"]  # the replies the parser missed
        assert text and all(e["executed"] and e["calls"][0]["format"] == "tool_call_tag" for e in text)
    elif name == "openrouter":
        assert start["server"] == {"context_window": personality.window, "source": "/v1/models context_length",
                                   "server": "openrouter", "warnings": []}
        # the thinking switch merged with model.extra_body's reasoning object
        assert personality.reasoning_requests == [{"enabled": True, "effort": "high"}] * len(calls)
        for i, ev in enumerate(calls):  # the details kept byte for byte in the trajectory ...
            sent = emu.replies[i][1]["choices"][0]["message"]["reasoning_details"]
            assert json.dumps(ev["message"]["reasoning_details"]) == json.dumps(sent)
        assistants = [m for m in emu.requests[-1]["messages"] if m["role"] == "assistant"]
        for m, (_, payload) in zip(assistants, emu.replies, strict=False):  # ... and sent back unchanged
            assert m["reasoning_details"] == payload["choices"][0]["message"]["reasoning_details"]
        assert personality.preserved == list(range(len(calls)))  # every earlier turn's details came back intact
        kinds = {d["type"] for ev in calls for d in ev["message"]["reasoning_details"]}
        assert kinds == {"reasoning.text", "reasoning.summary", "reasoning.encrypted"}
    elif name == "inline-think":
        # the thinking is split out as reasoning; the content goes back whole; nothing drafted in it counted
        assert all(c["reasoning"].startswith("Thinking") and "DECOY" in c["reasoning"] for c in calls)
        assert all(c["message"]["content"].startswith("<think>") for c in calls)
        assert not [e for e in events if e["type"] == "text_tool_call"]
        assistants = [m for m in emu.requests[-1]["messages"] if m["role"] == "assistant"]
        assert assistants and all(m["content"].startswith("<think>") for m in assistants)
    elif name == "ollama":
        warnings = [e for e in events if e["type"] == "warning"]
        assert len(warnings) == 1 and "num_ctx" in warnings[0]["message"] and "ollama#2722" in warnings[0]["message"]
        assert "warning:" in res.output and "num_ctx" in res.output
        assert start["server"]["server"] == "ollama" and start["server"]["context_window"] is None


def test_ollama_with_num_ctx_has_no_warning_and_a_window(tmp_path: Path, pydoc_corpus: Path) -> None:
    from emulators import Ollama

    with Emulator(Ollama(window=64_000, num_ctx_set=True), ResearchPolicy()) as emu:
        res, out = cli_run(tmp_path, emu, "ollama", pydoc_corpus, "fte")
    events = check_run("ollama", emu, out, res)
    assert not [e for e in events if e["type"] == "warning"]
    assert events[0]["server"]["context_window"] == 64_000 and events[0]["server"]["source"] == "/api/show num_ctx"


def test_flags_for_a_small_local_model(tmp_path: Path, pydoc_corpus: Path) -> None:
    from emulators import LlamaCppPython

    with Emulator(LlamaCppPython(), ResearchPolicy()) as emu:
        args = ["run", Q, "-p", "fte", "--base-url", emu.base_url, "-m", "emu-model", "--corpus", str(pydoc_corpus), "--retriever", "bm25s",
                "-o", str(tmp_path / "r"), "--first-tool-choice", "first", "--parse-text-tool-calls",
                "--context-window", "50000"]
        res = CliRunner().invoke(app, args, env=CLEAN_ENV)
    assert res.exit_code == 0, res.output
    assert "tool call(s) written as text in the content" in res.output and "executing" in res.output
    start = trajectory(tmp_path / "r")[0]
    assert start["server"]["context_window"] == 50000 and start["server"]["source"] == "config"
    assert start["config"]["agent"]["first_tool_choice"] == "first" and start["config"]["model"]["parse_text_tool_calls"]
    assert json.loads((tmp_path / "r" / "result.json").read_text())["answer"] == "json.dumps"
