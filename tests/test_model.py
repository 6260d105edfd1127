"""ModelClient through the real ``openai`` client against the scripted server on loopback."""

from __future__ import annotations

import json
import time

import pytest

from fte_shell.config import ModelConfig, load_config
from fte_shell.errors import ModelError
from fte_shell.model import ModelClient
from fte_shell.retry_after import retry_after_s
from fte_shell.standins.server import ScriptedServer, ScriptTurn, tokens_for

MSGS = [{"role": "system", "content": "sys"}, {"role": "user", "content": "q?"}]
TOOLS = [
    {
        "type": "function",
        "function": {"name": "bash", "description": "run", "parameters": {"type": "object", "properties": {}}},
    }
]


def _client(srv: ScriptedServer, sleeps: list[float] | None = None, **kw: object) -> ModelClient:
    cfg = ModelConfig(base_url=srv.base_url, model="m1", backoff_s=0.01, **kw)
    record = sleeps if sleeps is not None else []
    return ModelClient(cfg, sleep=record.append)


def test_paper_sampling_defaults_and_extra_body_are_sent() -> None:
    with ScriptedServer(["hello"]) as srv:
        c = _client(srv, extra_body={"chat_template_kwargs": {"enable_thinking": False}}).complete(MSGS, TOOLS)
    req = srv.requests[0]
    assert (req["temperature"], req["top_p"], req["max_tokens"], req["presence_penalty"]) == (1.0, 0.95, 16384, 0.0)
    assert req["model"] == "m1"
    assert req["chat_template_kwargs"] == {"enable_thinking": False}
    assert req["tools"] == TOOLS and req["messages"] == MSGS
    assert c.message == {"role": "assistant", "content": "hello"}
    assert c.finish_reason == "stop" and c.attempts == 1


def test_tool_calls_and_usage_match_what_the_server_sent() -> None:
    turn = ScriptTurn(tool_calls=[{"name": "bash", "arguments": {"command": "ls"}}])
    with ScriptedServer([turn]) as srv:
        c = _client(srv).complete(MSGS, TOOLS)
    sent = srv.responses[0]
    assert c.usage == sent["usage"]
    assert c.usage["prompt_tokens"] == tokens_for(MSGS)
    assert c.usage["total_tokens"] == c.usage["prompt_tokens"] + c.usage["completion_tokens"]
    (call,) = c.message["tool_calls"]
    assert call["function"] == {"name": "bash", "arguments": json.dumps({"command": "ls"})}
    assert call["id"] == "call_1_0" and call["type"] == "function"
    assert c.finish_reason == "tool_calls"


def test_tool_calls_without_id_get_one() -> None:
    turn = ScriptTurn(tool_calls=[{"name": "bash", "arguments": {"command": "a"}, "id": ""}, {"name": "bash", "id": ""}])
    with ScriptedServer(["x", turn]) as srv:
        client = _client(srv)
        client.complete(MSGS)
        c = client.complete(MSGS)
    assert srv.responses[1]["choices"][0]["message"]["tool_calls"][0]["id"] == ""
    assert [tc["id"] for tc in c.message["tool_calls"]] == ["call_2_0", "call_2_1"]
    assert c.message["tool_calls"][1]["function"]["arguments"] == "{}"


def test_500_then_success_is_retried_with_backoff() -> None:
    sleeps: list[float] = []
    with ScriptedServer([ScriptTurn(status=500), ScriptTurn(status=503), "ok"]) as srv:
        client = _client(srv, sleeps)
        c = client.complete(MSGS)
    assert c.message["content"] == "ok" and c.attempts == 3
    assert len(srv.requests) == 3 and client.retries == 2
    # exponential with jitter: 50-100 % of backoff_s * 2**attempt
    assert 0.005 <= sleeps[0] <= 0.01 and 0.01 <= sleeps[1] <= 0.02


def test_429_honours_retry_after() -> None:
    sleeps: list[float] = []
    with ScriptedServer([ScriptTurn(status=429, retry_after=7), "fine"]) as srv:
        c = _client(srv, sleeps).complete(MSGS)
    assert c.message["content"] == "fine"
    assert sleeps == [7.0]


