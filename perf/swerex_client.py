"""SWE-ReX's ``execute`` for ``perf/sandbox_throughput.py``, run by a Python that has ``swe-rex`` (its own
venv: its dependencies are not fte-shell's pins). Imports nothing of fte-shell.

    <swerex venv>/bin/python perf/swerex_client.py WORKDIR

Starts ``swerex-remote`` (beside this interpreter) on 127.0.0.1 in WORKDIR, drives it with SWE-ReX's own
``RemoteRuntime`` and says ``{"server_pid": …}`` on stdout when it answers. Then, per line on stdin
``<reps> <command as JSON>``: runs the command ``reps`` times through ``execute`` and answers one JSON
line: ``{"s": [seconds per run, measured here around each execute], "cpu": this process's CPU seconds
around them, "out": the last output's length, "x": its count of "x", "nl": of newlines}``. Ends at EOF
of stdin, stopping the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from swerex.runtime.abstract import Command
from swerex.runtime.remote import RemoteRuntime


def main() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = secrets.token_hex(8)
    exe = shutil.which("swerex-remote", path=str(Path(sys.executable).parent)) or "swerex-remote"
    proc = subprocess.Popen([exe, "--host", "127.0.0.1", "--port", str(port), "--auth-token", token],
                            cwd=sys.argv[1], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    loop = asyncio.new_event_loop()
    rt = RemoteRuntime(host="http://127.0.0.1", port=port, auth_token=token, timeout=120)
    try:
        deadline = time.monotonic() + 60
        while not loop.run_until_complete(rt.is_alive()):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("swerex-remote did not come up")
            time.sleep(0.1)
        print(json.dumps({"server_pid": proc.pid}), flush=True)
        for line in sys.stdin:
            reps, cmd = line.split(" ", 1)
            times, out, cpu = [], "", 0.0
            for _ in range(int(reps)):
                t, c = time.perf_counter(), time.process_time()
                out = loop.run_until_complete(rt.execute(Command(command=json.loads(cmd), shell=True))).stdout
                times.append(time.perf_counter() - t)
                cpu += time.process_time() - c
            answer = {"s": times, "cpu": cpu, "out": len(out), "x": out.count("x"), "nl": out.count("\n")}
            print(json.dumps(answer), flush=True)
    finally:
        with contextlib.suppress(Exception):
            loop.run_until_complete(rt.close())
        loop.close()
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
