"""`fte-shell mcp --transport http --warm N` with the SDK's real client and real Docker boxes: workspaces
open with boxes started ahead (no box of their own run id is started), each isolated, the run directory's
`workspace/` live while open and a real copy once closed; the server SIGKILLed, the owner's reaper
removes every box it held (the open workspace's and the warm ones)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_helpers import HTML, boxes_of, mcp_command, server_env, write_config
from servers import LoopbackServer

pytestmark = pytest.mark.docker


def owned_by(pid: int) -> list[str]:
    """Containers whose owner label names process ``pid``."""
    out = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=fte-shell.owner-pid={pid}"],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    return out.split()


def until(fn: Any, seconds: float) -> Any:
    deadline = time.monotonic() + seconds
    while not (got := fn()) and time.monotonic() < deadline:
        time.sleep(0.25)
    return got


def test_warm_workspaces_and_server_sigkill(docker_ready: None, tmp_path: Path) -> None:
    with LoopbackServer() as web:
        web.route("/kestrel", body=HTML)
        cfg, out = write_config(tmp_path / "cfg.toml", web.host_port), tmp_path / "runs"
        proc = subprocess.Popen(mcp_command("--transport", "http", "--port", "0", "--config", str(cfg), "--out", str(out),
                                            "--max-workspaces", "2", "--warm", "2"),
                                stderr=subprocess.PIPE, text=True, env=server_env(), cwd=tmp_path)
        try:
            endpoint = token = ready = ""
            assert proc.stderr is not None
            for line in proc.stderr:  # the URL, the token, then the pool full
                if m := re.search(r"Streamable HTTP at (http://\S+)", line):
                    endpoint = m.group(1)
                if m := re.match(r"token: (\S+)", line):
                    token = m.group(1)
                ready = ready or ("2 warm box(es) ready" in line and line)
                if endpoint and token and ready:
                    break
            warm = owned_by(proc.pid)
            assert len(warm) == 2, warm
            got = anyio.run(_session, endpoint, {"Authorization": f"Bearer {token}"}, web.url("/kestrel"), out)
            # the closed workspace's box is reset and kept for a later workspace: both first boxes remain
            assert set(warm) <= set(owned_by(proc.pid))
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            assert until(lambda: not owned_by(proc.pid), 30), owned_by(proc.pid)  # the reaper's gc
            # the workspace open at the kill: its link to the box's directory became a copy, not dangling
            ws2 = out / got["run2"] / "workspace"
            assert until(lambda: not ws2.is_symlink(), 30) and ws2.is_dir(), (
                os.readlink(ws2), ws2.resolve().exists(), [p.read_text() for p in ws2.resolve().parent.glob(".fte-*")])
            assert (ws2 / got["name2"].removeprefix("/work/")).is_file()
        finally:
            proc.kill()
            proc.wait()
    assert got["boxes_of_runs"] == [[], []]  # no box started for either workspace: both were warm
    assert re.search(r"^\d+:.*Mara Vell", got["grep"], re.MULTILINE), got["grep"]
    assert got["other_ls"].strip() == "(no documents fetched yet)"
    assert got["linked"]  # while open, the run's workspace/ shows the box's /work
    ws1 = out / got["run1"] / "workspace"
    assert ws1.is_dir() and not ws1.is_symlink()  # closed: a copy of its own
    assert got["mine"].encode() == ws1.joinpath(got["name"]).read_bytes()


def test_an_http_server_with_warm_boxes_starts_no_box_of_its_own_for_the_tool_probe(
        docker_ready: None, tmp_path: Path) -> None:
    # the tools every workspace offers come from a profile made at start: on a warm box (given back
    # fresh), not on a box started for that alone before any client asked
    since = f"{time.time() - 1:.3f}"
    with LoopbackServer() as web:
        cfg, out = write_config(tmp_path / "cfg.toml", web.host_port), tmp_path / "runs"
        proc = subprocess.Popen(mcp_command("--transport", "http", "--port", "0", "--config", str(cfg), "--out",
                                            str(out), "--max-workspaces", "1", "--warm", "1"),
                                stderr=subprocess.PIPE, text=True, env=server_env(), cwd=tmp_path)
        try:
            assert proc.stderr is not None
            said = []
            for line in proc.stderr:
                said.append(line)
                if "1 warm box(es) ready" in line:
                    break
            assert any("warm box(es) ready" in x for x in said), "".join(said)[-2000:]
            made = subprocess.run(["docker", "events", "--since", since, "--until", f"{time.time():.3f}",
                                   "--filter", "type=container", "--filter", "event=create",
                                   "--filter", f"label=fte-shell.owner-pid={proc.pid}",
                                   "--format", "{{index .Actor.Attributes \"fte-shell.run-id\"}}"],
                                  capture_output=True, text=True, check=True, timeout=60).stdout.split()
            assert len(made) == 1 and "mcp-probe" not in made, made
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


async def _session(endpoint: str, auth: dict[str, str], url: str, out: Path) -> dict[str, Any]:
    got: dict[str, Any] = {}
    async with Client(streamable_http_client(endpoint, http_client=create_mcp_http_client(headers=auth))) as c:
        opened = []

        async def open_one() -> None:
            opened.append((await c.call_tool("open_workspace", {})).structured_content)

        async with anyio.create_task_group() as tg:
            tg.start_soon(open_one)
            tg.start_soon(open_one)
        (h1, run1), (h2, run2) = [(o["handle"], o["run_id"]) for o in opened]
        got["run1"] = run1
        got["boxes_of_runs"] = [boxes_of(run1), boxes_of(run2)]
        fetched = await c.call_tool("bash", {"handle": h1, "command": f"fetch {url}"})
        assert not fetched.is_error, fetched.content
        got["name"] = fetched.content[0].text.split()[0].removeprefix("/work/")
        got["grep"] = (await c.call_tool("bash", {"handle": h1, "command": "grep -n 'Mara Vell' /work/*.txt"})).content[0].text
        got["other_ls"] = (await c.call_tool("bash", {"handle": h2, "command": "ls -A /work; list_fetched"})).content[0].text
        got["run2"] = run2  # left open: the server is SIGKILLed while its box serves it
        got["name2"] = (await c.call_tool("bash", {"handle": h2, "command": f"fetch {url}"})).content[0].text.split()[0]
        got["mine"] = (await c.read_resource(f"fte-workspace://{h1}/{got['name']}")).contents[0].text
        got["linked"] = (out / run1 / "workspace" / got["name"]).is_file()
        await c.call_tool("close_workspace", {"handle": h1})
    return got
