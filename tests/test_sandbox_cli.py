"""``fte-shell shell`` (a person's terminal in a sandbox) and ``fte-shell sandbox doctor`` through the CLI."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pexpect
import pytest

from fte_shell.config import SandboxConfig
from fte_shell.sandbox.base import PROVIDERS
from fte_shell.sandbox.providers.docker import api as A
from fte_shell.sandbox.providers.docker import image as I

pytestmark = pytest.mark.docker


def _containers_of(pid: int) -> list[str]:
    return [
        c["Id"] for c in A.client().api.containers(all=True, filters={"label": f"fte-shell.owner-pid={pid}"})
    ]


def test_interactive_shell_runs_hardened_and_leaves_nothing(docker_ready: None) -> None:
    child = pexpect.spawn(sys.executable, ["-m", "fte_shell", "shell"], timeout=120, encoding="utf-8")
    try:
        child.expect("type exit to leave")
        child.expect(r"sandbox:/work\$ ")
        assert _containers_of(child.pid), "the sandbox container is missing"
        child.sendline("echo product=$((6*7)); id -u; touch /work/x")
        child.expect("product=42")
        child.expect("1000")
        child.expect("Read-only file system")
        child.sendline("exit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    assert _containers_of(child.pid) == []


def test_doctor_command_prints_every_check(docker_ready: None) -> None:
    I.forget(SandboxConfig())
    I.ensure_image(SandboxConfig())
    out = subprocess.run(
        [sys.executable, "-m", "fte_shell", "sandbox", "doctor"],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "250"},
    )
    assert out.returncode == 0, out.stdout + out.stderr
    summary, _, configured = out.stdout.partition("configured: docker")
    for name in ("daemon", "sandbox image", "non-root user", "read-only root", "no network", "limits"):
        assert name in configured
    assert "FAIL" not in configured
    # every provider is listed with whether it works here (setup-host.sh --tests set all of them up)
    row = re.compile(r"^│ ([a-z]+(?: \(runsc\))?) +│ (yes|no) ", re.MULTILINE)
    rows = {m.group(1).strip(): m.group(2) for m in row.finditer(summary)}

    assert set(PROVIDERS) <= set(rows), summary
    assert rows["docker"] == rows["docker (runsc)"] == rows["podman"] == "yes", summary
    assert rows["podman (runsc)"] == "no" and "flag provided but not defined: -tty" in summary, summary


def test_doctor_checks_the_provider_asked_for() -> None:
    """`sandbox doctor --sandbox-provider bwrap`: that provider's checks on a real box, not the overview."""
    out = subprocess.run([sys.executable, "-m", "fte_shell", "sandbox", "doctor", "--sandbox-provider", "bwrap"],
                         check=False, capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "250"})
    assert out.returncode == 0, out.stdout + out.stderr
    assert "asked for: bwrap" in out.stdout and "sandbox providers on this host" not in out.stdout
    for name in ("root file system", "non-root user", "read-only root", "no network", "the warden is PID 1"):
        assert name in out.stdout
    refused = subprocess.run([sys.executable, "-m", "fte_shell", "sandbox", "doctor", "--sandbox-runtime", "gvisor"],
                             check=False, capture_output=True, text=True, timeout=60,
                             env={**os.environ, "COLUMNS": "250"})
    assert refused.returncode == 2 and "Input should be 'runc' or 'runsc'" in refused.stderr


def test_shell_reads_commands_from_a_pipe(docker_ready: None) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "fte_shell", "shell"],
        input="echo piped-$((2+3)); id -u\n",
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert "piped-5\n1000\n" in out.stdout
