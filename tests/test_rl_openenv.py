"""fte_shell.rl.openenv with the real openenv-core: its own create_app server and its own WebSocket client;
reset/step/state, two sessions in their own boxes, rewards by the dataset's grading, no box left."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
import time
from pathlib import Path

import uvicorn

from fte_shell import load_config
from fte_shell.rl import PoolConfig
from fte_shell.rl.openenv import FteShellAction, FteShellClient, make_app
from tests.providers import CASES
from tests.test_rl_pool import live_boxes, usable


def test_openenv_client_against_its_server_two_sessions_isolated(hotpotqa_dir: Path) -> None:
    usable(next(c for c in CASES if c.id == "bwrap"))
    cfg = load_config(None, {"agent": {"profile": "shell"}, "search": {"backend": "none"},
                             "sandbox": {"provider": "bwrap"}})
    app = make_app(cfg, dataset="hotpotqa", max_sessions=4, settings=PoolConfig(size=2))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="critical"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    url = f"http://127.0.0.1:{port}"

    async def drive() -> Path:
        async with FteShellClient(base_url=url) as a, FteShellClient(base_url=url) as b:
            ra = await a.reset(question="What is two plus two?", answer="4")
            rb = await b.reset(seed=1)  # the dataset's second question, its gold answer with it
            assert ra.observation.question == "What is two plus two?" and not ra.done
            assert [t["function"]["name"] for t in ra.observation.tools] == ["bash"]
            assert "1944 San Juan" in rb.observation.question and "<answer>" in rb.observation.system_prompt
            x = await a.step(FteShellAction(tool="bash", arguments={"command": "echo mine > /tmp/a; echo $((2+2))"}))
            y = await b.step(FteShellAction(tool="bash", arguments={"command": "cat /tmp/a"}))
            assert x.observation.output.strip() == "4" and not x.done
            assert "No such file" in y.observation.output  # its own box
            bad = await b.step(FteShellAction(tool="python", arguments={}))
            assert bad.observation.error and "unknown tool" in bad.observation.output
            sa = await a.state()
            assert sa.step_count == 1 and sa.question == "What is two plus two?" and not sa.done
            fa = await a.step(FteShellAction(answer="4"))
            fb = await b.step(FteShellAction(answer="Buenos Aires"))
            assert (fa.done, fa.reward, fb.done, fb.reward) == (True, 1.0, True, 0.0)
            sb = await b.state()
            assert sb.done and sb.reward == 0.0 and sb.step_count == 3
            again = await a.reset(seed=1)  # a new episode in the same session
            await a.step(FteShellAction(tool="bash", arguments={"command": "true"}))
            assert again.observation.question == rb.observation.question
            return Path(str((await a.state()).run_dir))

    try:
        left_open = asyncio.run(drive())
        deadline = time.monotonic() + 60  # the session is gone: its episode closed, `abandoned`
        while not (left_open / "result.json").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert json.loads((left_open / "result.json").read_text())["stop_reason"] == "abandoned"
    finally:
        server.should_exit = True
        thread.join(60)
    assert live_boxes("bwrap", os.getpid()) == []
