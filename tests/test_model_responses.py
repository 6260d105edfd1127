"""``model.api = "responses"``: the Responses API path through the real ``openai`` client against the loopback
emulator of tests/emulator_responses.py — requests converted, reasoning items sent back exactly, refusals
of anything else, usage, and the same error classes and stop reasons as chat completions."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import trajectory
from emulator_responses import ResponsesAPI, ResponsesEmulator
from typer.testing import CliRunner

from fte_shell.agent.replies import kept_message
from fte_shell.cli import app
from fte_shell.config import AgentConfig, ModelConfig, ModelPrice, RunConfig, SearchConfig
from fte_shell.model import BadRequest, ModelClient
from fte_shell.model.completion import OUTPUT_ITEMS
from fte_shell.model.prices import usage_cost
from fte_shell.model.ratelimit import estimate_request_tokens
from fte_shell.model.responses import to_completion, to_input
from fte_shell.runner import run_question
from fte_shell.standins.research import ResearchPolicy
from fte_shell.standins.server import ScriptedServer, ScriptTurn

Q = "Which function in the json module serializes an object to a JSON formatted str?"
CLEAN_ENV = {"OPENAI_BASE_URL": "", "OPENAI_API_KEY": "", "OPENAI_MODEL": "", "SERPER_API_KEY": "", "COLUMNS": "200"}
TOOLS = [{"type": "function", "function": {"name": "search", "description": "Search the web.",
                                           "parameters": {"type": "object", "properties": {"query": {"type": "string"}},
                                                          "required": ["query"]}}}]
CALL = ScriptTurn(content="Searching.", tool_calls=[{"name": "search", "id": "call_a", "arguments": {"query": "json"}}])


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from fte_shell.search.pydoc_corpus import build_pydoc_corpus

    return build_pydoc_corpus(tmp_path_factory.mktemp("pydoc") / "index")


def client(emu: Any, **model: Any) -> ModelClient:
    return ModelClient(ModelConfig(base_url=emu.base_url, model="emu-model", api="responses", backoff_s=0.01, **model))


def run(tmp_path: Path, base_url: str, corpus: Path, api: str = "responses", **model: Any) -> tuple[Any, list[dict[str, Any]]]:
    cfg = RunConfig(model=ModelConfig(base_url=base_url, model="emu-model", api=api, backoff_s=0.01, **model),
                    agent=AgentConfig(profile="fte", max_turns=30), search=SearchConfig(backend="local", corpus=str(corpus), retriever="bm25s"))
    result = run_question(Q, cfg, tmp_path / "run")
    return result, trajectory(tmp_path / "run")


def of(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]


# --- reading a response ----------------------------------------------------------------------------------
def test_a_hand_made_response_reads_into_the_chat_completion_record() -> None:
    items = [
        {"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": "Plan: search."}],
         "encrypted_content": "gAAAAB-opaque=="},
        {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "Looking it up.", "annotations": []}]},
        {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "search", "arguments": '{"query": "x"}'},
    ]
    data = {"id": "resp_1", "model": "gpt-x", "status": "completed", "output": items,
            "usage": {"input_tokens": 120, "input_tokens_details": {"cached_tokens": 64}, "output_tokens": 50,
                      "output_tokens_details": {"reasoning_tokens": 30}, "total_tokens": 170}}
    c = to_completion(data, 0.5, 1, 1, {"model": "gpt-x"})
    assert c.message["content"] == "Looking it up." and c.finish_reason == "tool_calls"
    assert c.message["tool_calls"] == [{"id": "call_1", "type": "function",
                                        "function": {"name": "search", "arguments": '{"query": "x"}'}}]
    assert c.message[OUTPUT_ITEMS] is items
    assert c.reasoning == "Plan: search." and c.reasoning_fields == []
    assert c.usage == {"prompt_tokens": 120, "completion_tokens": 50, "total_tokens": 170}
    assert c.usage_details == {"prompt_tokens": 120, "completion_tokens": 50, "total_tokens": 170,
                               "prompt_tokens_details": {"cached_tokens": 64},
                               "completion_tokens_details": {"reasoning_tokens": 30}}
    assert c.response == {"id": "resp_1", "model": "gpt-x", "system_fingerprint": None}
    # priced like chat: 56 fresh × 1.25 + 64 cached × 0.125 + 50 out × 10 = 70 + 8 + 500 = 578 µUSD
    assert usage_cost(c.usage_details, ModelPrice(input=1.25, cached_input=0.125, output=10.0)) == pytest.approx(578e-6)
    cut = to_completion({**data, "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}}, 0, 1, 1, {})
    assert cut.finish_reason == "length"
    # the kept message goes back as the very same items, then the tool's output
    kept, _ = kept_message(c, "auto", [])
    back = to_input([kept, {"role": "tool", "tool_call_id": "call_1", "content": "found"}])
    assert back[:3] == items and all(a is b for a, b in zip(back, items, strict=False))
    assert back[3] == {"type": "function_call_output", "call_id": "call_1", "output": "found"}
    never, _ = kept_message(c, "never", [])
    assert to_input([never]) == [{"type": "message", "role": "assistant", "content": "Looking it up."},
                                 {"type": "function_call", "call_id": "call_1", "name": "search",
                                  "arguments": '{"query": "x"}'}]


# --- the request ------------------------------------------------------------------------------------------
def test_request_converts_tools_tool_choice_sampling_and_store() -> None:
    with ResponsesEmulator(ResponsesAPI(), lambda b: CALL) as emu:
        m = client(emu, max_tokens=900)
        c = m.complete([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}], TOOLS,
                       tool_choice={"type": "function", "function": {"name": "search"}})
        m.close()
    (body,) = emu.requests
    assert body["input"] == [{"type": "message", "role": "system", "content": "S"},
                             {"type": "message", "role": "user", "content": "U"}]
    assert body["tools"] == [{"type": "function", "name": "search", "description": "Search the web.",
                              "parameters": TOOLS[0]["function"]["parameters"], "strict": False}]
    assert body["tool_choice"] == {"type": "function", "name": "search"}
    assert body["store"] is False and body["include"] == ["reasoning.encrypted_content"]
    assert body["max_output_tokens"] == 900 and body["temperature"] == 1.0 and body["top_p"] == 0.95
    assert "presence_penalty" not in body and "reasoning" not in body and "messages" not in body
    assert c.params["max_output_tokens"] == 900 and c.params["tools"] == ["search"] and "input" not in c.params
    assert c.message["tool_calls"][0]["id"] == "call_a"
    assert c.message[OUTPUT_ITEMS][0]["encrypted_content"].startswith("gAAAAAB")


def test_reasoning_effort_drops_sampling_and_merges_extra_reasoning() -> None:
    with ResponsesEmulator(ResponsesAPI(), lambda b: CALL) as emu:
        m = client(emu, reasoning_effort="high", store=True, extra_body={"reasoning": {"summary": "auto"}, "user": "u1"})
        c = m.complete([{"role": "user", "content": "U"}], TOOLS)
        m.close()
    (body,) = emu.requests
    assert body["reasoning"] == {"effort": "high", "summary": "auto"} and body["user"] == "u1"
    assert "temperature" not in body and "top_p" not in body
    assert body["store"] is True and "include" not in body  # stored: the items come back by id
    assert "encrypted_content" not in c.message[OUTPUT_ITEMS][0]
    assert c.reasoning == "Thinking about step 1 of the question."


def test_chat_completions_send_reasoning_effort_too() -> None:
    with ScriptedServer(["<answer>x</answer>"]) as srv:
        m = ModelClient(ModelConfig(base_url=srv.base_url, model="m", reasoning_effort="low"))
        m.ask("q")
        m.close()
    assert srv.requests[0]["reasoning_effort"] == "low"


def test_the_rate_limiter_counts_the_tokens_the_responses_api_reported() -> None:
    with ResponsesEmulator(ResponsesAPI(), lambda b: CALL) as emu:
        m = client(emu, tpm=1_000_000)
        m.complete([{"role": "user", "content": "U"}], TOOLS)
        m.close()
    (slot,) = m.pacer._window
    reported = emu.replies[0][1]["usage"]["total_tokens"]
    assert slot.tokens == reported != estimate_request_tokens([{"role": "user", "content": "U"}], TOOLS)


def test_ask_goes_through_the_responses_api_without_tools() -> None:
    with ResponsesEmulator(ResponsesAPI(), lambda b: "<answer>yes</answer>") as emu:
        m = client(emu)
        c = m.ask("Is it?", system="Judge.")
        m.close()
    assert c.text == "<answer>yes</answer>" and "tools" not in emu.requests[0]
    assert [i["role"] for i in emu.requests[0]["input"]] == ["system", "user"]


# --- what the emulator refuses ------------------------------------------------------------------------------
def _drop_reasoning(items: list[dict[str, Any]]) -> None:
    del items[0]


def _reorder(items: list[dict[str, Any]]) -> None:
    items[0], items[1] = items[1], items[0]


def _alter(items: list[dict[str, Any]]) -> None:
    items[0]["encrypted_content"] = items[0]["encrypted_content"][:-6] + "AAAAA="


def _strip(items: list[dict[str, Any]]) -> None:
    del items[0]["encrypted_content"]


REFUSALS = {
    "dropped": (_drop_reasoning, 400, ("Item 'msg_emu0001' of type 'message' was provided without its required "
                "'reasoning' item: 'rs_emu0001'.")),
    "reordered": (_reorder, 400, "Item 'msg_emu0001' of type 'message' was provided without its required 'reasoning' item"),
    "altered": (_alter, 400, "could not be verified."),
    "no encrypted content": (_strip, 404, ("Item with id 'rs_emu0001' not found. Items are not persisted when `store` "
                             "is set to false.")),
}


@pytest.mark.parametrize("how", list(REFUSALS))
def test_the_emulator_refuses_a_reasoning_item_dropped_reordered_or_altered(how: str) -> None:
    tamper, status, text = REFUSALS[how]
    with ResponsesEmulator(ResponsesAPI(), lambda b: CALL) as emu:
        m = client(emu)
        convo = [{"role": "user", "content": "U"}]
        c = m.complete(convo, TOOLS)
        kept, _ = kept_message(c, "auto", [])
        tool = {"role": "tool", "tool_call_id": "call_a", "content": "found"}
        assert m.complete([*convo, kept, tool], TOOLS).message["tool_calls"]  # untouched: accepted
        bad = {**kept, OUTPUT_ITEMS: copy.deepcopy(kept[OUTPUT_ITEMS])}
        tamper(bad[OUTPUT_ITEMS])
        with pytest.raises(BadRequest) as e:
            m.complete([*convo, bad, tool], TOOLS)
        m.close()
    assert e.value.status == status and text in e.value.body and e.value.attempts == 1  # never retried
    assert [s for s, _ in emu.replies] == [200, 200, status]


def test_the_emulator_refuses_an_output_without_its_call_and_a_call_without_its_output() -> None:
    with ResponsesEmulator(ResponsesAPI(), lambda b: CALL) as emu:
        m = client(emu)
        with pytest.raises(BadRequest) as e:
            m.complete([{"role": "user", "content": "U"}, {"role": "tool", "tool_call_id": "call_z", "content": "x"}], TOOLS)
        assert "No tool call found for function call output with call_id call_z." in e.value.body
        c = m.complete([{"role": "user", "content": "U"}], TOOLS)
        kept, _ = kept_message(c, "auto", [])
        with pytest.raises(BadRequest) as e:
            m.complete([{"role": "user", "content": "U"}, kept, {"role": "user", "content": "go on"}], TOOLS)
        m.close()
    assert "No tool output found for function call call_a." in e.value.body


def test_dropping_the_whole_chain_is_refused_in_strict_mode_only(tmp_path: Path, corpus: Path) -> None:
    # model.reasoning_passback = never: the reasoning items are not sent back. The real API accepts that
    # (strict=False); the strict emulator refuses it at turn 2, naming the item that is missing.
    with ResponsesEmulator(ResponsesAPI(), ResearchPolicy()) as emu:
        r, events = run(tmp_path / "strict", emu.base_url, corpus, reasoning_passback="never")
    assert r.stop_reason == "bad_request" and r.turns == 2
    assert "reasoning item 'rs_emu0001' of an earlier turn is missing" in of(events, "error")[-1]["body"]
    with ResponsesEmulator(ResponsesAPI(strict=False), ResearchPolicy()) as emu:
        r, _ = run(tmp_path / "lenient", emu.base_url, corpus, reasoning_passback="never")
    assert r.stop_reason == "answer" and r.answer == "json.dumps"
    assert not [i for b in emu.requests for i in b["input"] if i.get("type") == "reasoning"]


def test_a_run_sends_every_reasoning_item_back_byte_for_byte(tmp_path: Path, corpus: Path) -> None:
    with ResponsesEmulator(ResponsesAPI(), ResearchPolicy()) as emu:
        r, events = run(tmp_path, emu.base_url, corpus)
    assert r.stop_reason == "answer" and r.answer == "json.dumps"
    calls = of(events, "model_call")
    assert len(calls) == r.turns == len(emu.requests) >= 4 and not of(events, "error")
    assert emu.personality.intact == list(range(r.turns))  # request k carried the k earlier reasoning items
    for k, (ev, (_, payload)) in enumerate(zip(calls, emu.replies, strict=True)):
        assert ev["message"][OUTPUT_ITEMS] == payload["output"]  # recorded as they came
        for item in payload["output"]:  # and sent back in every later request, the same bytes (compact JSON)
            text = json.dumps(item, ensure_ascii=False, separators=(",", ":")).encode()
            assert all(text in raw for raw in emu.raw[k + 1:]), item["id"]
        assert ev["usage_details"]["prompt_tokens_details"]["cached_tokens"] == payload["usage"]["input_tokens_details"]["cached_tokens"]
        assert ev["usage"]["completion_tokens"] == payload["usage"]["output_tokens"]
    assert calls[1]["usage_details"]["prompt_tokens_details"]["cached_tokens"] == calls[0]["usage"]["prompt_tokens"] > 0
    assert r.usage["prompt_tokens"] == sum(p["usage"]["input_tokens"] for _, p in emu.replies)


def test_a_salvaged_text_call_goes_back_after_the_items_it_came_with(tmp_path: Path, corpus: Path) -> None:
    text_call = ScriptTurn(content='<tool_call>\n{"name": "search", "arguments": {"query": "json dumps"}}\n</tool_call>')
    with ResponsesEmulator(ResponsesAPI(), Then(text_call)) as emu:
        r, events = run(tmp_path, emu.base_url, corpus, parse_text_tool_calls=True)
    assert r.stop_reason == "answer" and of(events, "tool_call")[0]["salvaged"]
    second = emu.requests[1]["input"]
    assert [i.get("type") for i in second[2:]] == ["reasoning", "message", "function_call", "function_call_output"]
    assert second[2:4] == emu.replies[0][1]["output"]  # the items as they came, then the salvaged call
    assert second[4] == {"type": "function_call", "call_id": "text_1_0", "name": "search",
                         "arguments": '{"query": "json dumps"}'}
    assert second[5]["call_id"] == "text_1_0"


def test_malformed_arguments_go_back_as_the_server_wrote_them(tmp_path: Path, corpus: Path) -> None:
    # chat completions send "{}" instead (vLLM re-parses history arguments); here the item is opaque and
    # goes back unchanged, and the model is told what was wrong
    bad = ScriptTurn(tool_calls=[{"name": "search", "id": "call_bad", "arguments": '{"query": "json'}])
    with ResponsesEmulator(ResponsesAPI(), Then(bad)) as emu:
        r, events = run(tmp_path, emu.base_url, corpus)
    assert r.stop_reason == "answer" and of(events, "tool_call")[0]["error"]
    sent = [i for i in emu.requests[1]["input"] if i.get("type") == "function_call"]
    assert sent == [emu.replies[0][1]["output"][1]] and sent[0]["arguments"] == '{"query": "json'
    assert "not valid JSON" in emu.requests[1]["input"][-1]["output"]


def test_store_true_sends_the_items_back_by_id(tmp_path: Path, corpus: Path) -> None:
    with ResponsesEmulator(ResponsesAPI(), ResearchPolicy()) as emu:
        r, _ = run(tmp_path, emu.base_url, corpus, store=True)
    assert r.stop_reason == "answer" and all(b["store"] is True and "include" not in b for b in emu.requests)
    sent = [i for i in emu.requests[-1]["input"] if i.get("type") == "reasoning"]
    assert len(sent) == r.turns - 1 and not any("encrypted_content" in i for i in sent)


# --- errors: the same classes and stop reasons as chat completions -------------------------------------------
class Then:
    """These turns first, then the research policy."""

    def __init__(self, *first: ScriptTurn):
        self.first, self.policy = list(first), ResearchPolicy()

    def __call__(self, body: dict[str, Any]) -> Any:
        return self.first.pop(0) if self.first else self.policy(body)


def serve(api: str, brain: Any) -> Any:
    return ResponsesEmulator(ResponsesAPI(), brain) if api == "responses" else ScriptedServer(policy=brain)


FAILURES = {
    "429 then fine": ([ScriptTurn(status=429, retry_after=0.2, error="Rate limit reached")], "answer"),
    "429 storm": ([ScriptTurn(status=429, retry_after=0.01)] * 5, "endpoint_unavailable"),
    "503 storm": ([ScriptTurn(status=503)] * 5, "endpoint_unavailable"),
    "500 twice": ([ScriptTurn(status=500, error="the same")] * 2, "bad_request"),
    "401": ([ScriptTurn(status=401, error="Incorrect API key provided")], "auth"),
    "overflow": ([ScriptTurn(status=400, error="Your input exceeds the context window of this model. (context_length_exceeded)")],
                 "context_overflow"),
}


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize("what", list(FAILURES))
def test_errors_end_with_the_same_stop_reasons_as_chat(what: str, api: str, tmp_path: Path, corpus: Path) -> None:
    turns, stop = FAILURES[what]
    with serve(api, Then(*turns)) as srv:
        r, events = run(tmp_path, srv.base_url, corpus, api=api, max_retries=3)
    assert r.stop_reason == stop, (api, what, r.stop_reason)
    retries = of(events, "retry")
    if what == "429 then fine":
        assert r.answer == "json.dumps" and len(retries) == 1 and retries[0]["delay_s"] == 0.2  # Retry-After wins
        assert "Rate limit reached" in retries[0]["error"]
    elif what.endswith("storm"):
        assert len(retries) == 3 and of(events, "error")[-1]["error_class"] == "EndpointUnavailable"
    else:
        assert len(retries) == (1 if what == "500 twice" else 0)


def test_the_new_model_keys_leave_old_digests_alone() -> None:
    from fte_shell.digest import config_digest

    cfg = RunConfig(agent=AgentConfig(summary_model=ModelConfig(model="reader")))
    old = cfg.model_dump(mode="json")
    for table in (old["model"], old["agent"]["summary_model"]):  # what a run of the previous main recorded
        for k in ("api", "store", "reasoning_effort", "server", "thinking"):
            del table[k]
    assert config_digest(old) == config_digest(cfg)
    for changed in ({"api": "responses"}, {"store": True}, {"reasoning_effort": "high"}):
        assert config_digest(RunConfig(model=ModelConfig(**changed))) != config_digest(RunConfig())


# --- the command line ---------------------------------------------------------------------------------------------
def test_run_flag_api_responses(tmp_path: Path, corpus: Path) -> None:
    with ResponsesEmulator(ResponsesAPI(), ResearchPolicy()) as emu:
        res = CliRunner().invoke(app, ["run", Q, "-p", "fte", "--base-url", emu.base_url, "-m", "emu-model", "--api",
                                       "responses", "--corpus", str(corpus), "--retriever", "bm25s", "-o", str(tmp_path / "r")], env=CLEAN_ENV)
    assert res.exit_code == 0, res.output
    assert "model emu-model · Responses API · 5 tool(s)" in res.output
    assert json.loads((tmp_path / "r" / "result.json").read_text())["answer"] == "json.dumps"
    start = trajectory(tmp_path / "r")[0]
    assert start["config"]["model"]["api"] == "responses" and start["config"]["model"]["store"] is False
    assert emu.requests and all("input" in b for b in emu.requests)
    bad = CliRunner().invoke(app, ["run", Q, "--api", "soap", "-o", str(tmp_path / "x")], env=CLEAN_ENV)
    assert bad.exit_code == 2 and "model.api" in bad.output
