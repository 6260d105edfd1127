"""The scripted OpenAI-compatible server: HTTP shape, script and policy modes, failures, recording."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from fte_shell.config import ModelConfig
from fte_shell.errors import ModelError
from fte_shell.model import ModelClient
from fte_shell.standins.server import ScriptedServer, ScriptTurn, as_turn, tokens_for

MSGS = [{"role": "user", "content": "hi"}]


def _post(url: str, body: bytes) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_response_has_the_openai_shape_and_deterministic_usage() -> None:
    with ScriptedServer(["hello there"], model="m-x") as srv:
        status, body = _post(srv.base_url + "/chat/completions", json.dumps({"model": "asked", "messages": MSGS}).encode())
    assert status == 200
    assert body["id"] == "chatcmpl-scripted-1" and body["object"] == "chat.completion"
    assert isinstance(body["created"], int) and body["model"] == "asked"
    (choice,) = body["choices"]
    assert choice == {"index": 0, "message": {"role": "assistant", "content": "hello there"}, "finish_reason": "stop"}
    u = body["usage"]
    assert u["prompt_tokens"] == tokens_for(MSGS)
    assert u["completion_tokens"] == tokens_for(choice["message"])
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]
    assert srv.requests == [{"model": "asked", "messages": MSGS}]


def test_models_route_and_unknown_routes() -> None:
    with ScriptedServer(["x"], model="m-x") as srv:
        with urllib.request.urlopen(srv.base_url + "/models", timeout=10) as r:
            models = json.loads(r.read())
        status, body = _post(f"http://127.0.0.1:{srv.port}/v2/other", b"{}")
        bad_status, bad = _post(srv.base_url + "/chat/completions", b"{not json")
    assert models["data"][0]["id"] == "m-x"
    assert status == 404 and "no route" in body["error"]["message"]
    assert bad_status == 400 and "not JSON" in bad["error"]["message"]
    assert srv.requests == []  # neither counted as a chat request


def test_tool_calls_ids_and_raw_arguments() -> None:
    turn = ScriptTurn(
        content="calling",
        tool_calls=[{"name": "a", "arguments": {"k": "ü"}}, {"name": "b", "arguments": "{broken", "id": "mine"}],
    )
    with ScriptedServer([turn]) as srv:
        _, body = _post(srv.base_url + "/chat/completions", json.dumps({"messages": MSGS}).encode())
    msg = body["choices"][0]["message"]
    assert body["choices"][0]["finish_reason"] == "tool_calls"
    assert msg["tool_calls"][0] == {"id": "call_1_0", "type": "function", "function": {"name": "a", "arguments": '{"k": "ü"}'}}
    assert msg["tool_calls"][1]["id"] == "mine" and msg["tool_calls"][1]["function"]["arguments"] == "{broken"


def test_exhausted_script_is_a_clear_non_retried_error() -> None:
    with ScriptedServer(["only one"]) as srv:
        client = ModelClient(ModelConfig(base_url=srv.base_url, model="m", backoff_s=0.01))
        assert client.complete(MSGS).message["content"] == "only one"
        with pytest.raises(ModelError, match="script exhausted after 1 requests"):
            client.complete(MSGS)
    assert len(srv.requests) == 2


def test_policy_sees_each_request_and_its_failures_are_reported() -> None:
    seen: list[int] = []

    def policy(req: dict[str, Any]) -> str:
        seen.append(len(req["messages"]))
        if len(seen) > 1:
            raise RuntimeError("policy bug")
        return "<answer>ok</answer>"

    with ScriptedServer(policy=policy) as srv:
        client = ModelClient(ModelConfig(base_url=srv.base_url, model="m", max_retries=0))
        assert client.complete(MSGS).message["content"] == "<answer>ok</answer>"
        with pytest.raises(ModelError, match="scripted policy failed: RuntimeError: policy bug"):
            client.complete(MSGS + MSGS)
    assert seen == [1, 2]


def test_injected_status_with_retry_after_header() -> None:
    with ScriptedServer([ScriptTurn(status=429, retry_after=2.5, error="slow down"), "fine"]) as srv:
        req = urllib.request.Request(srv.base_url + "/chat/completions", data=b'{"messages": []}', method="POST")
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=10)
        assert e.value.code == 429 and e.value.headers["Retry-After"] == "2.5"
        assert json.loads(e.value.read())["error"]["message"] == "slow down"


def test_constructor_and_turn_validation() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        ScriptedServer()
    with pytest.raises(ValueError, match="exactly one"):
        ScriptedServer(["x"], policy=lambda r: "x")
    assert as_turn("text") == ScriptTurn(content="text")
    with pytest.raises(ValueError):
        as_turn({"contents": "typo"})  # extra keys are refused
