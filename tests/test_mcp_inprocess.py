"""The MCP server in memory (the SDK's client on the server object: no process, no box) with the fte
profile: its tools exactly the Episode's plus `handle`, hostile arguments to the structured tools
answered as errors, the `answer` tool ending a run `answer`, the idle reaper and the workspace cap."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp_helpers import HTML, Q
from servers import LoopbackServer

from fte_shell import Episode, load_config
from fte_shell.mcp.config import NO_QUESTION
from fte_shell.mcp.server import Dispatcher, build_server
from fte_shell.mcp.workspaces import Workspaces, probe_tools
from fte_shell.record.rundir import read_result
from fte_shell.world import World


@pytest.fixture(scope="module")
def web() -> LoopbackServer:
    with LoopbackServer() as srv:
        srv.route("/kestrel", body=HTML)
        yield srv


HOSTILE: list[tuple[str, dict[str, Any], str]] = [
    ("grep", {"pattern": "$(reboot); rm -rf /work `id` | cat /etc/passwd"}, "No matches for '$(reboot)"),
    ("grep", {"pattern": "(unclosed"}, "Error"),
    ("grep", {"pattern": "a", "context": 10**12}, "context capped at 10"),
    ("read", {"path": "../../../../etc/passwd"}, "Error"),
    ("read", {"path": "/etc/passwd"}, "Error"),
    ("read", {"path": "/work/x.txt; rm -rf /", "offset": -3}, "Error"),
    ("fetch", {"url": "file:///etc/passwd"}, "Error"),
    ("fetch", {"url": "http://169.254.169.254/latest/meta-data/"}, "Error"),
    ("fetch", {"url": "x" * 200_000}, "Error"),
    ("fetch", {"url": "http://a\x00b/"}, "Error"),
    ("list_fetched", {"extra": True}, "Error"),
]


def test_fte_profile_in_memory(web: LoopbackServer, tmp_path: Path) -> None:
    cfg = load_config(None, {"agent": {"profile": "fte"}, "search": {"backend": "none"},
                             "sandbox": {"fetch_policy": {"allow_private": [web.host_port]}}}, environ={})
    with Episode.open(cfg, Q, tmp_path / "reference") as ep:
        reference = ep.tools
    with World.from_config(cfg) as world:
        spaces = Workspaces(cfg, world, tmp_path / "runs", max_workspaces=2, idle_ttl_s=3600, default_question=NO_QUESTION)
        tools, addendum = probe_tools(cfg, world)
        server = build_server(Dispatcher(spaces, tools, single=None, answer=True), addendum)
        try:
            got = anyio.run(_session, server, web.url("/kestrel"), spaces)
        finally:
            spaces.close_all()
    listed = {t.name: t for t in got["tools"]}
    assert list(listed) == ["open_workspace", *(t["function"]["name"] for t in reference), "close_workspace", "answer"]
    for t in reference:
        fn, mine = t["function"], listed[t["function"]["name"]]
        assert mine.description == fn["description"]
        assert mine.input_schema["properties"] == {"handle": mine.input_schema["properties"]["handle"], **fn["parameters"]["properties"]}
        assert mine.input_schema["required"] == ["handle", *fn["parameters"]["required"]]
    assert "7: It was completed in 1841 by the engineer Mara Vell." in got["grep"].content[0].text
    for (name, args, want), res in zip(HOSTILE, got["hostile"], strict=True):
        text = res.content[0].text
        assert want.lower() in text.lower(), (name, args, text)
        assert res.is_error == (want == "Error"), (name, text)
    assert got["after_answer"].is_error and "unknown or closed workspace handle" in got["after_answer"].content[0].text
    answered = read_result(tmp_path / "runs" / got["run1"])
    assert answered is not None and (answered["stop_reason"], answered["answer"]) == ("answer", "Mara Vell")
    assert answered["tool_calls"] == {"fetch": 5, "grep": 4, "read": 3, "list_fetched": 1}
    assert got["third"].is_error and "the most this server allows" in got["third"].content[0].text
    assert got["reaped"] == [got["h2"], got["h3"]] and len(spaces) == 0
    reaped = read_result(tmp_path / "runs" / got["run2"])
    assert reaped is not None and reaped["stop_reason"] == "abandoned" and reaped["question"] == NO_QUESTION


async def _session(server: Any, url: str, spaces: Workspaces) -> dict[str, Any]:
    got: dict[str, Any] = {}
    async with Client(server) as c:
        got["tools"] = (await c.list_tools()).tools
        first = (await c.call_tool("open_workspace", {"question": Q})).structured_content
        h, got["run1"] = first["handle"], first["run_id"]
        assert not (await c.call_tool("fetch", {"handle": h, "url": url})).is_error
        got["grep"] = await c.call_tool("grep", {"handle": h, "pattern": "Mara Vell"})
        got["hostile"] = [await c.call_tool(name, {"handle": h, **args}) for name, args, _ in HOSTILE]
        answered = await c.call_tool("answer", {"handle": h, "answer": "Mara Vell"})
        assert not answered.is_error, answered.content
        got["after_answer"] = await c.call_tool("list_fetched", {"handle": h})
        second = (await c.call_tool("open_workspace", {})).structured_content
        got["h2"], got["run2"] = second["handle"], second["run_id"]
        got["h3"] = (await c.call_tool("open_workspace", {"question": "another"})).structured_content["handle"]
        got["third"] = await c.call_tool("open_workspace", {})
        spaces.idle_ttl_s = 0.01
        await anyio.sleep(0.05)
        got["reaped"] = await spaces.reap_idle()
    return got


def test_an_sdk_mcpserver_serves_an_episode_through_the_same_adapter(web: LoopbackServer, tmp_path: Path) -> None:
    """verifiers' tool server path (fte_shell.episode.as_mcp.serve_episode on an SDK MCPServer made
    elsewhere): the profile's schemas unchanged, calls recorded in the episode, failures isError."""
    from mcp.server.mcpserver import MCPServer

    from fte_shell.episode.as_mcp import serve_episode

    cfg = load_config(None, {"agent": {"profile": "fte"}, "search": {"backend": "none"},
                             "sandbox": {"fetch_policy": {"allow_private": [web.host_port]}}}, environ={})

    async def session(ep: Episode) -> dict[str, Any]:
        server = MCPServer("vf-like")
        serve_episode(server, ep)
        async with Client(server) as c:
            return {"tools": (await c.list_tools()).tools,
                    "fetch": await c.call_tool("fetch", {"url": web.url("/kestrel")}),
                    "grep": await c.call_tool("grep", {"pattern": "Mara Vell"}),
                    "bad": await c.call_tool("read", {"path": "/etc/passwd"}),
                    "unknown": await c.call_tool("nope", {})}

    with Episode.open(cfg, Q, tmp_path / "run") as ep:
        got = anyio.run(session, ep)
        reference = ep.tools
    listed = {t.name: t for t in got["tools"]}
    assert list(listed) == [t["function"]["name"] for t in reference]
    for t in reference:
        assert listed[t["function"]["name"]].input_schema == t["function"]["parameters"]
        assert listed[t["function"]["name"]].description == t["function"]["description"]
    assert not got["fetch"].is_error and "Mara Vell" in got["grep"].content[0].text
    assert got["bad"].is_error and got["unknown"].is_error and "unknown tool" in got["unknown"].content[0].text
    result = read_result(tmp_path / "run")
    assert result is not None and result["tool_calls"] == {"fetch": 1, "grep": 1, "read": 1}