def test_gives_up_after_max_retries_with_model_error() -> None:
    with (
        ScriptedServer([ScriptTurn(status=503, error="boom")] * 3) as srv,
        pytest.raises(ModelError, match=r"after 3 attempts.*HTTP 503.*boom"),
    ):
        _client(srv, max_retries=2).complete(MSGS)
    assert len(srv.requests) == 3


def test_the_same_500_body_twice_stops_retrying() -> None:
    from fte_shell.model import BadRequest

    with (
        ScriptedServer([ScriptTurn(status=500, error="boom")] * 3) as srv,
        pytest.raises(BadRequest, match=r"same HTTP 500 body twice.*boom"),
    ):
        _client(srv, max_retries=5).complete(MSGS)
    assert len(srv.requests) == 2


def test_client_errors_are_not_retried() -> None:
    with (
        ScriptedServer([ScriptTurn(status=400, error="bad request body"), "never"]) as srv,
        pytest.raises(ModelError, match="HTTP 400.*bad request body"),
    ):
        _client(srv).complete(MSGS)
    assert len(srv.requests) == 1


def test_timeout_is_retried() -> None:
    with ScriptedServer([ScriptTurn(content="late", delay_s=1.5), "on time"]) as srv:
        c = _client(srv, timeout_s=0.5).complete(MSGS)
    assert c.message["content"] == "on time" and c.attempts == 2


def test_connection_refused_is_retried_then_fails() -> None:
    srv = ScriptedServer(["x"])
    url = srv.base_url
    srv.close()  # port is now closed: nothing listens
    sleeps: list[float] = []
    client = ModelClient(ModelConfig(base_url=url, model="m", max_retries=2, backoff_s=0.01), sleep=sleeps.append)
    with pytest.raises(ModelError, match="APIConnectionError"):
        client.complete(MSGS)
    assert len(sleeps) == 2


def test_no_endpoint_names_every_way_to_give_one(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ModelError) as e:
        ModelClient(load_config().model)
    msg = str(e.value)
    for way in ("--base-url", "--model", "[model]", "--config", "OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL"):
        assert way in msg
    with pytest.raises(ModelError, match="no model name"):
        ModelClient(ModelConfig(base_url="http://127.0.0.1:9/v1"))


