"""The session's transport: a terminal exec attached over the Docker API socket and driven by pexpect
(no ``docker`` client process), against the real daemon; and, for every provider case (tests/providers.py),
a dead shell restarted before the next command."""

from __future__ import annotations

import os
import time

import pexpect
import pytest

from fte_shell import Sandbox, SandboxConfig
from fte_shell.errors import SandboxError
from fte_shell.sandbox.providers.docker import container as C
from fte_shell.sandbox.providers.docker.api import start_tty_exec
from tests.providers import ProviderCase

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def sb(docker_ready: None):
    with Sandbox(SandboxConfig()) as box:
        yield box


@pytest.fixture(scope="module")
def psb(provider_case: ProviderCase):
    with Sandbox(provider_case.config()) as box:
        yield box


@pytest.mark.parametrize("via_sdk", [False, True], ids=["own-socket", "sdk-hijack"])
def test_a_tty_exec_is_driven_by_pexpect_and_reports_its_exit_code(sb: Sandbox, via_sdk: bool) -> None:
    ex = start_tty_exec(sb.container_id, ["bash", "--norc", "--noprofile"], "1000:1000", via_sdk=via_sdk)
    child = ex.child
    try:
        child.sendline("stty -echo; echo product=$((6*7)); tty")
        child.expect(rb"product=42\r?\n", timeout=60)
        child.expect(rb"/dev/pts/\d+", timeout=60)  # a real terminal in the container
        assert child.isalive()
        child.sendline("exit 5")
        child.expect(pexpect.EOF, timeout=60)
        assert not child.isalive()
        assert ex.exit_code() == 5
    finally:
        child.close()


def test_no_docker_client_process_per_session(sb: Sandbox) -> None:
    assert sb.run("echo hi").output == "hi\n"
    clients = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"docker") and sb.container_id.encode() in b" ".join(argv):
            clients.append(argv)
    assert clients == []


def test_a_shell_killed_between_commands_is_replaced_before_the_next_one_runs(psb: Sandbox) -> None:
    sb = psb
    sb.run("mkdir -p /tmp/idle && cd /tmp/idle && IDLE_VAR=1")
    obs = sb.run("(sleep 0.5; kill -9 $$) >/dev/null 2>&1 &")
    assert obs.exit_code == 0 and not obs.restarted
    for _ in range(100):  # until the background job has killed the shell (its terminal stream ends)
        if sb._session is not None and not sb._session.alive:
            break
        time.sleep(0.1)
    obs = sb.run('echo "ran in $PWD [$IDLE_VAR]"')
    assert obs.restarted and obs.output == "ran in /tmp/idle []\n"
    assert sb.run("echo again").output == "again\n"
    sb.run("cd /work")


def test_exec_in_a_removed_container_is_a_clear_error(docker_ready: None) -> None:
    with Sandbox(SandboxConfig()) as box:
        cid = box.container_id
    with pytest.raises(SandboxError, match="could not start a shell|refused the exec"):
        start_tty_exec(cid, ["bash"], "1000:1000")
    assert not C.is_running(cid)
