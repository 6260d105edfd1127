"""Container lifecycle against the real Docker daemon: hardening, labels, gc, dead-man TTL, concurrency,
cleanup on SIGTERM/SIGINT/exit, image content hash, doctor."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fte_shell import Sandbox, SandboxConfig
from fte_shell.sandbox import BoxSpec, get_provider
from fte_shell.sandbox import ownership as O
from fte_shell.sandbox.hardening import RUNSC_PIDS_HEADROOM
from fte_shell.sandbox.providers.docker import api as A
from fte_shell.sandbox.providers.docker import container as C
from fte_shell.sandbox.providers.docker import doctor as D
from fte_shell.sandbox.providers.docker import image as I
from tests.providers import ProviderCase, box_exists, box_inspect, box_labels, case_cannot, cgroup_v1, holds

pytestmark = pytest.mark.docker
REPO = Path(__file__).resolve().parent.parent


def _exists(cid: str, case: ProviderCase | None = None) -> bool:
    if case is not None and case.provider != "docker":
        return box_exists(case, cid)
    import docker.errors

    try:
        A.client().api.inspect_container(cid)
        return True
    except docker.errors.NotFound:
        return False


def _wait_gone(cid: str, seconds: float, case: ProviderCase | None = None) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _exists(cid, case):
            return True
        time.sleep(0.2)
    return False


@pytest.fixture
def box_dir() -> Iterator[Path]:
    """A directory a box's uid can reach (pytest's own are under a root-only parent: a bwrap box started
    by root runs as uid 1000 and must walk to its binds)."""
    d = Path(tempfile.mkdtemp(prefix="box-test-"))
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def hardened(provider_case: ProviderCase):
    os.environ["OPENAI_API_KEY"] = "sk-fake-must-not-leak"
    try:
        with Sandbox(provider_case.config(env={"MY_SETTING": "given"})) as sb:
            yield sb
    finally:
        os.environ.pop("OPENAI_API_KEY", None)


# --- hardening -----------------------------------------------------------------------------------------
def test_non_root_user(hardened: Sandbox) -> None:
    assert hardened.run("id -u; id -g").output == "1000\n1000\n"


def test_read_only_root_and_work(hardened: Sandbox, provider_case: ProviderCase) -> None:
    (hardened.workspace / "page.txt").write_text("from host\n")
    obs = hardened.run("touch /etc/x; touch /usr/x; touch /work/x; echo > /work/page.txt; cat /work/page.txt")
    refusal = "Permission denied" if provider_case.runtime == "runsc" else "Read-only file system"  # gVisor's word
    assert obs.output.count(refusal) == 4
    assert obs.output.endswith("from host\n")
    assert not (hardened.workspace / "x").exists()


def test_tmp_is_writable_and_size_capped(hardened: Sandbox) -> None:
    obs = hardened.run("df -k /tmp | tail -1; touch /tmp/ok && echo writable")
    size_kib = int(obs.output.split()[1])
    assert size_kib == 256 * 1024
    assert obs.output.endswith("writable\n")


def test_no_network_but_loopback(hardened: Sandbox) -> None:
    assert hardened.run("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '").output.split() == ["lo"]
    obs = hardened.run("python3 -c \"import socket; socket.create_connection(('1.1.1.1', 80), 2)\"")
    assert obs.exit_code != 0 and ("unreachable" in obs.output.lower() or "no route to host" in obs.output.lower())


def test_no_capabilities_and_no_new_privileges(hardened: Sandbox) -> None:
    obs = hardened.run("grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb)' /proc/self/status; "
                       "python3 -c 'import ctypes; print(\"NoNewPrivs:\\t%d\" % ctypes.CDLL(None).prctl(39, 0, 0, 0, 0))'")
    fields = dict(line.split(":\t") for line in obs.output.strip().splitlines())
    assert {"CapInh", "CapPrm", "CapEff", "CapBnd"} <= set(fields), obs.output  # (gVisor has no CapAmb line)
    for cap in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(fields.get(cap, "0"), 16) == 0, obs.output
    assert fields["NoNewPrivs"].strip() == "1"  # (prctl: gVisor's /proc/self/status has no such line)


def test_no_host_environment_leaks(hardened: Sandbox) -> None:
    env = hardened.run("env").output
    assert "sk-fake-must-not-leak" not in env and "OPENAI_API_KEY" not in env
    assert "MY_SETTING=given" in env
    assert "FTE_GATEWAY=/run/fte/gw.sock" in env
    assert "PATH=/opt/fte/bin:" in env and "HOME=/tmp" in env


def test_no_docker_socket_and_limits(hardened: Sandbox, provider_case: ProviderCase) -> None:
    if provider_case.provider != "docker":
        pytest.skip("Docker's HostConfig; every provider's limits are probed by test_sandbox's bombs")
    assert hardened.run("ls /var/run/docker.sock").exit_code == 2
    host = A.client().api.inspect_container(hardened.container_id)["HostConfig"]
    cfg = SandboxConfig()
    assert host["ReadonlyRootfs"] is True
    assert host["NetworkMode"] == "none"
    assert host["CapDrop"] == ["ALL"]
    assert any(o.startswith("no-new-privileges") for o in host["SecurityOpt"])
    assert host["PidsLimit"] == cfg.pids_limit + (RUNSC_PIDS_HEADROOM if provider_case.runtime == "runsc" else 0)
    assert host["Memory"] == host["MemorySwap"] == 1 << 30
    assert host["NanoCpus"] == int(cfg.cpus * 1e9)
    assert not host["Init"]  # the warden itself is PID 1 (protect_warden)
    binds = {b.split(":")[1]: b for b in host["Binds"]}
    assert binds["/work"].endswith(":ro") and binds["/run/fte"].endswith(":ro")


def test_the_engine_holds_the_memory_pids_and_cpu_limits(hardened: Sandbox, provider_case: ProviderCase) -> None:
    host = box_inspect(provider_case, hardened.container_id)["HostConfig"]
    cfg = SandboxConfig()
    if provider_case.rootless and cgroup_v1():  # the table's ✘: podman ignores the limits there
        assert "memory limit" in case_cannot(provider_case) and "cpu limit" in case_cannot(provider_case)
        assert not host.get("Memory") and not host.get("NanoCpus")
        return
    assert host["Memory"] == host["MemorySwap"] == 1 << 30
    assert host["PidsLimit"] == cfg.pids_limit + (RUNSC_PIDS_HEADROOM if provider_case.runtime == "runsc" else 0)
    assert host["NanoCpus"] == int(cfg.cpus * 1e9)


def test_labels(hardened: Sandbox, provider_case: ProviderCase) -> None:
    labels = box_labels(provider_case, hardened.container_id)
    assert labels["fte-shell"] == "1"
    assert labels["fte-shell.run-id"] == hardened.run_id
    assert labels["fte-shell.owner-pid"] == str(os.getpid())
    assert labels["fte-shell.owner-host"] == O.HOST
    assert abs(float(labels["fte-shell.created"]) - time.time()) < 3600
    assert labels["fte-shell.ttl"] == str(SandboxConfig().ttl_s)


def test_workspace_is_world_readable(hardened: Sandbox) -> None:
    assert oct(hardened.workspace.stat().st_mode & 0o777) == "0o755"
    assert oct(hardened.gateway_dir.stat().st_mode & 0o777) == "0o755"


# --- gc, TTL ---------------------------------------------------------------------------------------------
_ORPHAN = textwrap.dedent(
    """
    import json, os, sys
    from pathlib import Path
    from fte_shell.config import SandboxConfig
    from fte_shell.sandbox import BoxSpec, get_provider
    d = Path(sys.argv[1])
    cfg = SandboxConfig(provider=sys.argv[2], runtime=sys.argv[3])
    box = get_provider(cfg.provider).start(BoxSpec(cfg, d, d, "orphan-test", ttl_s=600))
    print(json.dumps(box.id), flush=True)
    os.kill(os.getpid(), 9)   # no cleanup at all, like a crashed harness
    """
)


def test_gc_removes_containers_whose_owner_is_dead(provider_case: ProviderCase, box_dir: Path) -> None:
    tmp_path = box_dir
    proc = subprocess.run(
        [sys.executable, "-c", _ORPHAN, str(tmp_path), provider_case.provider, provider_case.runtime],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == -9, proc.stderr
    cid = json.loads(proc.stdout)
    provider = get_provider(provider_case.provider)
    if provider_case.provider == "bwrap":  # the box died with its owner (--die-with-parent): nothing for gc
        assert _wait_gone(cid, 10, provider_case)
        return
    try:
        assert box_exists(provider_case, cid)  # SIGKILLed: nothing removed it
        assert "owner process" in (O.stale_reason(box_labels(provider_case, cid), "running") or "")
        res = provider.gc()  # (another process's gc may get there first: both count)
        assert _wait_gone(cid, 30, provider_case)
        assert all(reason for _, reason in res.removed)
    finally:
        if box_exists(provider_case, cid):
            provider.gc()


def test_gc_keeps_containers_of_live_owners(hardened: Sandbox) -> None:
    hardened.provider.gc()
    assert hardened.box.is_running()


def test_stale_reason_rules() -> None:
    now = time.time()
    me = O.owner_labels("r", 100)
    grace = O.START_GRACE_S
    assert O.stale_reason(me, "running", now) is None
    # the TTL counts from the start, which may come up to the start grace after the label
    assert O.stale_reason(me, "running", now + 100 + grace / 2) is None
    assert O.stale_reason(me, "running", now + 100 + grace + 1) == "its TTL has passed"
    assert O.stale_reason(me, "exited", now) == "it is exited"
    # a live owner's container that is being created or started is left alone for the grace period,
    # even past a short TTL (a loaded host can take longer to start it than the TTL)
    assert O.stale_reason(me, "created", now) is None
    assert O.stale_reason(me, "created", now + 200) is None
    long = O.owner_labels("r", 3600)
    assert O.stale_reason(long, "created", now + grace - 1) is None
    assert O.stale_reason(long, "created", now + grace + 1) == "it was created but never started"
    dead = dict(me, **{"fte-shell.owner-pid": "999999999"})
    assert "is gone" in (O.stale_reason(dead, "running", now) or "")
    assert "is gone" in (O.stale_reason(dead, "created", now) or "")  # a dead owner never starts it
    reused = dict(me, **{"fte-shell.owner-start": "1"})  # same pid, other process: pid reuse
    assert "is gone" in (O.stale_reason(reused, "running", now) or "")
    other_host = dict(dead, **{"fte-shell.owner-host": "elsewhere"})
    assert O.stale_reason(other_host, "running", now) is None


def test_gc_leaves_a_live_owners_starting_container_alone(docker_ready: None, tmp_path: Path) -> None:
    kwargs = C.container_kwargs(SandboxConfig(), tmp_path, tmp_path, "starting", ttl_s=1)
    kwargs["labels"][f"{O.LABEL}.created"] = f"{time.time() - 30:.3f}"  # a slow start, past a short TTL
    cid = A.client().containers.create(**kwargs).id  # "created": this process is about to start it
    try:
        res = C.gc()
        assert _exists(cid)
        assert kwargs["name"] not in [name for name, _ in res.removed]
        cli = subprocess.run(
            [sys.executable, "-m", "fte_shell", "sandbox", "gc"],
            check=False,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert cli.returncode == 0, cli.stderr
        assert kwargs["name"] not in cli.stdout and _exists(cid)
    finally:
        C.remove(cid)
    assert not _exists(cid)


def test_dead_man_ttl_stops_the_container_by_itself(provider_case: ProviderCase, box_dir: Path) -> None:
    # The owner stays alive (so no gc may remove it) and never removes it: only the warden's timer can
    # end it, as it does after a SIGKILLed harness. It exits with status 0 (a removal would give 137).
    tmp_path = box_dir
    since = int(time.time()) - 1
    provider = get_provider(provider_case.provider)
    box = provider.start(BoxSpec(provider_case.config(), tmp_path, tmp_path, "dead-man", ttl_s=2))
    cid = box.id
    try:
        assert _wait_gone(cid, 120, provider_case), "the box outlived its TTL"
        if provider_case.provider == "docker":
            events = A.client().events(
                since=since, until=int(time.time()) + 1, filters={"container": cid, "event": "die"}, decode=True
            )
            assert [e["Actor"]["Attributes"]["exitCode"] for e in events] == ["0"]
    finally:
        box.stop()


# --- concurrency -----------------------------------------------------------------------------------------
def test_concurrent_sandboxes_each_see_only_their_own_work(docker_ready: None) -> None:
    n = 4
    results: dict[int, str] = {}
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            with Sandbox(SandboxConfig()) as sb:
                (sb.workspace / f"mine-{i}.txt").write_text(f"sandbox {i}\n")
                for _ in range(5):
                    sb.run(f"echo {i}")
                results[i] = sb.run("ls /work; cat /work/*.txt").output
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    assert not errors, errors
    for i in range(n):
        assert results[i] == f"mine-{i}.txt\nsandbox {i}\n"


# --- cleanup on signals and exit ----------------------------------------------------------------------------
_HOLDER = textwrap.dedent(
    """
    import sys, threading, time
    from fte_shell import Sandbox, SandboxConfig
    cfg = SandboxConfig(provider=sys.argv[2], runtime=sys.argv[3])
    boxes = []
    if sys.argv[1] == "thread-first":  # the first sandbox of the process comes from a worker thread
        t = threading.Thread(target=lambda: boxes.append(Sandbox(cfg)))
        t.start()
        t.join()
    boxes.append(Sandbox(cfg))
    print(" ".join(f"{b.container_id}|{b.workspace.parent}" for b in boxes), flush=True)
    if sys.argv[1] == "exit":
        sys.exit(0)          # no close(): atexit must remove it
    time.sleep(300)
    """
)


@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT", "exit", "thread-first"])
def test_container_removed_when_the_harness_ends(provider_case: ProviderCase, how: str) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, how, provider_case.provider, provider_case.runtime], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        pairs = [p.split("|") for p in proc.stdout.readline().split()]
        assert pairs, proc.stderr.read() if proc.stderr else ""
        cids = [c for c, _ in pairs]
        tmps = [Path(t) for _, t in pairs]
        assert all((t / O.OWNER_FILE).exists() for t in tmps)
        if how != "exit":
            assert all(_exists(c, provider_case) for c in cids)
            proc.send_signal(signal.SIGINT if how == "SIGINT" else signal.SIGTERM)
        proc.wait(60)
        for cid in cids:
            assert not _exists(cid, provider_case) or _wait_gone(cid, 10, provider_case)
        assert not any(t.exists() for t in tmps)  # the temporary directories went too
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


_EMBEDDED = textwrap.dedent(
    """
    import signal, sys
    from fte_shell import Sandbox, SandboxConfig
    def host(signum, frame):
        pass
    if sys.argv[1] == "host":
        signal.signal(signal.SIGTERM, host)
    with Sandbox(SandboxConfig(provider=sys.argv[2], runtime=sys.argv[3])) as sb:
        assert sb.run("echo ok").output.strip() == "ok"
        term, intr = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    print(getattr(term, "__name__", term), getattr(intr, "__name__", intr))
    """
)


def test_a_box_takes_no_signal_its_host_program_handles(provider_case: ProviderCase) -> None:
    """Embedded: a host's own SIGTERM handler stays in place, and SIGINT stays Python's (KeyboardInterrupt
    unwinds the with-block); only an unhandled SIGTERM (the default) gets the sandbox's clean exit."""
    for mode, want in (("host", "host default_int_handler"), ("plain", "exit_on_sigterm default_int_handler")):
        out = subprocess.run([sys.executable, "-c", _EMBEDDED, mode, provider_case.provider, provider_case.runtime],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout.split("\n")[-2] == want, (mode, out.stdout, out.stderr)


def test_exception_inside_with_removes_the_container(docker_ready: None) -> None:
    cid = ""
    with pytest.raises(RuntimeError), Sandbox(SandboxConfig()) as sb:
        cid = sb.container_id
        raise RuntimeError("boom")
    assert cid and not _exists(cid)


def test_keep_workspace_and_given_workspace(docker_ready: None, tmp_path: Path) -> None:
    with Sandbox(SandboxConfig(keep_workspace=True)) as sb:
        kept = sb.workspace
    assert kept.is_dir()
    import shutil

    shutil.rmtree(kept.parent)
    given = tmp_path / "ws"
    with Sandbox(SandboxConfig(workspace_dir=given)) as sb:
        (given / "f.txt").write_text("x")
        assert sb.run("cat /work/f.txt").output == "x"
    assert (given / "f.txt").exists()


def test_root_user_is_refused(docker_ready: None) -> None:
    from fte_shell.errors import SandboxError

    with pytest.raises(SandboxError, match="root"):
        Sandbox(SandboxConfig(user="0:0"))


# --- image and doctor ---------------------------------------------------------------------------------------
def test_image_is_labelled_with_the_content_hash(docker_ready: None) -> None:
    cfg = SandboxConfig()
    I.ensure_image(cfg, force=False)
    I.forget(cfg)  # another process may change sandbox/bin meanwhile: check the files of now
    image_id = I.ensure_image(cfg)
    ok, reason = I.IMAGES.status(cfg)
    assert ok, reason
    img = A.client().images.get(image_id)  # (cfg.image may name another checkout's build since)
    assert img.labels[I.HASH_LABEL] == I.content_hash(cfg)
    other = I.content_hash(SandboxConfig(base_image="debian:other"))
    assert other != I.content_hash(cfg)


def test_containers_use_the_image_this_process_checked(docker_ready: None) -> None:
    import uuid

    cfg = SandboxConfig(image=f"fte-shell-sandbox:test-{uuid.uuid4().hex[:8]}")
    image_id = I.ensure_image(cfg)
    try:
        with Sandbox(cfg) as sb:
            assert A.client().api.inspect_container(sb.container_id)["Image"] == image_id
        # the tag moves to another image (another process rebuilt it from other build inputs): this
        # process keeps creating containers from the image it checked
        A.client().images.get(cfg.base_image).tag(cfg.image)
        with Sandbox(cfg) as sb:
            assert A.client().api.inspect_container(sb.container_id)["Image"] == image_id
            assert sb.run("test -f /opt/fte/lib/warden.sh && echo ok").output == "ok\n"
    finally:
        I.forget(cfg)
        A.client().images.remove(cfg.image)  # the tag only
        if not A.client().images.get(image_id).tags:  # built just for this test (no cache): dangling now
            A.client().images.remove(image_id)


def test_checkouts_with_other_sandbox_inputs_share_an_engine_without_rebuilding_in_turn(docker_ready: None) -> None:
    import uuid

    from fte_shell.sandbox.image_inputs import CheckedImages, content_tag, repo_and_tag

    cfg = SandboxConfig(image=f"fte-shell-sandbox-{uuid.uuid4().hex[:8]}:latest")
    image_id = I.ensure_image(cfg)
    names = [cfg.image, content_tag(cfg)]
    try:
        assert A.client().images.get(content_tag(cfg)).id == image_id  # the build's own tag
        # another checkout (other sandbox/ files) builds cfg.image: the tag moves to its image
        A.client().api.tag(cfg.base_image, *repo_and_tag(cfg.image))
        said: list[str] = []
        fresh = CheckedImages(I.DockerImages())  # a new process of the first checkout
        assert fresh.ensure(cfg, log=said.append) == image_id
        assert said == []  # nothing built: found by its content tag
        A.client().images.remove(cfg.image)  # a checkout whose cfg.image is gone names it again
        assert CheckedImages(I.DockerImages()).ensure(cfg, log=said.append) == image_id and said == []
        assert A.client().images.get(cfg.image).id == image_id
    finally:
        I.forget(cfg)
        for name in names:
            with contextlib.suppress(Exception):
                A.client().images.remove(name)  # the tags only (the layers are the shared image's)


def test_doctor_reports_every_check_ok(docker_ready: None) -> None:
    I.forget(SandboxConfig())
    I.ensure_image(SandboxConfig())
    checks = D.doctor(SandboxConfig())
    names = [c.name for c in checks]
    assert {"daemon", "sandbox image", "non-root user", "read-only root", "no network", "limits"} <= set(
        names
    )
    assert all(c.ok for c in checks), [(c.name, c.detail) for c in checks if not c.ok]


def test_cli_gc_and_doctor(docker_ready: None) -> None:
    env = dict(os.environ)
    out = subprocess.run(
        [sys.executable, "-m", "fte_shell", "sandbox", "gc"],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0 and "removed" in out.stdout
    out = subprocess.run(
        [sys.executable, "-m", "fte_shell", "sandbox", "build"],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert out.returncode == 0 and "up to date" in out.stdout


def test_odd_run_ids_make_valid_container_names(docker_ready: None) -> None:
    with Sandbox(SandboxConfig(), run_id="q/7 été: what?") as sb:
        labels = A.client().api.inspect_container(sb.container_id)["Config"]["Labels"]
        assert labels["fte-shell.run-id"] == "q/7 été: what?"
        assert sb.run("echo ok").output == "ok\n"


def test_asyncio_sandboxes_run_concurrently(docker_ready: None) -> None:
    import asyncio

    async def one(i: int) -> str:
        box = await asyncio.to_thread(Sandbox, SandboxConfig())
        try:
            (box.workspace / f"a{i}.txt").write_text(str(i))
            obs = await box.arun("sleep 1; cat /work/*.txt")
            return obs.output
        finally:
            await asyncio.to_thread(box.close)

    async def main() -> list[str]:
        return await asyncio.gather(*(one(i) for i in range(3)))

    assert asyncio.run(main()) == ["0", "1", "2"]


def test_a_forked_child_does_not_remove_the_parents_containers(hardened: Sandbox) -> None:
    pid = os.fork()
    if pid == 0:  # child: what its exit paths would do (atexit, signal handler, __del__/close)
        try:
            hardened.provider.stop_all()
            from fte_shell.sandbox import facade as S

            S._close_open_sandboxes()
            hardened.close()
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert hardened.box.is_running()
    assert hardened.run("echo ok").output == "ok\n"


def test_the_agent_cannot_kill_the_warden(hardened: Sandbox, provider_case: ProviderCase) -> None:
    holds(provider_case, "warden protected")
    obs = hardened.run(
        "pkill -f warden; pkill -9 -f warden; kill -TERM 1; kill -INT 1; kill -HUP 1; kill -SEGV 1; "
        "kill -ALRM 1; kill -USR2 1; kill -CHLD 1; kill -USR1 1; kill -9 -1; echo done"
    )
    assert obs.output.endswith("done\n") and not obs.restarted
    assert hardened.box.is_running()
    assert hardened.run("ps -o pid=,args= -p 1").output.split()[:3] == [
        "1",
        "bash",
        "/opt/fte/lib/warden.sh",
    ]
    assert hardened.run("sleep 30", timeout=1).timed_out  # the warden still enforces timeouts
    assert hardened.run("echo alive").output == "alive\n"


def test_orphaned_zombies_are_reaped(hardened: Sandbox) -> None:
    hardened.run("for i in 1 2 3 4 5; do (sleep 0.1 &); done; sleep 0.6")
    assert hardened.run("ps -eo stat= | grep -c '^Z' || true").output == "0\n"


def test_docker_init_when_the_warden_is_not_protected(docker_ready: None) -> None:
    with Sandbox(SandboxConfig(protect_warden=False)) as sb:
        host = A.client().api.inspect_container(sb.container_id)["HostConfig"]
        assert host["Init"] is True
        assert "docker-init" in sb.run("ps -o args= -p 1").output
        obs = sb.run("echo a; sleep 30; echo b", timeout=1)
        assert obs.timed_out and obs.output == "a\n"
        assert sb.run("echo ok").output == "ok\n"


def test_gc_dirs_removes_only_dead_owners_unkept_dirs(tmp_path: Path) -> None:
    def make(name: str, owner: str) -> Path:
        d = tmp_path / name
        d.mkdir()
        (d / "work").mkdir()
        (d / O.OWNER_FILE).write_text(owner)
        return d

    me = f"{os.getpid()} {O._proc_start(os.getpid())} {O.HOST}"
    dead = make("fte-dead-1", f"999999999 1 {O.HOST} 0\n")
    kept = make("fte-kept-1", f"999999999 1 {O.HOST} 1\n")
    live = make("fte-live-1", f"{me} 0\n")
    other = make("fte-other-1", "999999999 1 elsewhere 0\n")
    foreign = tmp_path / "fte-foreign"  # no owner file: not ours to judge
    foreign.mkdir()
    unrelated = make("other-dead", f"999999999 1 {O.HOST} 0\n")
    assert O.gc_dirs(tmp_path) == 1
    assert not dead.exists()
    assert kept.exists() and live.exists() and other.exists() and foreign.exists() and unrelated.exists()


def test_kept_workspace_is_not_marked_for_gc(docker_ready: None) -> None:
    import shutil

    with Sandbox(SandboxConfig(keep_workspace=True)) as sb:
        owner = (sb.workspace.parent / O.OWNER_FILE).read_text().split()
        assert owner[0] == str(os.getpid()) and owner[3] == "1"
    assert sb.workspace.is_dir() and not (sb.workspace.parent / O.OWNER_FILE).exists()
    shutil.rmtree(sb.workspace.parent)


def test_close_while_a_command_runs(docker_ready: None) -> None:
    from fte_shell.errors import SandboxError

    sb = Sandbox(SandboxConfig())
    errors: list[BaseException] = []
    started = threading.Event()

    def worker() -> None:
        started.set()
        try:
            sb.run("sleep 30", timeout=60)
        except SandboxError as e:
            errors.append(e)

    t = threading.Thread(target=worker)
    t.start()
    started.wait()
    time.sleep(0.5)  # let the command start (no assertion depends on this)
    cid = sb.container_id
    sb.close()
    t.join(60)
    assert not t.is_alive()
    assert errors and "closed" in str(errors[0])
    assert not _exists(cid)


def test_prune_images_removes_superseded_sandbox_images_only(docker_ready: None) -> None:
    """An untagged image labelled as a sandbox image (what a rebuild leaves) is pruned; the current
    image and unlabelled images stay."""
    import io

    client = A.client()
    dockerfile = f"FROM {SandboxConfig().base_image}\nLABEL probe=prune-test\n".encode()
    ctx = io.BytesIO()
    import tarfile

    with tarfile.open(fileobj=ctx, mode="w") as tar:
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile)
        tar.addfile(info, io.BytesIO(dockerfile))
    ctx.seek(0)
    old, _ = client.images.build(fileobj=ctx, custom_context=True, labels={f"{O.LABEL}.image": "1"}, rm=True)
    assert old.tags == []  # dangling, like the image a rebuild untags
    removed, _ = I.prune_images()
    assert removed >= 1
    remaining = {img.id for img in client.images.list(filters={"dangling": True, "label": f"{O.LABEL}.image=1"})}
    assert old.id not in remaining
    client.images.get(SandboxConfig().image)  # the current image is still there
    client.images.get(SandboxConfig().base_image)