def test_retry_after_parsing() -> None:
    assert retry_after_s({"retry-after": "3"}) == 3.0
    assert retry_after_s({"retry-after-ms": "250"}) == 0.25
    assert retry_after_s({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0  # in the past
    assert retry_after_s({"retry-after": "soon"}) is None
    assert retry_after_s({}) is None


def test_window_discovery_takes_a_501_as_not_this_server_at_once() -> None:
    """A server with no discovery routes (501 on every GET) is asked each distinct probe once (four kinds read
    ``/v1/models``: it is asked once), without waiting."""
    from fte_shell.model import SERVER_KINDS, ServerInfo
    from fte_shell.standins.research import ResearchPolicy
    from tests.emulators import ChatOnly, Emulator

    personality = ChatOnly()
    with Emulator(personality, ResearchPolicy()) as emu:
        client = ModelClient(ModelConfig(base_url=emu.base_url, model="m"))
        t0 = time.monotonic()
        info = client.server_info()
        elapsed = time.monotonic() - t0
        client.close()
    assert info == ServerInfo()
    probes = [("/v1" if k.probe.under == "base" else "") + k.probe.path for k in SERVER_KINDS if k.probe]
    assert personality.gets == ["/get_model_info", "/v1/models", "/props", "/api/version"] == list(dict.fromkeys(probes))
    assert elapsed < 2


def test_window_discovery_stops_at_a_server_that_does_not_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """A probe that times out ends the discovery (the next probes would wait as long); the model call
    reports the problem."""
    from fte_shell.model import window
    from tests.servers import LoopbackServer, Route

    monkeypatch.setattr(window, "PROBE_TIMEOUT_S", 0.3)
    with LoopbackServer(routes={"/v1/models": Route(hang=True)}) as srv:
        t0 = time.monotonic()
        info = window.discover(f"http://{srv.host_port}/v1", "k", "m")
        elapsed = time.monotonic() - t0
        paths = [r.path for r in srv.requests]
    assert info.server is None and info.context_window is None
    assert paths == ["/get_model_info", "/v1/models"] and elapsed < 2  # SGLang's 404, then the hang ends it


def test_server_kinds_force_a_first_call_the_way_their_engine_enforces_it() -> None:
    from fte_shell.model.window import forcing, kind_named

    tools = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "required": ["command"]}}},
             {"type": "function", "function": {"name": "search"}}]
    named = {"type": "function", "function": {"name": "bash"}}
    assert forcing(kind_named("vllm"), "required", tools) == {"tool_choice": "required"}
    assert forcing(kind_named(None), named, tools) == {"tool_choice": named}  # unknown: as asked
    # llama-cpp-python: a named choice only ("required" names the first tool; a string would be an HTTP 500)
    assert forcing(kind_named("llama-cpp-python"), "required", tools) == {"tool_choice": named}
    assert forcing(kind_named("llama-cpp-python"), "auto", tools) == {}
    # llama.cpp: a JSON schema of the call object, which its server enforces by grammar
    bash = {"type": "object", "properties": {"name": {"const": "bash"}, "arguments": tools[0]["function"]["parameters"]},
            "required": ["name", "arguments"]}
    search = {"type": "object", "properties": {"name": {"const": "search"}, "arguments": {"type": "object"}},
              "required": ["name", "arguments"]}
    assert forcing(kind_named("llama.cpp"), named, tools) == {
        "response_format": {"type": "json_schema", "json_schema": {"name": "tool_call", "schema": bash}}}
    assert forcing(kind_named("llama.cpp"), "required", tools)["response_format"]["json_schema"]["schema"] == {
        "anyOf": [bash, search]}
    assert forcing(kind_named("llama.cpp"), None, tools) == {} == forcing(kind_named("llama.cpp"), named, [])


def test_thinking_switches_and_their_merge_with_extra_body() -> None:
    from fte_shell.model.chat import merge_body
    from fte_shell.model.window import kind_named, thinking_fields

    assert thinking_fields(kind_named("vllm"), False, "Qwen/Qwen3.5-32B") == {"chat_template_kwargs": {"enable_thinking": False}}
    assert thinking_fields(kind_named("sglang"), True, "deepseek-ai/DeepSeek-V3.1") == {
        "chat_template_kwargs": {"thinking": True}, "separate_reasoning": True}
    assert thinking_fields(kind_named("openrouter"), True, "google/gemini-2.5-pro") == {"reasoning": {"enabled": True}}
    assert thinking_fields(kind_named("ollama"), True, "qwen3") == {} == thinking_fields(kind_named("vllm"), None, "m")
    merged = merge_body({"reasoning": {"enabled": True}, "separate_reasoning": True},
                        {"reasoning": {"effort": "high"}, "separate_reasoning": False, "top_k": 20})
    assert merged == {"reasoning": {"enabled": True, "effort": "high"}, "separate_reasoning": False, "top_k": 20}
    # model.reasoning_effort: OpenAI's top-level field, OpenRouter's reasoning.effort (beside its switch)
    assert kind_named("vllm").effort("low") == {"reasoning_effort": "low"}
    assert merge_body(thinking_fields(kind_named("openrouter"), True, "m"), kind_named("openrouter").effort("high")) == {
        "reasoning": {"enabled": True, "effort": "high"}}


def test_model_server_names_the_kind_and_refuses_an_unknown_one() -> None:
    from fte_shell.errors import ModelError
    from fte_shell.model.window import discover

    assert discover(None, "k", "m", kind="openrouter").server == "openrouter"
    with pytest.raises(ModelError, match="model.server = 'sglangg' is not a server kind; the kinds: sglang, vllm"):
        discover(None, "k", "m", kind="sglangg")
