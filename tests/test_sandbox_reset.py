"""A used box reset to a fresh one (``Sandbox.reset``, ``SandboxPool.release``), for every provider case:
nothing of its last user is left — processes (background jobs, setsid/nohup daemons, an EXIT trap's),
files in every writable place, System V IPC objects, shell state, workspace — and the box still works
(its warden sweeps a timed-out command, its gateway answers)."""

from __future__ import annotations

import time

import pytest

from fte_shell import Sandbox, SandboxConfig
from fte_shell.errors import SandboxError
from fte_shell.sandbox import SandboxPool
from fte_shell.sandbox.reset import DEV_LINKS, refusal
from tests.providers import ProviderCase, box_exists

DIRTY = r"""
cd /tmp && mkdir -p deep/er && echo x > deep/er/f && chmod 000 deep/er deep && echo h > .hidden
echo s > /dev/shm/seg; echo r > /opt/fte/run/junk; touch /dev/junk /dev/new$'\n'line 2>/dev/null
rm -f /dev/stdin 2>/dev/null; ln -s /tmp/.hidden /dev/stdin 2>/dev/null
ipcmk -M 4096 >/dev/null
setsid sleep 1001 >/dev/null 2>&1 < /dev/null &
nohup sleep 1002 >/dev/null 2>&1 &
(sleep 1003 &)
export LEAK=1; leak() { echo leaked; }; alias leaky='echo leaked'; set -o noclobber; umask 077
trap 'setsid sleep 1004 >/dev/null 2>&1 < /dev/null &' EXIT
cd /tmp/.. && cd /opt
echo dirty
"""

CHECK = r"""
echo "cwd=$PWD leak=${LEAK-none} umask=$(umask)"; type leak leaky >/dev/null 2>&1 && echo functions-left
set -o | grep -q 'noclobber *on' && echo noclobber-left; trap -p EXIT
find /tmp /dev/shm -mindepth 1; ls -A /opt/fte/run | grep -v -x -e state -e 'o\.[0-9]*'
ps -eo pid,stat,args --no-headers | grep -v -e ' ps -eo' -e ' grep ' -e 'warden.sh' -e 'bash --norc' | grep -v -e '^ *[0-9]* Z'
tail -n +2 /proc/sysvipc/shm
echo checked
"""


def gone(case: ProviderCase, box_id: str) -> bool:
    """The box is gone (a bwrap box's killed warden may take a moment to be reaped by the host)."""
    deadline = time.monotonic() + 30
    while box_exists(case, box_id):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


@pytest.fixture(scope="module")
def psb(provider_case: ProviderCase):
    with Sandbox(provider_case.config()) as box:
        yield box


def refused(case: ProviderCase) -> bool:
    """The case's boxes cannot be reset (gVisor): a reset is refused, a released box removed."""
    why = refusal(case.config())
    if why is None:
        return False
    with Sandbox(case.config()) as sb, pytest.raises(SandboxError, match="cannot be reset"):
        sb.reset()
    with SandboxPool(case.config(), size=1) as pool:
        sb = pool.acquire()
        assert not pool.release(sb) and gone(case, sb.container_id)
    return True


def test_a_reset_box_keeps_nothing_of_its_last_user_and_still_works(psb: Sandbox,
                                                                     provider_case: ProviderCase) -> None:
    if refused(provider_case):
        return
    assert psb.run(DIRTY).output.strip().endswith("dirty")
    (psb.workspace / "page.md").write_text("a page of the last user")
    (psb.workspace / "sub").mkdir()
    assert "sleep 1001" in psb.run("ps -eo args").output
    box_id = psb.container_id
    psb.reset()
    assert psb.container_id == box_id and psb.resets == 1 and box_exists(provider_case, box_id)
    out = psb.run(CHECK).output
    assert out == "cwd=/work leak=none umask=0022\nchecked\n", out
    assert list(psb.workspace.iterdir()) == []
    dev = psb.run("ls -A /dev; readlink /dev/stdin").output.split()
    assert "junk" not in dev and "new" not in dev and dev[-1] == "/proc/self/fd/0", dev
    if provider_case.provider == "bwrap":  # its /dev is the box user's: mended, not just emptied
        assert set(DEV_LINKS) <= set(dev), dev
    # the box still works: the gateway answers, the warden sweeps a timed-out command, state persists
    assert psb.run("test -S /run/fte/gw.sock && echo socket").output == "socket\n"
    assert psb.run("export KEEP=1; cd /tmp").exit_code == 0
    obs = psb.run("sleep 30", timeout=1)
    assert obs.timed_out
    assert psb.run("echo $KEEP $PWD").output == "1 /tmp\n"


def test_a_reset_is_refused_where_it_cannot_make_a_box_fresh(docker_ready: None, tmp_path) -> None:
    # Docker alone: the refusal comes before the box is touched, whatever the provider
    with Sandbox(SandboxConfig(read_only_root=False)) as sb, pytest.raises(SandboxError, match="read_only_root"):
        sb.reset()
    with Sandbox(SandboxConfig(workspace_dir=tmp_path)) as sb, pytest.raises(SandboxError, match="caller's"):
        sb.reset()


def test_the_pool_hands_a_released_box_out_again_reset(provider_case: ProviderCase) -> None:
    if refused(provider_case):
        return
    with SandboxPool(provider_case.config(), size=1) as pool:
        a = pool.acquire(run_id="first")
        a.run("echo mine > /tmp/mine; export MINE=1")
        box_id = a.container_id
        assert pool.release(a)
        b = pool.acquire(run_id="second")
        try:
            assert b is a and b.container_id == box_id and pool.reused == 1 and b.run_id == "second"
            assert b.gateway is not None
            assert b.run("ls -A /tmp; echo ${MINE-none}").output == "none\n"
        finally:
            b.close()
        assert not pool.release(b)  # closed: not taken back
        old = pool.acquire()
        old.born -= provider_case.config().ttl_s  # past half its dead-man TTL: removed, not kept
        assert not pool.release(old) and gone(provider_case, old.container_id)
        d = pool.acquire()
    assert not pool.release(d)  # the pool closed meanwhile: the box is removed, not kept
    assert gone(provider_case, d.container_id)
