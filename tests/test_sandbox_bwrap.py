"""The bwrap provider's own behaviour, on real bubblewrap boxes: the root file system cache, the limits
(cgroups as root or with a delegated cgroup, else rlimits) enforced as describe() says, no network, the
gateway reachable, the process tree killed on timeout, nothing left after SIGKILL of the host process,
and all of it as the plain user ``ftetest`` (uid 1500) who cannot reach the Docker daemon."""

from __future__ import annotations

import hashlib
import io
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fte_shell import Sandbox, SandboxConfig
from fte_shell.config import BwrapConfig, FetchPolicy
from fte_shell.errors import SandboxError
from fte_shell.sandbox import get_provider
from fte_shell.sandbox.providers.bwrap import rootfs as R
from tests.conftest import IN_CI
from tests.servers import LoopbackServer

REPO = Path(__file__).resolve().parent.parent
TEST_USER = "ftetest"
DELEGATED = "fte-test-delegated"
"""The cgroup (in each v1 controller, or the v2 tree) this module delegates to the test user."""


def _fail_or_skip(msg: str) -> None:
    if IN_CI:
        pytest.fail(msg)
    pytest.skip(msg)


@pytest.fixture(scope="module")
def tree() -> R.Rootfs:
    """The sandbox image's tree in the cache (exported from Docker the first time)."""
    why = get_provider("bwrap").probe()
    if why:
        _fail_or_skip(f"bwrap cannot run here: {why}")
    try:
        return R.ensure(SandboxConfig(provider="bwrap"))
    except Exception as e:
        _fail_or_skip(f"no bwrap root file system: {e}")
        raise


@pytest.fixture(scope="module")
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:
        srv.route("/p.txt", body="bwrap page\n", content_type="text/plain; charset=utf-8")
        yield srv


def cfg(**kw: object) -> SandboxConfig:
    """A bwrap box's config: ``[sandbox.bwrap]``'s keys of ``kw`` go to that table, the others to ``[sandbox]``."""
    own = {k: kw.pop(k) for k in list(kw) if k in BwrapConfig.model_fields}
    return SandboxConfig(provider="bwrap", command_timeout_s=30, bwrap=BwrapConfig(**own), **kw)  # type: ignore[arg-type]


