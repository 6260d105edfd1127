"""A used box reset to a fresh one (``Sandbox.reset``, ``SandboxPool.release``), for every provider case:
nothing of its last user is left — processes (background jobs, setsid/nohup daemons, an EXIT trap's),
files in every writable place, System V IPC objects, shell state, workspace — and the box still works
(its warden sweeps a timed-out command, its gateway answers)."""

from __future__ import annotations

import os
import re
import resource
import time

import pytest

from fte_shell import Sandbox, SandboxConfig
from fte_shell.errors import SandboxError
from fte_shell.sandbox import SandboxPool
from fte_shell.sandbox.reset import DEV_LINKS, RESET_PRELUDE, refusal
from fte_shell.sandbox.session import ShellSession
from fte_shell.sandbox.warden_shell import root_reachable
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
setsid bash -c 'while :; do for p in /dev/pts/[0-9]*; do printf "\n__FTE_WIPED\n__FTE_READY_x 1 1\n" >"$p"; done; done' >/dev/null 2>&1 </dev/null &
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
    # the warden starts a shell only for a new request of the host's: the agent's signal starts none
    assert psb.run("kill -USR1 1; sleep 0.5; ps -eo args --no-headers | grep -c '[-]-noediting'").output == "1\n"
    # the box still works: the gateway answers, the warden sweeps a timed-out command, state persists
    assert psb.run("test -S /run/fte/gw.sock && echo socket").output == "socket\n"
    assert psb.run("export KEEP=1; cd /tmp").exit_code == 0
    obs = psb.run("sleep 30", timeout=1)
    assert obs.timed_out
    assert psb.run("echo $KEEP $PWD").output == "1 /tmp\n"


IDENT = r"""
env | grep -v -e '^_=' -e '^OLDPWD=' | sort; umask
grep -E '^(Uid|Gid|Groups|Sig(Blk|Ign|Cgt)|Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp|Cpus_allowed_list|Mems_allowed_list|Umask)' /proc/$$/status
cat /proc/$$/limits /proc/$$/cgroup /proc/$$/oom_score_adj /proc/$$/coredump_filter /proc/$$/attr/current 2>/dev/null
ps -o stat=,nice=,cls=,pri= -p $$; ps -o tty= -p $$ | tr -d 0-9; stty -a </dev/tty
echo "sid=$(ps -o sid= -p $$ | tr -d ' ') pid=$$ ppid=$PPID"
"""


def ident(sb: Sandbox) -> tuple[str, str]:
    """What makes the session shell's process what it is (environment, credentials, signals, limits,
    cgroup, scheduling, terminal), checked to lead its session; and its parent's pid."""
    body, ids = sb.run(IDENT).output.rstrip("\n").rsplit("\n", 1)
    sid, pid, ppid = (f.split("=")[1].strip() for f in ids.split())
    assert sid == pid, ids
    # Two differences of how the process is seen, not of what it may do. bwrap: the warden's child is in
    # the box's cgroup namespace (its root where the warden was at the box's start), the entered shell in
    # the host's: one cgroup, two paths to it. podman: `podman run` gives the box's process its primary
    # group as a supplementary one too, `podman exec` does not.
    body = re.sub(r"(?m)^(\d+:[\w,]*:)(/\.\.)+/", r"\1/", body)
    gid = re.search(r"(?m)^Gid:\t(\d+)", body)
    assert gid is not None
    return re.sub(rf"(?m)^Groups:\t(?:{gid[1]})? *$", "Groups:\t", body), ppid


def test_the_shell_a_reset_starts_is_what_the_engine_starts(provider_case: ProviderCase) -> None:
    """Where this process can reach into the box (root; runc or bwrap) the reset's shell is started by the
    warden, not the engine (no exec): the same process for the agent but its parent (the warden, PID 1,
    where the engine's comes from outside the box)."""
    if refused(provider_case):
        return
    with Sandbox(provider_case.config()) as sb:
        fresh, fresh_ppid = ident(sb)
        # what the agent can change of its shell's process that a new process of its own would not undo
        sb.run("ulimit -S -n 64; umask 077; renice -n 5 $$ >/dev/null; stty tostop </dev/tty; exec 7>/tmp/x")
        sb.reset()
        again, ppid = ident(sb)
        reachable = root_reachable(sb.box) is not None
    assert again == fresh
    assert fresh_ppid == "0"
    assert ppid == ("1" if reachable else "0")
    if os.geteuid() == 0:
        assert ppid == "1", "as root the warden starts the reset's shell"


def test_the_engine_starts_the_reset_shell_where_the_warden_cannot(docker_ready: None) -> None:
    """The reset's other way (a plain user, a remote daemon): the engine's exec runs the wipe, which ends
    the last user's processes itself; its shell starts only after the wipe's end line."""
    with Sandbox(SandboxConfig()) as sb:
        assert sb.run(DIRTY).output.strip().endswith("dirty")
        old, new = sb._session, ShellSession(sb.box, sb.config)
        new.start(RESET_PRELUDE)  # by the engine
        sb._session = new
        assert old is not None
        old.close()
        assert sb.run(CHECK).output == "cwd=/work leak=none umask=0022\nchecked\n"
        assert sb.run("echo $PPID").output == "0\n"


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


def test_a_trainer_holding_many_descriptors_resets_and_runs(provider_case: ProviderCase) -> None:
    """A trainer with hundreds of boxes holds descriptors numbered past 1024, where select() fails: the
    session, its command channel and the warden's shells wait on theirs with poll."""
    if refused(provider_case):
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
    held = [os.open("/dev/null", os.O_RDONLY) for _ in range(1100)]
    try:
        assert held[-1] > 1024
        with Sandbox(provider_case.config()) as sb:
            assert sb.run("echo one").output == "one\n"
            sb.reset()
            assert sb.run("echo two; head -c 200000 /dev/zero | tr '\\0' x | wc -c").output == "two\n200000\n"
            assert sb.run("sleep 30", timeout=1).timed_out
            assert sb.run("echo three").output == "three\n"
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
