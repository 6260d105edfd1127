"""SandboxPool: sandboxes started ahead of need, handed out ready, refilled in the background."""

from __future__ import annotations

import pytest

from fte_shell import SandboxConfig
from fte_shell.errors import SandboxError
from fte_shell.sandbox import SandboxPool
from fte_shell.sandbox.providers.docker import api as A

pytestmark = pytest.mark.docker


def _exists(cid: str) -> bool:
    import docker.errors

    try:
        A.client().api.inspect_container(cid)
        return True
    except docker.errors.NotFound:
        return False


def test_pool_hands_out_ready_isolated_sandboxes_and_refills(docker_ready: None) -> None:
    with SandboxPool(SandboxConfig(), size=2) as pool:
        assert pool.wait_ready()
        waiting = [sb.container_id for _, sb in pool._ready]
        a = pool.acquire(run_id="question-a")
        b = pool.acquire(run_id="question-b")
        # a: one that was waiting; b: the other waiting one, or the filler's replacement of a when that came
        # first (acquire hands out the newest)
        assert a.container_id in waiting and b.container_id != a.container_id
        assert a.run_id == "question-a" and a.gateway is not None
        assert a.run("test -S /run/fte/gw.sock && echo socket").output == "socket\n"
        (a.workspace / "only-a.txt").write_text("a")
        assert a.run("ls /work; pwd").output == "only-a.txt\n/work\n"
        assert b.run("ls /work").output == ""
        assert a.workspace != b.workspace
        assert pool.wait_ready()  # the filler started replacements
        a.close()
        b.close()
        assert not _exists(a.container_id) and not _exists(b.container_id)
        left = [sb.container_id for _, sb in pool._ready]
    for cid in left:  # closing the pool removes what was not handed out
        assert not _exists(cid)


def test_pool_starts_one_at_once_when_none_is_waiting(docker_ready: None) -> None:
    with SandboxPool(SandboxConfig(), size=1) as pool:
        first = pool.acquire()
        second = pool.acquire()  # the filler may not have a replacement yet: started here then
        try:
            assert first.container_id != second.container_id
            assert second.run("echo ok").output == "ok\n"
        finally:
            first.close()
            second.close()
    with pytest.raises(SandboxError, match="closed"):
        pool.acquire()


def test_pool_refuses_a_fixed_workspace(tmp_path) -> None:
    with pytest.raises(SandboxError, match="workspace_dir"):
        SandboxPool(SandboxConfig(workspace_dir=tmp_path))
    with pytest.raises(SandboxError, match="at least 1"):
        SandboxPool(SandboxConfig(), size=0)


def test_a_box_given_back_is_handed_out_before_its_later_replacement(docker_ready: None, monkeypatch) -> None:
    """The filler starts a replacement while a box is out; when the box comes back (reset) before the
    replacement is up, the next acquire still gets the box given back, not the fresh one that came in after."""
    import threading

    from fte_shell.sandbox import pool as P

    gate = threading.Event()
    gate.set()

    class Gated(P.Sandbox):  # a real box, started only once the gate is open
        def __init__(self, *a, **kw) -> None:
            gate.wait()
            super().__init__(*a, **kw)

    monkeypatch.setattr(P, "Sandbox", Gated)
    with SandboxPool(SandboxConfig(), size=1) as pool:
        assert pool.wait_ready(1)
        gate.clear()  # the filler's replacement waits until the box is back
        box = pool.acquire(run_id="first")
        assert box.run("echo hi > /tmp/left").output == ""
        assert pool.release(box)
        assert [b for _, b in pool._ready] == [box]
        gate.set()
        assert pool.wait_ready(2)
        fresh = next(b for _, b in pool._ready if b is not box)
        assert [b for _, b in pool._ready] == [box, fresh]  # the replacement came in last
        again = pool.acquire(run_id="second")
        try:
            assert again is box and pool.reused == 1
            assert again.run("ls -A /tmp").output == ""
        finally:
            again.close()
