"""`fte-shell mcp` with the SDK's real client: over a real stdio subprocess (the profile's tools unchanged,
fetch and `grep -n` through bash on a loopback page, the page byte-identical to what `fte-shell run`
wrote, no network from the box, the workspace as resources, the run directory `report` reads, no box
left when the client closes or is SIGKILLed) and over Streamable HTTP (401 without the token, 403 for a
foreign Origin, two handles isolated, hostile arguments answered as errors, SIGTERM closes every box)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_helpers import HTML, Q, boxes_of, gone_within, mcp_args, mcp_command, server_env, write_config
from servers import LoopbackServer

from fte_shell.record.rundir import read_result
from fte_shell.standins.server import ScriptedServer, ScriptToolCall, ScriptTurn

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def web() -> LoopbackServer:
    with LoopbackServer() as srv:
        srv.route("/kestrel", body=HTML)
        yield srv


def events(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "trajectory.jsonl").read_text().splitlines()]


NET_PROBE = textwrap.dedent("""\
    python3 - <<'EOF'
    import socket
    for host, port in (("{host}", {port}), ("1.1.1.1", 80)):
        try:
            socket.create_connection((host, port), timeout=3)
            print("CONNECTED", host)
        except OSError as e:
            print("no route", host, e.errno)
    EOF""")


def test_stdio_session_is_a_run_with_the_profiles_tools(docker_ready: None, web: LoopbackServer, tmp_path: Path) -> None:
    cfg, snap, url = write_config(tmp_path / "cfg.toml", web.host_port), tmp_path / "snap", web.url("/kestrel")
    # `fte-shell run` fetches the page (recording it in a snapshot) ...
    script = [ScriptTurn(tool_calls=[ScriptToolCall(name="bash", arguments={"command": f"fetch {url}"})]),
              "<answer>Mara Vell</answer>"]
    with ScriptedServer(script) as srv:
        done = subprocess.run([sys.executable, "-m", "fte_shell", "run", Q, "-q", "--config", str(cfg), "--base-url",
                               srv.base_url, "--model", "scripted", "--snapshot", str(snap), "--out", str(tmp_path / "run")],
                              env=server_env(), capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (page,) = (tmp_path / "run" / "workspace").glob("*.txt")
    run_tools = events(tmp_path / "run")[0]["tools"]
    hits = web.count("/kestrel")
    host_ip = subprocess.run(["hostname", "-I"], capture_output=True, text=True).stdout.split()[0]

    # ... and an MCP client over stdio, replaying the snapshot, gets the same tools and the same bytes
    out = tmp_path / "mcp"
    params = StdioServerParameters(command=sys.executable, env=server_env(), cwd=tmp_path, args=mcp_args(
        "--config", str(cfg), "--snapshot", str(snap), "--snapshot-mode", "replay", "--out", str(out), "--question", Q))

    async def session() -> dict[str, Any]:
        async with Client(stdio_client(params)) as c:
            got: dict[str, Any] = {"tools": (await c.list_tools()).tools}
            got["fetch"] = await c.call_tool("bash", {"command": f"fetch {url}"})
            got["grep"] = await c.call_tool("bash", {"command": "grep -n 'Mara Vell' /work/*.txt"})
            got["net"] = await c.call_tool("bash", {"command": NET_PROBE.format(host=host_ip, port=web.port)})
            got["bad"] = await c.call_tool("bash", {"cmd": "ls"})
            got["unknown"] = await c.call_tool("python", {"code": "1"})
            got["resources"] = (await c.list_resources()).resources
            got["text"] = (await c.read_resource(got["resources"][0].uri)).contents[0].text
            with pytest.raises(Exception, match="no such file"):
                await c.read_resource("fte-workspace://work/..%2F..%2Fetc%2Fpasswd")
            return got

    got = anyio.run(session)
    assert [(t.name, t.description, t.input_schema) for t in got["tools"]] == [
        (f["function"]["name"], f["function"]["description"], f["function"]["parameters"]) for f in run_tools]
    assert not got["fetch"].is_error and "/work/" in got["fetch"].content[0].text, got["fetch"].content
    assert re.search(r"^\d+:.*by the engineer Mara Vell", got["grep"].content[0].text, re.MULTILINE), got["grep"].content
    net = got["net"].content[0].text
    assert "CONNECTED" not in net and net.count("no route") == 2, net
    assert got["bad"].is_error and "missing required argument 'command'" in got["bad"].content[0].text
    assert got["unknown"].is_error and "unknown tool 'python'" in got["unknown"].content[0].text
    (run,) = out.iterdir()
    (mine,) = (run / "workspace").glob("*.txt")
    assert mine.read_bytes() == page.read_bytes() and web.count("/kestrel") == hits  # replayed, byte for byte
    assert [r.name for r in got["resources"]] == [mine.name] and got["text"].encode() == mine.read_bytes()

    result = read_result(run)
    assert result is not None and (result["stop_reason"], result["tool_calls"]) == ("abandoned", {"bash": 4, "python": 1})
    assert result["question"] == Q and result["meta"]["mcp"] is True
    calls = [e for e in events(run) if e["type"] == "tool_call"]
    assert [c["arguments"] for c in calls][:2] == [{"command": f"fetch {url}"}, {"command": "grep -n 'Mara Vell' /work/*.txt"}]
    assert gone_within(run.name, 10), boxes_of(run.name)

    from typer.testing import CliRunner

    from fte_shell.cli import app

    rep = CliRunner().invoke(app, ["report", str(run), "--out", str(tmp_path / "rep")], env={"COLUMNS": "200"})
    assert rep.exit_code == 0, rep.output
    data = json.loads((tmp_path / "rep" / "metrics.json").read_text())
    assert data["runs"][0]["stop_reason"] == "abandoned" and data["runs"][0]["profile"] == "shell"


CLIENT = """
import anyio, sys
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

