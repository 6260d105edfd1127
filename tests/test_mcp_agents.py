"""Real agent frameworks on `fte-shell mcp` over stdio, driven by the loopback scripted model: Inspect AI's
own `react()` agent (`mcp_server_stdio`) and the OpenAI Agents SDK (`MCPServerStdio`). The model fetches a
loopback page and greps it through `bash`, then answers with the name the grep printed; the Inspect eval
log and the Agents SDK's run show the bash calls, and the server's run directory records them."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp_helpers import HTML, Q, boxes_of, mcp_args, server_env, write_config
from servers import LoopbackServer

from fte_shell.record.rundir import read_result
from fte_shell.standins.server import ScriptedServer, ScriptToolCall, ScriptTurn

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def web() -> LoopbackServer:
    with LoopbackServer() as srv:
        srv.route("/kestrel", body=HTML)
        yield srv


class Researcher:
    """fetch, then grep, then the name the grep printed: through `submit` when the agent offers it, else as
    the reply."""

    def __init__(self, url: str):
        self.url = url

    def __call__(self, request: dict[str, Any]) -> ScriptTurn | str:
        tools = {t["function"]["name"] for t in request.get("tools") or []}
        assert "bash" in tools, tools
        seen = [m for m in request["messages"] if m.get("role") == "tool"]
        if not seen:
            return ScriptTurn(tool_calls=[ScriptToolCall(name="bash", arguments={"command": f"fetch {self.url}"})])
        if len(seen) == 1:
            return ScriptTurn(tool_calls=[ScriptToolCall(name="bash", arguments={"command": "grep -n 'Mara Vell' /work/*.txt"})])
        text = seen[-1]["content"] if isinstance(seen[-1]["content"], str) else " ".join(
            p.get("text", "") for p in seen[-1]["content"])
        m = re.search(r"engineer (\w+ \w+)", text)
        name = m.group(1) if m else "unknown"
        if "submit" in tools:  # Inspect's react(): its submit tool (the log then shows the answer as the reply)
            return ScriptTurn(tool_calls=[ScriptToolCall(name="submit", arguments={"answer": name})])
        return name


def _server_args(cfg: Path, out: Path) -> list[str]:
    return mcp_args("--config", str(cfg), "--out", str(out), "--question", Q)


def _check_run(out: Path) -> None:
    (run,) = out.iterdir()
    result = read_result(run)
    assert result is not None and result["tool_calls"] == {"bash": 2} and result["stop_reason"] == "abandoned"
    assert not boxes_of(run.name)


def test_inspect_react_agent(docker_ready: None, web: LoopbackServer, tmp_path: Path) -> None:
    from inspect_ai import Task, eval
    from inspect_ai.agent import react
    from inspect_ai.dataset import Sample
    from inspect_ai.scorer import includes
    from inspect_ai.tool import mcp_server_stdio

    cfg, out = write_config(tmp_path / "cfg.toml", web.host_port), tmp_path / "runs"
    server = mcp_server_stdio(name="fte-shell", command=sys.executable, args=_server_args(cfg, out), env=server_env())
    task = Task(dataset=[Sample(input=Q, target="Mara Vell")], solver=react(tools=[server]), scorer=includes())
    with ScriptedServer(policy=Researcher(web.url("/kestrel"))) as srv:
        model = _scripted_model(srv.base_url)
        (log,) = eval(task, model=model, log_dir=str(tmp_path / "logs"), display="none", max_retries=1)
    assert log.status == "success", log.error
    (sample,) = log.samples or []
    calls = [c for m in sample.messages if m.role == "assistant" for c in (m.tool_calls or [])]
    assert [(c.function, c.arguments.get("command", c.arguments.get("answer"))) for c in calls] == [
        ("bash", f"fetch {web.url('/kestrel')}"), ("bash", "grep -n 'Mara Vell' /work/*.txt")]
    grep_result = next(m for m in sample.messages if m.role == "tool" and "engineer" in str(m.content))
    assert re.search(r"\d+:.*engineer Mara Vell", str(grep_result.content))
    assert sample.output.completion == "Mara Vell"  # the name the grep printed, given to react's submit()
    assert sample.scores and next(iter(sample.scores.values())).value == "C"
    _check_run(out)


def _scripted_model(base_url: str) -> Any:
    """An Inspect model on the loopback scripted server: a ModelAPI that posts the conversation and the
    tools to its /chat/completions (Inspect's own openai provider wants openai>=3.4, and verifiers pins 2.x
    here) and counts tokens without tiktoken (whose first use downloads its tables)."""
    import anyio
    import httpx
    from inspect_ai.model import (
        ChatMessageAssistant,
        GenerateConfig,
        ModelAPI,
        ModelOutput,
        get_model,
        modelapi,
    )
    from inspect_ai.tool import ToolCall

    http = httpx.Client(timeout=60, trust_env=False)  # one plain-HTTP client: no TLS context per call

    class ScriptedRelay(ModelAPI):
        def __init__(self, model_name: str, base_url: str | None = None, api_key: str | None = None,
                     config: GenerateConfig = GenerateConfig(), **_: Any) -> None:
            super().__init__(model_name, base_url, api_key, [], config)

        async def generate(self, input: list[Any], tools: list[Any], tool_choice: Any, config: GenerateConfig) -> Any:
            body = {"model": "scripted", "messages": [{"role": m.role, "content": m.text} for m in input],
                    "tools": [{"type": "function", "function": {"name": t.name}} for t in tools]}
            url = f"{self.base_url}/chat/completions"
            reply = (await anyio.to_thread.run_sync(lambda: http.post(url, json=body))).json()["choices"][0]["message"]
            calls = [ToolCall(id=c["id"], function=c["function"]["name"], arguments=json.loads(c["function"]["arguments"]))
                     for c in reply.get("tool_calls") or []]
            return ModelOutput.from_message(ChatMessageAssistant(content=reply.get("content") or "",
                                                                 tool_calls=calls or None, model="scripted"))

        async def count_text_tokens(self, text: str) -> int:
            return len(text) // 4 + 1

    modelapi("fte-scripted")(ScriptedRelay)
    return get_model("fte-scripted/scripted", base_url=base_url)


def test_openai_agents_sdk(docker_ready: None, web: LoopbackServer, tmp_path: Path) -> None:
    import anyio
    from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
    from agents.items import ToolCallItem
    from agents.mcp import MCPServerStdio
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    cfg, out = write_config(tmp_path / "cfg.toml", web.host_port), tmp_path / "runs"

    async def go(base_url: str) -> Any:
        params = {"command": sys.executable, "args": _server_args(cfg, out), "env": server_env()}
        async with MCPServerStdio(params=params, client_session_timeout_seconds=120, cache_tools_list=True) as mcp:
            model = OpenAIChatCompletionsModel(model="scripted", openai_client=AsyncOpenAI(base_url=base_url, api_key="none"))
            agent = Agent(name="researcher", instructions="Answer the question.", mcp_servers=[mcp], model=model)
            return await Runner.run(agent, Q)

    with ScriptedServer(policy=Researcher(web.url("/kestrel"))) as srv:
        result = anyio.run(go, srv.base_url)
    assert result.final_output == "Mara Vell"
    calls = [item.raw_item for item in result.new_items if isinstance(item, ToolCallItem)]
    assert [(c.name, c.arguments) for c in calls] == [
        ("bash", f'{{"command": "fetch {web.url("/kestrel")}"}}'), ("bash", '{"command": "grep -n \'Mara Vell\' /work/*.txt"}')]
    _check_run(out)
