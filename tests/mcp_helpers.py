"""What the MCP tests share: the loopback page, the config that lets the box fetch it, the server's
command line and environment (this checkout's code), and the boxes left with a run id."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
Q = "Who built the Kestrel Bridge?"
HTML = """<!doctype html><html><head><title>Kestrel Bridge</title></head><body><main>
<h1>Kestrel Bridge</h1><p>Kestrel Bridge crosses the Alder river in seven stone arches.</p>
<p>It was completed in 1841 by the engineer Mara Vell.</p>
<p>Heavy traffic was banned from the bridge in 1978.</p></main></body></html>"""


def write_config(path: Path, host_port: str) -> Path:
    path.write_text(f'[search]\nbackend = "none"\n[sandbox]\ncommand_timeout_s = 20\n'
                    f'[sandbox.fetch_policy]\nallow_private = ["{host_port}"]\n', encoding="utf-8")
    return path


def server_env() -> dict[str, str]:
    """The server process's environment: this checkout's fte_shell first."""
    return {**os.environ, "PYTHONPATH": str(REPO)}


def mcp_args(*extra: str) -> list[str]:
    return ["-m", "fte_shell", "mcp", *extra]


def mcp_command(*extra: str) -> list[str]:
    return [sys.executable, *mcp_args(*extra)]


def boxes_of(run_id: str) -> list[str]:
    """Containers (running or not) labelled with ``run_id``."""
    out = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=fte-shell.run-id={run_id}"],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    return out.split()


def gone_within(run_id: str, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not boxes_of(run_id):
            return True
        time.sleep(0.25)
    return False