async def main():
    params = StdioServerParameters(command=sys.executable, args={args!r}, env={env!r})
    async with Client(stdio_client(params)) as c, anyio.create_task_group() as tg:
        r = await c.call_tool("bash", {{"command": "echo ready"}})
        tg.start_soon(c.call_tool, "bash", {{"command": "sleep 25"}})  # still running when the client dies
        await anyio.sleep(1)
        print(r.content[0].text.strip(), flush=True)
        await anyio.sleep(600)

anyio.run(main)
"""


def test_client_sigkilled_leaves_no_box(docker_ready: None, tmp_path: Path) -> None:
    out = tmp_path / "runs"
    client = tmp_path / "client.py"
    client.write_text(CLIENT.format(args=mcp_args("--search", "none", "--out", str(out)), env=server_env()))
    proc = subprocess.Popen([sys.executable, str(client)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, env=server_env())
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        (run,) = out.iterdir()
        assert len(boxes_of(run.name)) == 1
        proc.kill()  # SIGKILL: the server sees its stdin close
        proc.wait(timeout=30)
        assert gone_within(run.name, 15), boxes_of(run.name)
        deadline = time.monotonic() + 15
        while read_result(run) is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert (read_result(run) or {}).get("stop_reason") == "abandoned"
    finally:
        proc.kill()
        proc.wait()


def _banner(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """The URL and the token the HTTP server prints when it listens."""
    url = token = None
    assert proc.stderr is not None
    for line in proc.stderr:
        if m := re.search(r"Streamable HTTP at (http://\S+)", line):
            url = m.group(1)
        if m := re.match(r"token: (\S+)", line):
            token = m.group(1)
            break
    assert url and token, "the server printed no URL and token"
    return url, token


def test_http_token_origin_handles_and_hostile_arguments(docker_ready: None, web: LoopbackServer, tmp_path: Path) -> None:
    cfg, out, url = write_config(tmp_path / "cfg.toml", web.host_port), tmp_path / "runs", web.url("/kestrel")
    proc = subprocess.Popen(mcp_command("--transport", "http", "--port", "0", "--config", str(cfg), "--out", str(out),
                                        "--max-workspaces", "2"), stderr=subprocess.PIPE, text=True, env=server_env(), cwd=tmp_path)
    try:
        endpoint, token = _banner(proc)
        auth = {"Authorization": f"Bearer {token}"}
        listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        # the door: no token, a wrong one, a foreign Origin — refused before anything runs
        assert httpx.post(endpoint, json=listing).status_code == 401
        assert httpx.post(endpoint, json=listing, headers={"Authorization": "Bearer " + "x" * len(token)}).status_code == 401
        assert httpx.post(endpoint, json=listing, headers={**auth, "Origin": "http://evil.example"}).status_code == 403
        huge = httpx.post(endpoint, content=b'{"x": "' + b"a" * (5 << 20) + b'"}',
                          headers={**auth, "Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
        assert huge.status_code == 413
        got = anyio.run(_http_session, endpoint, auth, url)
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
    assert code == 130  # stopped by SIGTERM, every box closed first
    tools = {t.name: t for t in got["tools"]}
    assert list(tools) == ["open_workspace", "bash", "close_workspace"]
    assert tools["bash"].input_schema["required"] == ["handle", "command"]
    assert got["third"].is_error and "2 workspace(s) are open" in got["third"].content[0].text
    assert re.search(r"^\d+:.*Mara Vell", got["grep"].content[0].text, re.MULTILINE), got["grep"].content
    assert got["other_ls"].content[0].text.strip() == "(no documents fetched yet)"  # an empty /work, no pages
    assert got["mine"].encode() == next((out / got["run1"] / "workspace").glob("*.txt")).read_bytes()
    assert "no such file" in got["theirs"]
    assert got["big"].content[0].text.split()[0] == "300001" and not got["big"].is_error  # 300,000 A and a newline
    assert "contains a NUL character" in got["nul"].content[0].text and "nothing was run" in got["nul"].content[0].text
    assert got["list_arg"].is_error and "invalid arguments for bash" in got["list_arg"].content[0].text
    assert got["closed"].is_error and "unknown or closed workspace handle" in got["closed"].content[0].text
    assert got["bad_handle"].is_error and "unknown or closed workspace handle" in got["bad_handle"].content[0].text
    assert got["alive"].content[0].text.startswith("still here")
    results = {run: read_result(out / run) for run in (got["run1"], got["run2"])}
    assert results[got["run1"]]["stop_reason"] == "abandoned"  # closed by its client
    assert results[got["run2"]]["stop_reason"] == "interrupted"  # open when the server was stopped
    assert not boxes_of(got["run1"]) and not boxes_of(got["run2"])


async def _http_session(endpoint: str, auth: dict[str, str], url: str) -> dict[str, Any]:
    got: dict[str, Any] = {}
    transport = streamable_http_client(endpoint, http_client=create_mcp_http_client(headers=auth))
    async with Client(transport) as c:
        got["tools"] = (await c.list_tools()).tools
        opened: list[Any] = []

        async def open_one() -> None:
            opened.append(await c.call_tool("open_workspace", {"question": "Who built the Kestrel Bridge?"}))

        async with anyio.create_task_group() as tg:  # two boxes start at once
            tg.start_soon(open_one)
            tg.start_soon(open_one)
        (h1, run1), (h2, run2) = [(r.structured_content["handle"], r.structured_content["run_id"]) for r in opened]
        got["run1"], got["run2"] = run1, run2
        got["third"] = await c.call_tool("open_workspace", {})
        fetched = await c.call_tool("bash", {"handle": h1, "command": f"fetch {url}"})
        assert not fetched.is_error, fetched.content
        got["grep"] = await c.call_tool("bash", {"handle": h1, "command": "grep -n 'Mara Vell' /work/*.txt"})
        got["other_ls"] = await c.call_tool("bash", {"handle": h2, "command": "ls -A /work; list_fetched"})
        name = fetched.content[0].text.split()[0].removeprefix("/work/")
        got["mine"] = (await c.read_resource(f"fte-workspace://{h1}/{name}")).contents[0].text
        try:
            await c.read_resource(f"fte-workspace://{h2}/{name}")
            got["theirs"] = "read"
        except Exception as e:  # noqa: BLE001 - the error the server sent
            got["theirs"] = str(e)
        # hostile arguments: huge, binary, the wrong types, a made-up handle
        got["big"] = await c.call_tool("bash", {"handle": h1, "command": "echo " + "A" * 300_000 + " | wc -c"})
        got["nul"] = await c.call_tool("bash", {"handle": h1, "command": "printf 'a\x00b\x07\x1b[2J\uffff' | od -c"})
        got["list_arg"] = await c.call_tool("bash", {"handle": h1, "command": ["rm", "-rf", "/"]})
        got["bad_handle"] = await c.call_tool("bash", {"handle": {"$ne": None}, "command": "id"})
        got["alive"] = await c.call_tool("bash", {"handle": h1, "command": "echo still here"})
        await c.call_tool("close_workspace", {"handle": h1})
        got["closed"] = await c.call_tool("bash", {"handle": h1, "command": "id"})
    return got
