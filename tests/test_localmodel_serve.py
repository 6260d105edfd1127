"""``localmodel serve`` must not leave its server behind: a SIGTERM runs its clean-up, and the xllamacpp
server process exits once the process that started it is gone (even SIGKILLed). No model is loaded here:
the same functions run in small child processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

CHILD_STOPS = """
import sys, time
from fte_shell.standins.localmodel import _stop_on_sigterm
_stop_on_sigterm()
try:
    print("ready", flush=True)
    time.sleep(600)
except KeyboardInterrupt:
    open(sys.argv[1], "w").write("cleaned up")
    raise SystemExit(130)
"""

MIDDLE = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c",
    "import sys; from fte_shell.standins.localmodel import wait_for_parent_exit; "
    "wait_for_parent_exit(int(sys.argv[1]), 0.05)", str(os.getpid())])
print(child.pid, flush=True)
time.sleep(600)
"""


def _env() -> dict[str, str]:
    root = str(Path(__file__).resolve().parents[1])
    return {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state == "Z"  # exited; not yet reaped by PID 1


def test_sigterm_runs_the_serve_clean_up(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    p = subprocess.Popen([sys.executable, "-c", CHILD_STOPS, str(marker)], stdout=subprocess.PIPE, env=_env())
    assert p.stdout is not None and p.stdout.readline().strip() == b"ready"
    p.send_signal(signal.SIGTERM)
    assert p.wait(60) == 130  # by default SIGTERM ends Python at once (-15) and skips every finally
    assert marker.read_text() == "cleaned up"


def test_the_server_process_exits_when_its_starter_is_killed() -> None:
    middle = subprocess.Popen([sys.executable, "-c", MIDDLE], stdout=subprocess.PIPE, env=_env())
    assert middle.stdout is not None
    server = int(middle.stdout.readline())
    assert not _gone(server)
    middle.kill()  # SIGKILL: no clean-up of the starter runs
    middle.wait(60)
    deadline = time.monotonic() + 60
    while not _gone(server) and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        assert _gone(server), f"process {server} outlived its starter"
    finally:
        if not _gone(server):
            os.kill(server, signal.SIGKILL)
