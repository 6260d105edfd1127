"""What real servers do to a run, reproduced by the emulators: each ends with an answer or the right stop
reason, the trajectory and result intact (fte profile: no container)."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from conftest import trajectory
from emulator_responses import ResponsesAPI, ResponsesEmulator
from emulators import (
    PRESERVE,
    VLLM,
    DeepSeek,
    Emulator,
    EmuTurn,
    InlineThink,
    LlamaCpp,
    LlamaCppPython,
    Ollama,
    OpenAI,
    OpenRouter,
    SGLang,
)
from typer.testing import CliRunner

from fte_shell.cli import app
from fte_shell.config import AgentConfig, ModelConfig, RunConfig, SearchConfig
from fte_shell.runner import run_question
from fte_shell.standins.research import ResearchPolicy
from fte_shell.standins.server import ScriptedServer, ScriptTurn, tokens_for

Q = "Which function in the json module serializes an object to a JSON formatted str?"
CLEAN_ENV = {"OPENAI_BASE_URL": "", "OPENAI_API_KEY": "", "OPENAI_MODEL": "", "SERPER_API_KEY": "", "COLUMNS": "200"}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from fte_shell.search.pydoc_corpus import build_pydoc_corpus

    return build_pydoc_corpus(tmp_path_factory.mktemp("pydoc") / "index")


def run(tmp_path: Path, base_url: str, corpus: Path, *, model: dict[str, Any] | None = None,
        agent: dict[str, Any] | None = None) -> tuple[Any, list[dict[str, Any]], dict[str, Any]]:
    cfg = RunConfig(
        model=ModelConfig(base_url=base_url, model="emu-model", backoff_s=0.01, **(model or {})),
        agent=AgentConfig(profile="fte", max_turns=30, **(agent or {})),
        search=SearchConfig(backend="local", corpus=str(corpus), retriever="bm25s"),
    )
    out = tmp_path / "run"
    result = run_question(Q, cfg, out)
    return result, trajectory(out), json.loads((out / "result.json").read_text())


def of(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]


def intact(events: list[dict[str, Any]], result: dict[str, Any]) -> None:
    assert events[0]["type"] == "start" and events[-1]["type"] == "end"
    assert events[-1]["stop_reason"] == result["stop_reason"]
    assert len(of(events, "model_call")) <= result["turns"]


class Then:
    """A brain: these turns first (callables or turns), then the research policy."""

    def __init__(self, *first: Any):
        self.first = list(first)
        self.policy = ResearchPolicy()

    def __call__(self, body: dict[str, Any]) -> Any:
        if self.first:
            t = self.first.pop(0)
            return t(body) if callable(t) else t
        return self.policy(body)


# --- the context window ------------------------------------------------------------------------------
def test_vllm_window_from_models_is_respected_and_the_run_stops_with_context_overflow(tmp_path: Path, corpus: Path) -> None:
    vllm = VLLM(window=2600)  # the research run's prompts grow 443 -> 2249 tokens over 6 turns
    with Emulator(vllm, ResearchPolicy()) as emu:
        _, events, r = run(tmp_path, emu.base_url, corpus)
    intact(events, r)
    assert r["stop_reason"] == "context_overflow" and r["answer"] is None
    assert [s for s, _ in emu.replies] == [200] * len(emu.replies)  # stopped before the server had to refuse
    for b in emu.requests:  # max_tokens = min(configured, window - estimate - margin): always fits
        assert 512 <= b["max_tokens"] < 2600 and tokens_for(b["messages"]) + b["max_tokens"] + 256 <= 2600
    err = of(events, "error")[-1]
    assert err["error_class"] == "ContextOverflow" and "2,600-token context window (/v1/models max_model_len)" in err["message"]


def test_a_reply_capped_below_min_reply_tokens_needs_only_its_cap() -> None:
    """A 1.5B model on llama.cpp, n_ctx 4096, --max-tokens 192 (measured): a 3,473-token conversation leaves
    4096 − 3473 − 256 = 367 tokens, room for the whole capped reply, so it is sent; the window guard of
    the context strategies fits to the same floor."""
    from fte_shell.agent.replies import fit_max_tokens
    from fte_shell.config import ModelConfig
    from fte_shell.model.errors import ContextOverflow
    from fte_shell.model.window import ServerInfo

    info = ServerInfo(context_window=4096, source="/props n_ctx")
    capped = ModelConfig(max_tokens=192)
    assert capped.reply_floor == 192 and ModelConfig().reply_floor == 512
    assert fit_max_tokens(info, capped, 3473) == 192
    with pytest.raises(ContextOverflow, match="leaves 140 tokens"):
        fit_max_tokens(info, capped, 3700)  # 140 < 192
    with pytest.raises(ContextOverflow, match="leaves 367 tokens"):
        fit_max_tokens(info, ModelConfig(), 3473)  # the default cap (16384) still needs 512


@pytest.mark.parametrize("kind", ["vllm", "openai", "llama.cpp", "responses"])
def test_a_server_reported_overflow_stops_at_once_with_context_overflow(kind: str, tmp_path: Path, corpus: Path) -> None:
    # the config claims a bigger window than the server has: the server refuses, and that is final
    p = {"vllm": VLLM(window=2500), "openai": OpenAI(window=2500), "llama.cpp": LlamaCpp(window=4000, slots=2),
         "responses": ResponsesAPI(window=2500)}[kind]
    wire = {"api": "responses"} if kind == "responses" else {}
    with (ResponsesEmulator if kind == "responses" else Emulator)(p, ResearchPolicy()) as emu:  # type: ignore[arg-type]
        _, events, r = run(tmp_path, emu.base_url, corpus, model={"context_window": 200_000, "max_tokens": 1000, **wire})
    intact(events, r)
    assert r["stop_reason"] == "context_overflow"
    statuses = [s for s, _ in emu.replies]
    assert statuses[-1] == 400 and statuses.count(400) == 1  # never retried
    err = of(events, "error")[-1]
    text = {"vllm": "This model's maximum context length is 2500 tokens", "openai": "context_length_exceeded",
            "llama.cpp": "exceeds the available context size (2000 tokens)",
            "responses": "Your input exceeds the context window of this model"}[kind]
    assert text in err["body"] and err["status"] == 400 and events[-1]["stop_reason"] == "context_overflow"


def test_llama_cpp_window_is_per_slot_from_props(tmp_path: Path, corpus: Path) -> None:
    with Emulator(LlamaCpp(window=5000, slots=2), ResearchPolicy()) as emu:
        _, events, r = run(tmp_path, emu.base_url, corpus)
    assert events[0]["server"]["context_window"] == 2500 and r["stop_reason"] == "context_overflow"
    assert 400 not in [s for s, _ in emu.replies]


def test_final_answer_on_context_overflow(tmp_path: Path, corpus: Path) -> None:
    def answer_without_tools(body: dict[str, Any]) -> Any:
        assert "tools" not in body
        return ScriptTurn(content="<answer>json.dumps</answer>")

    brain = ResearchPolicy()
    with Emulator(VLLM(window=2600), lambda b: answer_without_tools(b) if "tools" not in b else brain(b)) as emu:
        _, events, r = run(tmp_path, emu.base_url, corpus, agent={"on_context_overflow": "final_answer"})
    assert r["stop_reason"] == "answer" and r["answer"] == "json.dumps"
    assert len(of(events, "final_answer_request")) == 1 and "tools" not in emu.requests[-1]
    assert "context window" in emu.requests[-1]["messages"][-1]["content"]


# --- reasoning -----------------------------------------------------------------------------------------
def test_deepseek_without_passback_is_a_bad_request_with_the_whole_message(tmp_path: Path, corpus: Path) -> None:
    with Emulator(DeepSeek(), ResearchPolicy()) as emu:
        _, events, r = run(tmp_path, emu.base_url, corpus, model={"reasoning_passback": "never"})
    intact(events, r)
    assert r["stop_reason"] == "bad_request" and r["turns"] == 2 and len(emu.requests) == 2
    err = of(events, "error")[-1]
    assert "Missing `reasoning_content` field in the assistant message at message index 2" in err["message"]
    assert err["status"] == 400 and err["error_class"] == "BadRequest"


def test_always_passback_sends_empty_reasoning_when_there_was_none(tmp_path: Path, corpus: Path) -> None:
    # Kimi K2 thinking wants reasoning_content on every assistant tool-call message, "" when there was none
    with Emulator(OpenAI(), ResearchPolicy()) as emu:
        _, _events, r = run(tmp_path, emu.base_url, corpus, model={"reasoning_passback": "always"})
    assert r["stop_reason"] == "answer"
    assistants = [m for m in emu.requests[-1]["messages"] if m["role"] == "assistant"]
    assert assistants and all(m["reasoning_content"] == "" for m in assistants)


def test_tool_calls_in_the_reasoning_are_recorded_not_executed_by_default(tmp_path: Path, corpus: Path) -> None:
    # vllm#39056: a tool call written inside <think> reaches the client as reasoning text, zero tool calls
    hidden = EmuTurn(content="", reasoning='I will search.\n<tool_call>\n{"name": "search", "arguments": {"query": "json"}}\n</tool_call>')
    with Emulator(VLLM(), Then(hidden)) as emu:
        _, events, r = run(tmp_path, emu.base_url, corpus)
    text = of(events, "text_tool_call")
    assert len(text) == 1 and text[0]["source"] == "reasoning" and text[0]["executed"] is False
    assert text[0]["calls"][0]["name"] == "search" and text[0]["calls"][0]["format"] == "tool_call_tag"
    assert of(events, "nudge")[0]["turn"] == 1 and r["stop_reason"] == "answer"


def test_xml_tool_call_in_content_is_executed_when_enabled(tmp_path: Path, corpus: Path) -> None:
    # vllm#42021: Qwen3.5's XML tool call left in content
    xml = EmuTurn(content="<tool_call>\n<function=search>\n<parameter=query>\njson dumps\n</parameter>\n</function>\n</tool_call>")
    with Emulator(VLLM(), Then(xml)) as emu:
        _, events, r = run(tmp_path, emu.base_url, corpus, model={"parse_text_tool_calls": True})
    call = of(events, "tool_call")[0]
    assert call["salvaged"] and call["name"] == "search" and call["arguments"] == {"query": "json dumps"}
    kept = emu.requests[1]["messages"][2]
    assert kept["tool_calls"][0]["function"] == {"name": "search", "arguments": '{"query": "json dumps"}'}
    assert emu.requests[1]["messages"][3]["tool_call_id"] == kept["tool_calls"][0]["id"]
    assert r["stop_reason"] == "answer"


# --- malformed calls and odd replies ------------------------------------------------------------------
def test_malformed_arguments_never_reach_vllm_again(tmp_path: Path, corpus: Path) -> None:
    bad = ScriptTurn(tool_calls=[{"name": "search", "arguments": '{"query": "json</parameter>'}])
    with Emulator(VLLM(), Then(bad)) as emu:
        _, events, r = run(tmp_path, emu.base_url, corpus)
    intact(events, r)
    assert r["stop_reason"] == "answer" and r["answer"] == "json.dumps"  # vLLM would 400 every later request
    assert 400 not in [s for s, _ in emu.replies]
    first = of(events, "tool_call")[0]
    assert first["error"] and first["raw_arguments"] == '{"query": "json</parameter>'  # raw text kept on record
    assert "not valid JSON" in first["observation"] and '{"query": "json</parameter>' in first["observation"]
    assert emu.requests[1]["messages"][2]["tool_calls"][0]["function"]["arguments"] == "{}"
    assert of(events, "model_call")[0]["message"]["tool_calls"][0]["function"]["arguments"] == '{"query": "json</parameter>'
    assert of(events, "model_call")[0]["kept_changes"]


def test_unclosed_answer_is_the_answer(tmp_path: Path, corpus: Path) -> None:
    with Emulator(LlamaCpp(), Then("I found it.\n<answer>Robert Paul Weyman")) as emu:
        _, events, r = run(tmp_path, emu.base_url, corpus)
    assert r["stop_reason"] == "answer" and r["answer"] == "Robert Paul Weyman" and r["answer_unclosed"] is True
    assert events[-1]["answer_unclosed"] is True and r["turns"] == 1


def test_empty_answer_is_not_an_answer_and_nudges_are_bounded(tmp_path: Path, corpus: Path) -> None:
    with Emulator(OpenAI(), lambda b: ScriptTurn(content=f"<answer></answer> {len(b['messages'])}")) as emu:
        _, events, r = run(tmp_path, emu.base_url, corpus, agent={"max_nudges": 3})
    intact(events, r)
    assert r["stop_reason"] == "too_many_nudges" and r["turns"] == 4 and len(of(events, "nudge")) == 3


def test_identical_replies_stop_with_repeated_reply(tmp_path: Path, corpus: Path) -> None:
    same = ScriptTurn(tool_calls=[{"name": "list_fetched", "arguments": {}}])
    with Emulator(OpenAI(), lambda b: same) as emu:
        _, _events, r = run(tmp_path, emu.base_url, corpus, agent={"max_repeated_replies": 4})
    assert r["stop_reason"] == "repeated_reply" and r["turns"] == 4 and r["tool_calls"] == {"list_fetched": 3}


def test_a_cut_reply_is_never_the_answer_and_two_in_a_row_stop(tmp_path: Path, corpus: Path) -> None:
    cut = ScriptTurn(content="<answer>x</answer>" * 300, finish_reason="length")
    with Emulator(VLLM(), lambda b: cut) as emu:
        _, events, r = run(tmp_path, emu.base_url, corpus)
    intact(events, r)
    assert r["stop_reason"] == "reply_cut" and r["answer"] is None and r["turns"] == 2
    notice = of(events, "nudge")[0]
    assert notice["kind"] == "reply_cut" and "cut off" in emu.requests[1]["messages"][-1]["content"]


def test_a_whole_text_call_before_the_cut_is_executed_and_its_reply_is_no_cut_one(tmp_path: Path, corpus: Path) -> None:
    # llama.cpp with a 1.5B model (measured): the call as a bare object, then a result it invented until the
    # cap. Three such replies in a row: each call runs, none is a cut reply (no notice, no reply_cut stop)
    call = '{"name": "search", "arguments": {"query": "json dumps"}}'
    invented = EmuTurn(content=call + "\n<tool_response>\n" + "made-up result " * 200, finish_reason="length")
    with Emulator(VLLM(), Then(invented, invented, invented)) as emu:
        _, events, r = run(tmp_path, emu.base_url, corpus, model={"parse_text_tool_calls": True},
                           agent={"stuck_repeats": "off"})
    intact(events, r)
    calls = of(events, "tool_call")
    assert [c["arguments"] for c in calls[:3]] == [{"query": "json dumps"}] * 3 and all(c["salvaged"] for c in calls[:3])
    assert not [n for n in of(events, "nudge") if n["kind"] == "reply_cut"]
    assert r["stop_reason"] == "answer" and r["turns"] >= 4
    # without parse_text_tool_calls the same replies are cut replies: the notice, then reply_cut
    with Emulator(VLLM(), Then(invented, invented, invented)) as emu:
        _, events, r = run(tmp_path / "off", emu.base_url, corpus)
    assert r["stop_reason"] == "reply_cut" and r["turns"] == 2 and not of(events, "tool_call")


def test_reasoning_that_ate_the_budget_gets_the_cut_notice_then_the_run_goes_on(tmp_path: Path, corpus: Path) -> None:
    ate = EmuTurn(content="", reasoning="thinking " * 50, finish_reason="length")
    with Emulator(DeepSeek(), Then(ate)) as emu:
        _, events, r = run(tmp_path, emu.base_url, corpus)
    assert r["stop_reason"] == "answer" and of(events, "nudge")[0]["kind"] == "reply_cut"


# --- llama-cpp-python ----------------------------------------------------------------------------------
def test_llama_cpp_python_refuses_a_string_tool_choice_deterministically(tmp_path: Path, corpus: Path) -> None:
    # named as another kind (model.server), the string is sent as asked: the same 500 twice, no 7 retries
    with Emulator(LlamaCppPython(), ResearchPolicy()) as emu:
        _, events, r = run(tmp_path, emu.base_url, corpus, model={"server": "vllm"},
                           agent={"first_tool_choice": "required"})
    assert events[0]["server"]["server"] == "vllm" and emu.requests[0]["tool_choice"] == "required"
    assert r["stop_reason"] == "bad_request" and len(emu.requests) == 2
    assert "same HTTP 500 body twice" in of(events, "error")[-1]["message"]
    assert len(of(events, "retry")) == 1 and of(events, "retry")[0]["endpoint"] == emu.base_url


def test_llama_cpp_python_is_forced_by_name_when_required_is_asked(tmp_path: Path, corpus: Path) -> None:
    # discovered (owned_by "me"), the kind sends only named choices: "required" names the profile's first tool
    with Emulator(LlamaCppPython(), ResearchPolicy()) as emu:
        _, events, r = run(tmp_path, emu.base_url, corpus, model={"parse_text_tool_calls": True},
                           agent={"first_tool_choice": "required"})
    first_tool = events[0]["tools"][0]["function"]["name"]
    assert events[0]["server"]["server"] == "llama-cpp-python"
    assert emu.requests[0]["tool_choice"] == {"type": "function", "function": {"name": first_tool}}
    assert of(events, "model_call")[0]["request"]["tool_choice"] == emu.requests[0]["tool_choice"]
    assert r["stop_reason"] == "answer" and 500 not in [s for s, _ in emu.replies]
    assert of(events, "tool_call")[0]["name"] == first_tool and of(events, "tool_call")[0]["turn"] == 1


def test_llama_cpp_python_content_null_would_be_refused(tmp_path: Path, corpus: Path) -> None:
    # the server's own check, shown directly: null content on an assistant message is a 500
    p = LlamaCppPython()
    refused = p.check({"messages": [{"role": "assistant", "content": None, "tool_calls": []}]})
    assert refused is not None and refused[0] == 500 and "validation errors" in refused[1]["error"]["message"]
    with Emulator(p, ResearchPolicy()) as emu:  # and the loop never sends it: the forced first call has null content
        _, _events, r = run(tmp_path, emu.base_url, corpus, model={"parse_text_tool_calls": True},
                                agent={"first_tool_choice": "first"})
    assert r["stop_reason"] == "answer" and emu.replies[0][1]["choices"][0]["message"]["content"] is None
    assert 500 not in [s for s, _ in emu.replies]


def test_first_tool_choice_naming_a_missing_tool_says_so(tmp_path: Path, corpus: Path) -> None:
    with Emulator(LlamaCppPython(), ResearchPolicy()) as emu:
        _, events, r = run(tmp_path, emu.base_url, corpus, agent={"first_tool_choice": "bash"})
    assert r["stop_reason"] == "bad_request" and not emu.requests
    assert "'bash', which the profile 'fte' does not have" in of(events, "error")[-1]["message"]


# --- server kinds: what each needs (fte_shell/model/window.py SERVER_KINDS) ------------------------------
def test_llama_cpp_forced_first_call_goes_as_a_json_schema_and_is_executed(tmp_path: Path, corpus: Path) -> None:
    # llama.cpp's server does not enforce tool_choice for this template, it does enforce response_format
    with Emulator(LlamaCpp(parses_tools=False), ResearchPolicy()) as emu:
        _, events, r = run(tmp_path, emu.base_url, corpus, model={"parse_text_tool_calls": True},
                           agent={"first_tool_choice": "first"})
    first, later = emu.requests[0], emu.requests[1:]
    tool = events[0]["tools"][0]["function"]
    assert "tool_choice" not in first and first["response_format"]["type"] == "json_schema"
    schema = first["response_format"]["json_schema"]["schema"]
    assert schema["properties"] == {"name": {"const": tool["name"]}, "arguments": tool["parameters"]}
    assert of(events, "model_call")[0]["request"]["response_format"] == first["response_format"]
    assert all("response_format" not in b and "tool_choice" not in b for b in later)
    call = of(events, "tool_call")[0]
    assert call["turn"] == 1 and call["name"] == tool["name"] and call["salvaged"] and not call["error"]
    assert r["stop_reason"] == "answer" and r["answer"] == "json.dumps"


@pytest.mark.parametrize("parse", [True, False])
def test_an_answer_that_is_wholly_a_tool_call_is_a_call_when_text_calls_are_on(parse: bool, tmp_path: Path,
                                                                                corpus: Path) -> None:
    # named as another kind, the named tool_choice is sent as asked: llama.cpp answers <answer>{call}</answer>
    with Emulator(LlamaCpp(parses_tools=False), ResearchPolicy()) as emu:
        _, events, r = run(tmp_path, emu.base_url, corpus, model={"parse_text_tool_calls": parse, "server": "vllm"},
                           agent={"first_tool_choice": "first"})
    content = emu.replies[0][1]["choices"][0]["message"]["content"]
    assert content.startswith("<answer>{") and content.endswith("}</answer>")
    text = of(events, "text_tool_call")[0]
    assert text["turn"] == 1 and text["calls"][0]["format"] == "answer_tag" and text["executed"] is parse
    if parse:
        assert of(events, "tool_call")[0]["turn"] == 1 and r["stop_reason"] == "answer" and r["answer"] == "json.dumps"
    else:  # only recorded: the run takes the object as its answer, as it did before
        assert r["stop_reason"] == "answer" and r["turns"] == 1 and json.loads(r["answer"])["name"] == text["calls"][0]["name"]


def test_escaped_answer_tags_on_llama_cpp_python_are_the_answer_unescaped_and_said(tmp_path: Path, corpus: Path) -> None:
    with Emulator(LlamaCppPython(escaping=True), ResearchPolicy()) as emu:
        cfg = tmp_path / "c.toml"
        cfg.write_text(f'[model]\nbase_url = "{emu.base_url}"\nmodel = "emu-model"\nparse_text_tool_calls = true\n'
                       f'[agent]\nfirst_tool_choice = "first"\n[search]\nbackend = "local"\ncorpus = "{corpus}"\nretriever = "bm25s"\n')
        res = CliRunner().invoke(app, ["run", Q, "-p", "fte", "-c", str(cfg), "-o", str(tmp_path / "r")], env=CLEAN_ENV)
    last = emu.replies[-1][1]["choices"][0]["message"]["content"]
    assert last.endswith("&lt;answer&gt;json.dumps&lt;/answer&gt;") and "<answer>" not in last  # as the model wrote it
    assert res.exit_code == 0, res.output
    r = json.loads((tmp_path / "r" / "result.json").read_text())
    assert r["stop_reason"] == "answer" and r["answer"] == "json.dumps" and r["answer_unescaped"] is True
    events = trajectory(tmp_path / "r")
    assert events[-1]["answer_unescaped"] is True and events[0]["server"]["server"] == "llama-cpp-python"
    warnings = of(events, "warning")
    assert len(warnings) == 1 and "HTML-escapes" in warnings[0]["message"]
    assert res.output.count("HTML-escapes") == 1  # the live log says it once


def test_escaped_answer_tags_are_not_an_answer_where_the_server_does_not_escape(tmp_path: Path, corpus: Path) -> None:
    escaped = ScriptTurn(content="&lt;answer&gt;json.loads&lt;/answer&gt;")
    with Emulator(OpenAI(), Then(escaped)) as emu:
        _, events, r = run(tmp_path, emu.base_url, corpus)
    assert of(events, "nudge")[0]["turn"] == 1 and r["answer"] == "json.dumps" and "answer_unescaped" not in r


def test_sglang_thinking_off_and_reasoning_left_inline(tmp_path: Path, corpus: Path) -> None:
    # --no-thinking: the Qwen3 template reads enable_thinking=false; no reasoning comes back
    with Emulator(SGLang(parser_fails_every=0), ResearchPolicy()) as emu:
        _, events, r = run(tmp_path, emu.base_url, corpus, model={"thinking": False})
    assert r["stop_reason"] == "answer" and emu.personality.thinking_seen == [False] * len(emu.requests)
    assert all(b["chat_template_kwargs"] == {"enable_thinking": False} for b in emu.requests)
    assert all("reasoning" not in c for c in of(events, "model_call"))
    # separate_reasoning=false in extra_body beats the kind's true: the thinking comes inline and is split out
    with Emulator(SGLang(parser_fails_every=0), ResearchPolicy()) as emu:
        _, events, r = run(tmp_path / "inline", emu.base_url, corpus,
                           model={"thinking": True, "extra_body": {"separate_reasoning": False}})
    assert r["stop_reason"] == "answer" and all(b["separate_reasoning"] is False for b in emu.requests)
    calls = of(events, "model_call")
    assert all(c["message"]["content"].startswith("<think>") and c["reasoning"].startswith("Thinking") for c in calls)


def test_sglang_tool_calls_the_parser_missed_are_only_recorded_by_default(tmp_path: Path, corpus: Path) -> None:
    with Emulator(SGLang(parser_fails_every=1), ResearchPolicy()) as emu:
        _, events, r = run(tmp_path, emu.base_url, corpus, agent={"max_nudges": 1})
    text = of(events, "text_tool_call")
    assert text and not any(e["executed"] for e in text) and not of(events, "tool_call")
    assert r["stop_reason"] == "too_many_nudges"


def test_openrouter_refuses_dropped_and_altered_reasoning_details(tmp_path: Path, corpus: Path) -> None:
    with Emulator(OpenRouter(), ResearchPolicy()) as emu:
        _, events, r = run(tmp_path, emu.base_url, corpus, model={"reasoning_passback": "never"})
    assert r["stop_reason"] == "bad_request" and len(emu.requests) == 2
    assert "reasoning_details missing" in of(events, "error")[-1]["body"] and PRESERVE in of(events, "error")[-1]["body"]
    # the emulator's own checks, shown directly on a reply it issued
    p = OpenRouter()
    msg = {"role": "assistant", "content": "x", "tool_calls": []}
    p.put_reasoning(msg, "I think.", {}, 1)
    assert msg["reasoning_details"][0]["type"] == "reasoning.text" and p.check({"messages": [msg]}) is None
    altered = {**msg, "reasoning_details": [{**msg["reasoning_details"][0], "text": "I think!"}]}
    assert "Invalid signature" in p.check({"messages": [altered]})[1]["error"]["message"]
    resigned = [{**altered["reasoning_details"][0], "signature": OpenRouter.signature("I think!")}]
    assert "altered" in p.check({"messages": [{**msg, "reasoning_details": resigned}]})[1]["error"]["message"]


def test_inline_think_answer_inside_the_thinking_is_not_the_answer(tmp_path: Path, corpus: Path) -> None:
    # any server: a reply whose content opens with its thinking (or closes it without opening: R1's template)
    for i, text in enumerate(["<think>It is surely <answer>json.loads</answer>.</think>\nLet me check first.",
                              "It is surely <answer>json.loads</answer>.\n</think>\n\nLet me check first."]):
        with Emulator(OpenAI(), Then(ScriptTurn(content=text))) as emu:
            _, events, r = run(tmp_path / str(i), emu.base_url, corpus)
        assert of(events, "nudge")[0]["turn"] == 1 and r["stop_reason"] == "answer" and r["answer"] == "json.dumps"
        first = of(events, "model_call")[0]
        assert first["reasoning"] == "It is surely <answer>json.loads</answer>." and first["message"]["content"] == text
        assert emu.requests[1]["messages"][2]["content"] == text  # sent back whole

    # a call drafted inside it is never made, though text calls are on (the answer turn also drafts one)
    with Emulator(InlineThink(), ResearchPolicy()) as emu:
        _, events, r = run(tmp_path / "drafts", emu.base_url, corpus, model={"parse_text_tool_calls": True})
    last = emu.replies[-1][1]["choices"][0]["message"]["content"]
    assert "<tool_call>" in last.split("</think>")[0] and "<answer>DECOY" in last.split("</think>")[0]
    assert r["answer"] == "json.dumps" and not of(events, "text_tool_call") and {s for s, _ in emu.replies} == {200}


def test_thinking_on_a_kind_without_a_switch_is_said_and_not_sent(tmp_path: Path, corpus: Path) -> None:
    with Emulator(Ollama(window=64_000, num_ctx_set=True), ResearchPolicy()) as emu:
        _, events, r = run(tmp_path, emu.base_url, corpus, model={"thinking": True})
    assert r["stop_reason"] == "answer"
    said = ("model.thinking is set but the server kind (ollama) has no thinking switch: nothing is sent (give the "
            "server's own field in model.extra_body)")
    assert [w["message"] for w in of(events, "warning")] == [said]
    assert not any(k in b for b in emu.requests for k in ("chat_template_kwargs", "reasoning"))


# --- the endpoint itself ---------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cli(args: list[str]) -> Any:
    return CliRunner().invoke(app, args, env=CLEAN_ENV)


def test_endpoint_down_is_endpoint_unavailable_and_exit_3(tmp_path: Path, corpus: Path) -> None:
    url = f"http://127.0.0.1:{_free_port()}/v1"
    toml = tmp_path / "c.toml"
    toml.write_text("[model]\nmax_retries = 2\nbackoff_s = 0.01\n")
    res = cli(["run", Q, "-p", "fte", "--base-url", url, "-m", "m", "--corpus", str(corpus), "--retriever", "bm25s", "-c", str(toml),
               "-o", str(tmp_path / "r")])
    assert res.exit_code == 3, res.output
    r = json.loads((tmp_path / "r" / "result.json").read_text())
    assert r["stop_reason"] == "endpoint_unavailable" and r["answer"] is None
    events = trajectory(tmp_path / "r")
    assert len(of(events, "retry")) == 2 and "retry 1 of the model call" in res.output
    assert "infrastructure failure" in res.output


@pytest.mark.parametrize(("status", "stop", "code"), [(401, "auth", 4), (403, "auth", 4), (422, "bad_request", 5)])
def test_auth_and_bad_request_exit_codes(status: int, stop: str, code: int, tmp_path: Path, corpus: Path) -> None:
    with ScriptedServer([ScriptTurn(status=status, error="nope: the whole server message")] * 3) as srv:
        res = cli(["run", Q, "-p", "fte", "--base-url", srv.base_url, "-m", "m", "--corpus", str(corpus), "--retriever", "bm25s",
                   "-o", str(tmp_path / "r"), "-q"])
    assert res.exit_code == code, res.output
    r = json.loads((tmp_path / "r" / "result.json").read_text())
    assert r["stop_reason"] == stop and len(srv.requests) == 1  # never retried
    assert "nope: the whole server message" in of(trajectory(tmp_path / "r"), "error")[-1]["message"]


def test_a_read_timeout_is_retried_once_and_visibly(tmp_path: Path, corpus: Path) -> None:
    slow = ScriptTurn(content="late", delay_s=3)
    with ScriptedServer([slow, slow, slow]) as srv:
        _, events, r = run(tmp_path, srv.base_url, corpus, model={"timeout_s": 0.5})
    assert r["stop_reason"] == "endpoint_unavailable" and len(srv.requests) == 2
    retries = of(events, "retry")
    assert len(retries) == 1 and "Timeout" in retries[0]["error"] and retries[0]["endpoint"] == srv.base_url
    assert "timed out 2 time(s)" in of(events, "error")[-1]["message"]


def test_the_per_call_time_cap_bounds_all_attempts(tmp_path: Path, corpus: Path) -> None:
    with ScriptedServer([ScriptTurn(status=503, retry_after=0.4)] * 20) as srv:
        _, events, r = run(tmp_path, srv.base_url, corpus, model={"call_time_cap_s": 1.0, "max_retries": 20})
    assert r["stop_reason"] == "endpoint_unavailable" and len(srv.requests) < 5
    assert "call_time_cap_s" in of(events, "error")[-1]["message"]


# --- a misconfigured model in a sweep ------------------------------------------------------------------
def test_report_warns_when_a_profile_made_no_tool_calls(tmp_path: Path, hotpotqa_dir: Path) -> None:
    # llama-cpp-python WITHOUT the settings docs/run.md gives: every call comes back as text, never executed
    from fte_shell.benchmarks.hotpotqa import ensure_hotpotqa_corpus

    corpus_dir = ensure_hotpotqa_corpus(hotpotqa_dir, tmp_path / "hotpotqa")
    with Emulator(LlamaCppPython(), ResearchPolicy()) as emu:
        out = tmp_path / "sweep"
        res = cli(["bench", f"hotpotqa:{hotpotqa_dir}", "--profiles", "fte", "--limit", "1", "--out", str(out),
                   "--base-url", emu.base_url, "-m", "emu-model", "--corpus-dir", str(corpus_dir), "--no-progress"])
    assert res.exit_code == 0, res.output
    (path,) = (out / "runs").glob("fte/*/r0/result.json")
    r = json.loads(path.read_text())
    assert r["stop_reason"] == "repeated_reply" and r["tool_calls"] == {}  # the same text call, 5 times
    assert of(trajectory(path.parent), "text_tool_call")  # the calls were there, as text
    rep = cli(["report", str(out), "--out", str(tmp_path / "rep")])
    assert rep.exit_code == 0, rep.output
    assert "fte: none of its 1 finished run(s) made a tool call" in rep.output
    assert "none of its 1 finished run(s) made a tool call" in (tmp_path / "rep" / "report.md").read_text()