def _tar(members: list[tuple[tarfile.TarInfo, bytes]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for info, data in members:
            info.size = len(data)
            t.addfile(info, io.BytesIO(data) if info.isfile() else None)
    return buf.getvalue()


def _info(name: str, kind: bytes = tarfile.REGTYPE, mode: int = 0o644) -> tarfile.TarInfo:
    i = tarfile.TarInfo(name)
    i.type, i.mode = kind, mode
    return i


def test_a_tar_is_extracted_once_into_its_content_addressed_entry(tmp_path: Path) -> None:
    data = _tar([
        (_info("bin", tarfile.DIRTYPE, 0o755), b""),
        (_info("bin/tool", mode=0o4755), b"#!/bin/sh\n"),  # set-uid: dropped
        (_info("opt/fte/lib", tarfile.DIRTYPE, 0o555), b""),  # read-only directory with a file inside
        (_info("opt/fte/lib/warden.sh"), b"# warden\n"),
        (_info("dev/null", tarfile.CHRTYPE, 0o666), b""),  # a device node: left out (bwrap makes /dev)
    ])
    tar = tmp_path / "rootfs.tar"
    tar.write_bytes(data)
    key = "tar-" + hashlib.sha256(data).hexdigest()[:24]
    c = cfg(rootfs=tar, rootfs_cache=tmp_path / "cache")
    R._ready.clear()
    rf = R.ensure(c)
    assert rf.path == tmp_path / "cache" / key and rf.key == key
    assert (rf.path / "opt/fte/lib/warden.sh").read_text() == "# warden\n"
    assert (rf.path / "bin/tool").stat().st_mode & 0o7777 == 0o755
    assert (rf.path / "opt/fte/lib").stat().st_mode & 0o777 == 0o555  # its mode, once its file was in
    assert not (rf.path / "dev/null").exists()
    assert rf.env["HOME"] == "/tmp" and rf.env["PATH"].startswith("/opt/fte/bin:")
    inode = rf.path.stat().st_ino
    R._ready.clear()  # another process: the entry is found, not made again
    again = R.ensure(c)
    assert again.path == rf.path and again.path.stat().st_ino == inode
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [key, f"{key}.json"]
    assert R.find(cfg(rootfs=rf.path)) is not None  # the entry as a directory (shared storage)


def test_an_export_that_fails_says_why(tmp_path: Path) -> None:
    """The engine's export streamed into the tree (``docker export CID`` there, real commands here): a
    failure carries the extraction's exception and the command's exit status and stderr, never an empty
    "export failed:"; nothing is left in the cache."""
    cache = tmp_path / "cache"
    with pytest.raises(SandboxError) as e:
        R._install_from(["sh", "-c", "echo 'Error: no such container: c1' >&2; exit 3"], cache, "k", {}, None)
    assert str(e.value).startswith("sh -c failed: ReadError: ")  # no tar at all
    assert str(e.value).endswith("; sh exited with status 3: Error: no such container: c1")
    hostile = tmp_path / "hostile.tar"
    hostile.write_bytes(_tar([(_info("opt/fte/lib/warden.sh"), b"#\n"), (_info("../../escaped"), b"x")]))
    with pytest.raises(SandboxError, match=r"^cat .*hostile\.tar failed: UnsafeArchive: tar member refused: "
                                           r"'\.\./\.\./escaped' would be .* outside the destination$"):
        R._install_from(["cat", str(hostile)], cache, "k", {}, None)
    assert not (tmp_path / "escaped").exists() and list(cache.iterdir()) == []
    good = tmp_path / "good.tar"
    good.write_bytes(_tar([(_info("bin", tarfile.DIRTYPE, 0o755), b""), (_info("opt/fte/lib/warden.sh"), b"#\n")]))
    rf = R._install_from(["cat", str(good)], cache, "k", {"source": "cat"}, None)
    assert rf.path == cache / "k" and (rf.path / "opt/fte/lib/warden.sh").read_text() == "#\n"


def test_the_image_tree_is_keyed_by_the_image_content_hash(tree: R.Rootfs) -> None:
    from fte_shell.sandbox.providers.docker.image import content_hash

    assert tree.key == content_hash(SandboxConfig())
    assert tree.path == R.cache_dir(SandboxConfig()) / tree.key
    assert tree.env["PATH"].split(":")[0] == "/opt/fte/bin" and tree.env["HOME"] == "/tmp"  # the image's ENV
    assert R.find(cfg()) == tree


def _cgroup_of(pid: int) -> str:
    return Path(f"/proc/{pid}/cgroup").read_text()


def test_describe_and_the_cgroup_limits_it_names(tree: R.Rootfs) -> None:
    if os.geteuid() != 0:
        pytest.skip("root makes the box cgroups here; the plain user's case is its own test")
    with Sandbox(cfg(pids_limit=48, memory="96m", cpus=0.5)) as sb:
        d = sb.describe()
        box = sb.box
        assert d["provider"] == "bwrap" and d["id"] == sb.container_id and d["rootfs"] == str(tree.path)
        v2 = (Path("/sys/fs/cgroup") / "cgroup.controllers").exists()
        kind = "v2" if v2 else "v1"
        assert d["limits"]["pids"] == f"cgroup {kind} pids.max 48 (whole box)"
        assert d["limits"]["memory"].startswith(f"cgroup {kind} memory")
        assert d["limits"]["cpus"].startswith(f"cgroup {kind} cpu")
        pids_dir = box.limits.cgroups["v2" if v2 else "pids"]
        assert (pids_dir / "pids.max").read_text().strip() == "48"
        mem_dir = box.limits.cgroups["v2" if v2 else "memory"]
        mem_file = "memory.max" if v2 else "memory.limit_in_bytes"
        assert (mem_dir / mem_file).read_text().strip() == str(96 * 1024 * 1024)
        shell = box.shells[-1].pid
        assert pids_dir.name in _cgroup_of(box.warden_pid) and pids_dir.name in _cgroup_of(shell)
        # the warden reads the box's own pids cgroup (its fork-bomb breaker)
        assert sb.run("cat /sys/fs/cgroup/pids/pids.max; ls /sys/fs/cgroup").output.split() == ["48", "pids"]
        assert "Read-only file system" in sb.run("touch /sys/x 2>&1").output
        assert sb.run("cat /proc/1/comm; id -u").output.split() == ["bash", "1000"]
    assert not pids_dir.exists() and not box.is_running()


def test_limits_hold(tree: R.Rootfs) -> None:
    forker = ("python3 -c \"import os,time\nn=0\ntry:\n    while n < 200:\n        if os.fork() == 0:\n"
              "            time.sleep(20); os._exit(0)\n        n += 1\nexcept OSError: pass\nprint(n)\"; "
              "pkill -f 'import os,time'; true")
    with Sandbox(cfg(pids_limit=40, memory="128m", tmpfs_size="64m")) as sb:
        forked = int(sb.run(forker, timeout=20).output.split()[0])
        assert 20 <= forked < 40  # the box's 40 tasks: the warden, the shell, python and what it forked
        big = sb.run("python3 -c 'b = bytearray(400 * 2**20); print(len(b))'")
        assert big.exit_code != 0 and "419430400" not in big.output
        if os.geteuid() == 0:  # a whole-box cgroup: the kernel's OOM kill
            assert big.exit_code == 137
        small = sb.run("python3 -c 'b = bytearray(32 * 2**20); print(len(b))'")
        assert (small.exit_code, small.output.strip()) == (0, "33554432")
        full = sb.run("head -c 100M /dev/zero 2>/dev/null > /tmp/fill; echo $?; stat -c %s /tmp/fill")
        status, size = full.output.split()
        assert status == "1" and 60 * 2**20 < int(size) <= 64 * 2**20  # /tmp's size, not 100M


def test_no_network_but_the_gateway(tree: R.Rootfs, server: LoopbackServer) -> None:
    c = cfg(fetch_policy=FetchPolicy(allow_private=[server.host_port]))
    with Sandbox(c) as sb:
        assert sb.run("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '").output.split() == ["lo"]
        assert sb.run("ls /sys/class/net 2>&1 | head -1").output.strip().endswith("No such file or directory")
        port = server.host_port.rsplit(":", 1)[1]
        direct = sb.run(f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 2)\" 2>&1"
                        " | tail -1; python3 -c \"import socket; socket.create_connection(('10.1.2.3', 80), 2)\""
                        " 2>&1 | tail -1")
        assert direct.output.splitlines() == ["ConnectionRefusedError: [Errno 111] Connection refused",
                                              "OSError: [Errno 101] Network is unreachable"]
        fetched = sb.run(f"fetch {server.url('/p.txt')}")
        assert fetched.exit_code == 0, fetched.output
        path = fetched.output.split()[0]
        assert sb.run(f"tail -1 {path}").output.strip() == "bwrap page"
        assert server.count("/p.txt") == 1
        assert sb.run("touch /work/x 2>&1; touch /x 2>&1").output.count("Read-only file system") == 2


def test_a_timeout_kills_the_whole_process_tree(tree: R.Rootfs) -> None:
    with Sandbox(cfg()) as sb:
        obs = sb.run("sleep 1001 & (sleep 1002 &); sh -c 'sleep 1003'", timeout=1.5)
        assert obs.timed_out and obs.exit_code is None
        assert sb.run("pgrep -c sleep; echo alive").output.split() == ["0", "alive"]
        assert sb.box.shells[-1].poll() is None and not obs.restarted  # the same shell goes on


def _children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:  # reaped and gone
        return False


def test_a_closed_box_leaves_no_zombie(tree: R.Rootfs) -> None:
    # bwrap and each shell's nsenter were killed before they reaped their child (the warden, the shell):
    # those stayed zombies of the host's init
    sb = Sandbox(cfg())
    sb.run("exit 3")  # a shell that died: the session starts another
    assert sb.run("echo alive").output == "alive\n"
    box = sb.box
    kids = [k for p in [box.proc, *box.shells] for k in _children(p.pid)]
    assert box.warden_pid in kids and len(kids) >= 2, kids  # the warden and the live shell at least
    sb.close()
    left = [k for k in kids if _zombie(k)]
    assert left == [], left


def test_root_refuses_a_workspace_the_box_uid_cannot_reach(tree: R.Rootfs, user_dir: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("only a box started by root runs as another uid than its starter")
    private = user_dir / "private"
    (private / "ws").mkdir(parents=True)
    os.chmod(private, 0o700)
    with pytest.raises(SandboxError, match=f"runs as uid 1000 .*cannot enter {private} on the way to {private}/ws"):
        Sandbox(cfg(workspace_dir=private / "ws"))
    os.chmod(private, 0o711)  # searchable: enough
    with Sandbox(cfg(workspace_dir=private / "ws")) as sb:
        assert sb.run("ls -d /work && id -u").output.split() == ["/work", "1000"]


def _as_user(user: str) -> dict[str, object]:
    pw = pwd.getpwnam(user)
    return {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": [],
            "env": {"HOME": pw.pw_dir, "PATH": os.environ["PATH"], "PYTHONPATH": str(REPO), "LANG": "C.UTF-8"}}


def _test_user() -> pwd.struct_passwd:
    if os.geteuid() != 0:
        pytest.skip("run as root to run the plain user's part as ftetest")
    try:
        return pwd.getpwnam(TEST_USER)
    except KeyError:
        _fail_or_skip(f"no user {TEST_USER}: run bash sandbox/setup-host.sh --tests")
        raise


@pytest.fixture(scope="module")
def delegated() -> Iterator[str]:
    """A cgroup delegated to the test user (what an admin does: mkdir + chown), removed afterwards."""
    pw = _test_user()
    root = Path("/sys/fs/cgroup")
    dirs = [root / DELEGATED] if (root / "cgroup.controllers").exists() else [
        root / c / DELEGATED for c in ("pids", "memory", "cpu")]
    for d in dirs:
        d.mkdir(exist_ok=True)
        for p in [d, *d.iterdir()]:
            os.chown(p, pw.pw_uid, pw.pw_gid)
    yield DELEGATED
    for d in dirs:
        for sub in d.glob("fte-box-*"):
            sub.rmdir()
        d.rmdir()


PLAIN = textwrap.dedent("""
    import json, os, sys
    from fte_shell import Sandbox, SandboxConfig
    cfg = SandboxConfig(provider="bwrap", bwrap={"rootfs": sys.argv[1], "cgroup_parent": sys.argv[2] or None})
    out = {"host_uid": os.getuid()}
    with Sandbox(cfg) as sb:
        out["limits"] = sb.describe()["limits"]
        for k, cmd in {"id": "id -u", "ulimit": "ulimit -u; ulimit -v", "cg": "cat /proc/self/cgroup",
                       "ro": "touch /work/x /x 2>&1 | grep -c 'Read-only'", "net": "tail -n +3 /proc/net/dev"}.items():
            out[k] = sb.run(cmd).output
        out["timeout"] = sb.run("sleep 100 & sleep 101", timeout=1).timed_out
        out["after"] = sb.run("pgrep -c sleep").output.strip()
        out["host_cg"] = open(f"/proc/{sb.box.shells[-1].pid}/cgroup").read()
    print(json.dumps(out))
""")


@pytest.fixture
def user_dir() -> Iterator[Path]:
    """A directory the test user can read (pytest's own is root's alone)."""
    d = Path(tempfile.mkdtemp(prefix="bwrap-test-"))
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _plain(tmp_path: Path, tree: R.Rootfs, parent: str) -> dict:
    script = tmp_path / "plain.py"
    script.write_text(PLAIN)
    r = subprocess.run([sys.executable, str(script), str(tree.path), parent], capture_output=True, text=True,
                       check=False, timeout=120, cwd="/tmp", **_as_user(TEST_USER))  # type: ignore[arg-type]
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.splitlines()[-1])


def test_as_a_plain_user_with_rlimits(tree: R.Rootfs, user_dir: Path) -> None:
    pw = _test_user()
    # this user cannot reach the Docker daemon: the box needs none
    probe = subprocess.run([sys.executable, "-c", "import docker; docker.from_env(timeout=5).ping()"],
                           capture_output=True, text=True, timeout=60, check=False, **_as_user(TEST_USER))  # type: ignore[arg-type]
    assert probe.returncode != 0 and "Permission denied" in probe.stderr
    out = _plain(user_dir, tree, "")
    assert out["host_uid"] == pw.pw_uid
    assert out["id"].strip() == "1000" and out["ro"].strip() == "2"
    assert out["ulimit"].split() == ["256", "1048576"]  # pids_limit; 1g in KiB
    assert out["limits"]["pids"] == "rlimit RLIMIT_NPROC 256 (per box: its own user namespace)"
    assert out["limits"]["memory"].startswith("rlimit RLIMIT_AS 1g per process, not the box's total")
    assert out["limits"]["cpus"].startswith("not enforced: no cpu cgroup")
    assert [line.split(":")[0].strip() for line in out["net"].splitlines()] == ["lo"]
    assert out["timeout"] is True and out["after"] == "0"


def test_as_a_plain_user_with_a_delegated_cgroup(tree: R.Rootfs, user_dir: Path, delegated: str) -> None:
    out = _plain(user_dir, tree, delegated)
    kind = "v2" if Path("/sys/fs/cgroup/cgroup.controllers").exists() else "v1"
    assert out["limits"]["pids"] == f"cgroup {kind} pids.max 256 (whole box)"
    assert out["limits"]["memory"].startswith(f"cgroup {kind} memory")
    assert f"/{delegated}/fte-box-" in out["host_cg"]  # the host's view: the shell is in the box's cgroup
    assert out["ulimit"].split()[1] == "unlimited"  # no RLIMIT_AS: the cgroup holds memory


HOLD = textwrap.dedent("""
    import json, os, sys, time
    from fte_shell import Sandbox, SandboxConfig
    sb = Sandbox(SandboxConfig(provider="bwrap", bwrap={"rootfs": sys.argv[1], "cgroup_parent": sys.argv[2] or None}))
    sb.run("sleep 1000 & (sleep 1001 &)")
    box = sb.box
    print(json.dumps({"warden": box.warden_pid, "bwrap": box.proc.pid, "shell": box.shells[-1].pid,
                      "pidns": os.stat(f"/proc/{box.warden_pid}/ns/pid").st_ino,
                      "cgroups": [str(d) for d in box.limits.cgroups.values()]}), flush=True)
    time.sleep(600)
""")


def _in_pidns(ino: int) -> list[int]:
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if os.stat(d / "ns/pid").st_ino == ino:
                    found.append(int(d.name))
            except OSError:
                pass
    return found


def test_nothing_is_left_after_sigkill_of_the_host_process(tree: R.Rootfs, user_dir: Path, delegated: str) -> None:
    script = user_dir / "hold.py"
    script.write_text(HOLD)
    proc = subprocess.Popen([sys.executable, str(script), str(tree.path), delegated], stdout=subprocess.PIPE,
                            text=True, cwd="/tmp", **_as_user(TEST_USER))  # type: ignore[arg-type]
    try:
        assert proc.stdout is not None
        info = json.loads(proc.stdout.readline())
        assert len(_in_pidns(info["pidns"])) >= 4  # the warden, the shell, two sleeps
        assert info["cgroups"]
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    deadline = time.monotonic() + 10
    while _in_pidns(info["pidns"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _in_pidns(info["pidns"]) == []
    for pid in (info["warden"], info["bwrap"], info["shell"]):
        assert not Path(f"/proc/{pid}").exists() or Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    leftover = [Path(d) for d in info["cgroups"]]
    assert all(d.exists() for d in leftover)  # a SIGKILLed owner cannot remove its cgroups ...
    res = get_provider("bwrap").gc(cfg=cfg(cgroup_parent=delegated))  # type: ignore[call-arg]
    assert not any(d.exists() for d in leftover) and res.removed  # ... gc does


def test_doctor_on_this_host(tree: R.Rootfs) -> None:
    checks = get_provider("bwrap").doctor(cfg())
    by = {c.name: c for c in checks}
    assert by["unprivileged user namespaces (bwrap --unshare-all)"].ok
    assert by["root file system"].ok and str(tree.path) in by["root file system"].detail
    for name in ("non-root user", "read-only root", "read-only /work", "no network",
                 "no capabilities, no-new-privileges", "the warden is PID 1"):
        assert by[name].ok, by[name]
    assert by["limits"].ok == (os.geteuid() == 0)
    assert by["limits"].advisory  # rlimits only (no delegated cgroup) is a weaker guarantee, not "bwrap does not work"



DEMO = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from fte_shell.demo import DEMO_QUESTIONS, run_demo
    res = run_demo(list(DEMO_QUESTIONS), Path(sys.argv[1]), sandbox={"provider": "bwrap"})
    print(json.dumps([[r.answer, r.stop_reason] for r in res]))
""")


def test_the_demo_as_a_plain_user_without_docker(tree: R.Rootfs, user_dir: Path) -> None:
    """``fte-shell demo`` with ``[sandbox] provider = "bwrap"`` as ftetest, who cannot reach dockerd: the
    tree comes from the system cache (root exported it once)."""
    _test_user()
    script = user_dir / "demo.py"
    script.write_text(DEMO)
    out = user_dir / "runs"
    os.chown(user_dir, pwd.getpwnam(TEST_USER).pw_uid, -1)
    r = subprocess.run([sys.executable, str(script), str(out)], capture_output=True, text=True, check=False,
                       timeout=600, cwd="/tmp", **_as_user(TEST_USER))  # type: ignore[arg-type]
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout.splitlines()[-1]) == [["json.dumps", "answer"], ["textwrap.dedent", "answer"]]
    assert "the hardened bwrap sandbox" in " ".join(r.stdout.split())
    first = min(out.iterdir()) / "trajectory.jsonl"
    assert '"provider": "bwrap"' in first.read_text()


def test_a_ray_sweep_on_bwrap_nodes(tree: R.Rootfs, tmp_path: Path, hotpotqa_dir: Path) -> None:
    """A sweep whose sandboxes are bwrap boxes on a (one-node) Ray cluster: the node is checked with the
    bwrap provider (no Docker asked), the runs answer and record their provider; a node that cannot
    prepare the provider stops the sweep before any run, naming the node."""
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    ray = pytest.importorskip("ray")
    from fte_shell.benchmarks.hotpotqa import ensure_hotpotqa_corpus
    from fte_shell.config import ModelConfig, RunConfig
    from fte_shell.distributed import RayExecutor
    from fte_shell.distributed.nodes import check_nodes
    from fte_shell.standins.research import ResearchPolicy
    from fte_shell.standins.server import ScriptedServer
    from fte_shell.sweep import BenchConfig, run_sweep

    rows = [json.loads(line) for line in (hotpotqa_dir / "dev.jsonl").read_text(encoding="utf-8").splitlines()[:3]]
    data = tmp_path / "q.jsonl"
    data.write_text("".join(json.dumps({"id": f"bw-{i}", "question": r["question"], "answer": r["answer"]}) + "\n"
                            for i, r in enumerate(rows)), encoding="utf-8")
    corpus = ensure_hotpotqa_corpus(hotpotqa_dir, tmp_path / "corpus")
    ray.init(address="local", num_cpus=1, resources={"fte_slot": 2}, include_dashboard=False, log_to_driver=False)
    try:
        with pytest.raises(SandboxError, match=r"Ray node .* cannot start bwrap sandboxes .*does not exist"):
            check_nodes(cfg(rootfs=tmp_path / "missing.tar"))
        with ScriptedServer(policy=ResearchPolicy()) as srv:
            run_cfg = RunConfig(model=ModelConfig(base_url=srv.base_url, model="scripted"))
            run_cfg.search.corpus = corpus
            run_cfg.sandbox.provider = "bwrap"
            stats = run_sweep(BenchConfig(dataset=f"jsonl:{data}", profiles=["shell"], out=tmp_path / "ray"),
                              run_cfg, remote=RayExecutor())
        assert (stats.total, stats.done, stats.failed) == (3, 3, 0)
        runs = sorted((tmp_path / "ray").glob("runs/shell/*/r0"))
        assert len(runs) == 3
        for d in runs:
            assert '"provider": "bwrap"' in (d / "trajectory.jsonl").read_text()
    finally:
        ray.shutdown()


def test_runtime_runsc_is_refused(tmp_path: Path) -> None:
    from fte_shell.sandbox import get_provider
    from fte_shell.sandbox.base import BoxSpec

    cfg = SandboxConfig(provider="bwrap", runtime="runsc")
    with pytest.raises(SandboxError, match="bwrap boxes have no OCI runtime"):
        get_provider("bwrap").start(BoxSpec(cfg, tmp_path, tmp_path, "runsc-refused"))


def test_gc_kills_a_box_whose_owner_is_gone(tree: R.Rootfs) -> None:
    """bwrap's ``--die-with-parent`` misses an owner that dies while bwrap starts (containers/bubblewrap#633):
    the box lives on under init. gc knows a box by its gateway bind and its owner by the sandbox directory's
    owner file: a box whose owner is gone is killed with all it runs; a live owner's box is left alone."""
    from fte_shell.sandbox.ownership import OWNER_FILE
    from fte_shell.sandbox.providers.bwrap.provider import kill_orphaned_boxes

    dead = subprocess.Popen(["true"])
    dead.wait()
    with Sandbox(cfg()) as live, Sandbox(cfg()) as orphan:
        assert kill_orphaned_boxes() == []  # both owners (this process) alive
        owner = orphan._tmp / OWNER_FILE
        _, _, host, keep = owner.read_text().split()
        owner.write_text(f"{dead.pid} - {host} {keep}\n")  # as the owner of a box that outlived it reads
        box = orphan.box
        tree_pids = [box.proc.pid, *_children(box.proc.pid)]
        gc = get_provider("bwrap").gc()
        assert [r for r, _ in gc.removed] == [f"bwrap box process {box.proc.pid}"]
        assert box.proc.wait(timeout=10) == -signal.SIGKILL
        deadline = time.monotonic() + 10
        while any(Path(f"/proc/{p}").exists() and not _zombie(p) for p in tree_pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [p for p in tree_pids if Path(f"/proc/{p}").exists() and not _zombie(p)]
        assert live.run("echo alive").output == "alive\n"  # the live owner's box untouched
        assert not orphan._tmp.exists() and live._tmp.exists()  # and so are the directories
