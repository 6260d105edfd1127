"""A box does not inherit its host program's ignored signals: every provider's box starts its processes
with default dispositions and an empty mask, whatever the host's are. The probe runs the harness in a
child process started with SIGINT, SIGQUIT and SIGHUP ignored and SIGUSR2 blocked (as a job started by
``nohup … &`` or in a script's background ignores SIGINT)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.providers import ProviderCase

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parents[1]

HOST = r"""
import json, signal, sys
for s in (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP):
    signal.signal(s, signal.SIG_IGN)
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR2])
from fte_shell.config import SandboxConfig
from fte_shell.sandbox import Sandbox
with Sandbox(SandboxConfig(**json.loads(sys.argv[1]))) as sb:
    out = {"status": sb.run("grep -E '^Sig(Ign|Blk):' /proc/self/status").output,
           "kill_int": sb.run("sh -c 'kill -INT $$'").exit_code}
    t = sb.run("echo partial-1; sleep 30; echo never-2", timeout=1)
    out.update(timed_out=t.timed_out, output=t.output, restarted=t.restarted)
print("RESULT " + json.dumps(out), flush=True)
"""


def test_a_box_starts_with_default_signals_whatever_the_host_ignores(provider_case: ProviderCase) -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cfg = {"provider": provider_case.provider, "runtime": provider_case.runtime}
    r = subprocess.run([sys.executable, "-c", HOST, json.dumps(cfg)], capture_output=True, text=True,
                       timeout=600, env=env, stdin=subprocess.DEVNULL, check=False)
    lines = [x for x in r.stdout.splitlines() if x.startswith("RESULT ")]
    assert r.returncode == 0 and lines, r.stdout[-2000:] + r.stderr[-3000:]
    got = json.loads(lines[-1][len("RESULT "):])
    if provider_case.runtime != "runsc":  # gVisor's /proc/PID/status has no Sig* lines
        assert got["status"].split() == ["SigBlk:", "0000000000000000", "SigIgn:", "0000000000000000"], got
    assert got["kill_int"] == 130, got
    assert got["timed_out"] and not got["restarted"], got
    assert "partial-1" in got["output"] and "never-2" not in got["output"], got


def test_the_suite_undoes_the_signal_dispositions_it_inherits() -> None:
    # conftest.default_signal_dispositions, as pytest_configure runs it: the harnesses the tests start
    # and interrupt must get SIGINT at its default even when the suite was started with it ignored
    probe = ("import signal, subprocess, sys\n"
             "signal.signal(signal.SIGINT, signal.SIG_IGN); signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
             "signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR2])\n"
             "from tests.conftest import default_signal_dispositions\n"
             "default_signal_dispositions()\n"
             "assert signal.getsignal(signal.SIGINT) is signal.default_int_handler\n"
             "r = subprocess.run(['sh', '-c', 'grep -E \"^Sig(Ign|Blk)\" /proc/self/status; kill -INT $$'],\n"
             "                   capture_output=True, text=True)\n"
             "print(r.returncode, r.stdout.split())\n")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=REPO,
                         timeout=120, check=True).stdout.split(None, 1)
    assert out[0] == "-2"  # the child died of SIGINT
    assert out[1].strip() == "['SigBlk:', '0000000000000000', 'SigIgn:', '0000000000000000']", out
