"""Distributed sweeps on a real local Ray cluster (``ray.cluster_utils.Cluster``: a head and two worker
nodes on 127.0.0.1, each with its own ``fte_slot``, all on the local Docker daemon), through the real
harness (containers for ``shell``, the HotpotQA local corpus served by the cache actor, the scripted
model on loopback).

* a 60-run sweep on the cluster, with a worker node killed part-way, gives the same answers, stop reasons
  and metrics as the same sweep run locally; every run is recorded exactly once, no half-written run
  directory, each node's live runs never exceed its slots, no container is left;
* the CLI driver (``fte-shell bench --ray ADDRESS``) SIGKILLed part-way and rerun resumes like a local
  sweep: finished runs are kept, the rest done once;
* the retriever arms (``--retrievers``: each arm's search served by the cache actor) and the corpus arm
  (``--corpus-arm``: the corpus exported on every node) give the local sweep's runs; a node without the
  corpus directory fails in one line naming it;
* the pieces without a cluster: packing (atomic, confined), the page lease, secrets kept out of the task.
"""

from __future__ import annotations

import os

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # keep Ray's addresses on 127.0.0.1

import contextlib
import io
import json
import pickle
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fte_shell.config import ModelConfig, RunConfig
from fte_shell.distributed.packing import pack_dir, remove_parts, unpack_into
from fte_shell.metrics import run_metrics
from fte_shell.sandbox.ownership import gc_dirs
from fte_shell.standins.research import ResearchPolicy
from fte_shell.standins.server import ScriptedServer
from fte_shell.sweep import BenchConfig, run_sweep

REPO = Path(__file__).resolve().parent.parent
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

try:
    import ray
    from ray.cluster_utils import Cluster
except ImportError:  # pragma: no cover - CI installs the extra (the test extra includes it)
    if IN_CI:
        raise
    pytest.skip("ray is not installed: pip install 'fte-shell[ray]'", allow_module_level=True)

SLOTS = {"head": 1, "w1": 2, "w2": 2}
TOKEN = f"rt{uuid.uuid4().hex[:8]}"
"""Prefix of this module's question ids, so its containers are told apart from other tests'."""


# --- fixtures -----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[tuple[Any, dict[str, Any]]]:
    """The cluster (for sweeps whose profiles start no box: no Docker needed)."""
    c = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "resources": {"fte_slot": SLOTS["head"]}, "include_dashboard": False,
        "node_ip_address": "127.0.0.1"})
    nodes = {"head": c.head_node}
    for name in ("w1", "w2"):
        nodes[name] = c.add_node(num_cpus=1, resources={"fte_slot": SLOTS[name]}, node_ip_address="127.0.0.1")
    ray.init(address=c.address, log_to_driver=False)
    c.wait_for_nodes()
    try:
        yield c, nodes
    finally:
        ray.shutdown()
        c.shutdown()


@pytest.fixture(scope="module")
def cluster(ray_cluster: tuple[Any, dict[str, Any]], docker_ready: None) -> tuple[Any, dict[str, Any]]:
    """The cluster, for sweeps whose runs start boxes on the local Docker daemon."""
    return ray_cluster



@pytest.fixture(scope="module")
def questions(tmp_path_factory: pytest.TempPathFactory, hotpotqa_dir: Path) -> Path:
    """30 HotpotQA dev questions as a JSONL dataset whose ids are unique to this module."""
    path = tmp_path_factory.mktemp("data") / "q.jsonl"
    rows = []
    with (hotpotqa_dir / "dev.jsonl").open(encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i == 30:
                break
            row = json.loads(line)
            rows.append({"id": f"{TOKEN}-{i:02d}", "question": row["question"], "answer": row["answer"]})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def our_containers() -> list[str]:
    import docker

    api = docker.from_env().api
    return [x["Id"] for x in api.containers(all=True, filters={"label": "fte-shell=1"})
            if (x.get("Labels") or {}).get("fte-shell.run-id", "").startswith(TOKEN)]


def comparable(run_dir: Path) -> dict[str, Any]:
    m = run_metrics(run_dir).model_dump()
    for k in ("run_dir", "wall_s"):
        m.pop(k)
    res = json.loads((run_dir / "result.json").read_text())
    return {"metrics": m, "answer": res.get("answer"), "stop_reason": res.get("stop_reason")}


def run_dirs(out: Path) -> dict[tuple[str, str, str], Path]:
    return {(d.parts[-3], d.parts[-2], d.parts[-1]): d for d in sorted(out.glob("runs/*/*/r*"))}


def max_overlap(intervals: list[tuple[float, float]]) -> int:
    edges = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals], key=lambda x: (x[0], x[1]))
    live = peak = 0
    for _, d in edges:
        live += d
        peak = max(peak, live)
    return peak


# --- the cluster --------------------------------------------------------------------------------------
@pytest.mark.docker
@pytest.mark.slow
def test_ray_sweep_equals_local_and_survives_a_lost_node(
    tmp_path: Path, cluster: tuple[Any, dict[str, Any]], questions: Path, hotpotqa_corpus: Path
) -> None:
    from fte_shell.distributed import RayExecutor

    c, nodes = cluster
    victim = nodes["w2"]
    victim_id = victim.node_id
    profiles = ["shell", "fte"]
    with ScriptedServer(policy=ResearchPolicy()) as srv:
        cfg = RunConfig(model=ModelConfig(base_url=srv.base_url, model="scripted", api_key=f"secret-{TOKEN}"))
        cfg.search.corpus = hotpotqa_corpus

        def bench(out: Path, concurrency: int = 4) -> BenchConfig:
            return BenchConfig(dataset=f"jsonl:{questions}", profiles=profiles, out=out, concurrency=concurrency)

        local = run_sweep(bench(tmp_path / "local"), cfg)
        assert (local.total, local.done, local.failed) == (60, 60, 0)
        n_local_requests = len(srv.requests)

        removed = threading.Event()

        def on_event(kind: str, task: Any, stats: Any) -> None:
            if kind == "done" and stats.done >= 15 and not removed.is_set():
                removed.set()  # kill the node while it holds runs (its slots are always busy)
                threading.Thread(target=c.remove_node, args=(victim,), kwargs={"allow_graceful": False},
                                 daemon=True).start()

        ex = RayExecutor()
        tmp_before = set(Path(tempfile.gettempdir()).glob("fte-ray-run-*"))
        dist = run_sweep(bench(tmp_path / "ray"), cfg, remote=ex, on_event=on_event)
        assert removed.is_set()
        assert victim_id not in {n["NodeID"] for n in ray.nodes() if n["Alive"]}
        assert (dist.total, dist.done, dist.failed, dist.lost) == (60, 60, 0, 0), dist

    # the killed node's workers left their run directories; each names its dead owner, so gc removes them
    gc_dirs()
    assert set(Path(tempfile.gettempdir()).glob("fte-ray-run-*")) <= tmp_before
    # the same answers, stop reasons and metrics, run by run
    lo, di = run_dirs(tmp_path / "local"), run_dirs(tmp_path / "ray")
    assert set(lo) == set(di) and len(di) == 60
    for key in lo:
        assert comparable(di[key]) == comparable(lo[key]), key
    # every run recorded exactly once, and nothing half-written
    keys = Counter((p["qid"], p["profile"], p["rep"]) for p in ex.placements)
    assert len(keys) == 60 and set(keys.values()) == {1}
    # the provider and runtime of each run: in its record, the placements and the manifest (30 shell runs)
    assert {p["sandbox"] for p in ex.placements} == {"docker/runc"}
    assert all(json.loads((d / "result.json").read_text())["sandbox"] == {"provider": "docker", "runtime": "runc"}
               for key, d in di.items() if key[0] == "shell")
    for sweep in ("local", "ray"):
        assert json.loads((tmp_path / sweep / "sweep.json").read_text())["sandboxes"] == {"docker/runc": 30}
    assert not list((tmp_path / "ray").glob("runs/*/*/.*"))
    assert all((d / "trajectory.jsonl").is_file() and (d / "result.json").is_file() for d in di.values())
    # the killed node's runs went on elsewhere: resumed at their last completed turn from the trajectory
    # their node checkpointed with the cache actor (fte_shell.episode.resume), their replies not asked again
    # (only a request in flight at the loss is asked twice)
    ray_requests = len(srv.requests) - n_local_requests
    assert ray_requests >= n_local_requests
    # (a run the loss caught before its first reply has nothing to resume: it starts over, asking that one
    # request again; which runs had a reply on disk depends on when the node went)
    resumed = [r for d in di.values() if (r := json.loads((d / "result.json").read_text()).get("resumed"))]
    assert all(r["count"] >= 1 and r["redone"] == 0 for r in resumed), resumed
    assert ray_requests - n_local_requests <= SLOTS["w2"], "at most the lost node's requests in flight asked twice"
    # each node's live runs never exceeded its slots
    by_node: dict[str, list[tuple[float, float]]] = {}
    for p in ex.placements:
        by_node.setdefault(p["node_id"], []).append((p["started"], p["ended"]))
    slots = {n.node_id: SLOTS[name] for name, n in nodes.items()}
    assert set(by_node) <= set(slots)
    assert len(by_node) >= 2
    for node_id, iv in by_node.items():
        assert max_overlap(iv) <= slots[node_id], (node_id, max_overlap(iv))
    # searches and pages went through the one cache actor on the driver
    assert ex.cache_stats["counts"].get("search", 0) > 0 and ex.cache_stats["counts"].get("lookup", 0) > 0
    # the model key never reached a file of the sweep
    for f in (tmp_path / "ray").rglob("*"):
        if f.is_file():
            assert f"secret-{TOKEN}".encode() not in f.read_bytes(), f
    assert our_containers() == []


@pytest.mark.docker
@pytest.mark.slow
def test_cli_driver_killed_and_rerun_resumes(
    tmp_path: Path, cluster: tuple[Any, dict[str, Any]], questions: Path, hotpotqa_corpus: Path
) -> None:
    c, _ = cluster
    out = tmp_path / "sweep"
    cmd = [sys.executable, "-m", "fte_shell", "bench", f"jsonl:{questions}", "--out", str(out), "--limit", "6",
           "--profiles", "shell,fte", "--scripted", "--ray", c.address, "--corpus", str(hotpotqa_corpus),
           "--no-progress", "--no-judge"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 300
    try:
        while len(list(out.glob("runs/*/*/r*/result.json"))) < 3:
            assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
            assert time.monotonic() < deadline, "the driver finished no run in 300 s"
            time.sleep(0.2)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    before = {d: (d / "result.json").stat().st_ino for d in out.glob("runs/*/*/r*") if (d / "result.json").exists()}
    assert 3 <= len(before) < 12
    res = subprocess.run(cmd, check=False, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"{len(before)} already done" in res.stdout, res.stdout
    assert f"{12 - len(before)} run(s) finished now" in res.stdout, res.stdout
    done = {d for d in out.glob("runs/*/*/r*") if (d / "result.json").exists()}
    assert len(done) == 12 and not list(out.glob("runs/*/*/.*"))
    for d, ino in before.items():  # finished before the kill: kept, not redone
        assert (d / "result.json").stat().st_ino == ino
    for d in done:
        assert json.loads((d / "result.json").read_text())["stop_reason"] not in ("failed", "crashed")
    manifest = json.loads((out / "sweep.json").read_text())
    assert manifest["status"] == "finished"
    deadline = time.monotonic() + 120  # the killed driver's workers die with it; the rerun's gc removes theirs
    while our_containers() and time.monotonic() < deadline:
        time.sleep(1)
    assert our_containers() == []


@pytest.mark.docker
def test_image_shipped_by_docker_save_and_load(docker_ready: None) -> None:
    """The image a node lacks arrives by its content hash: saved by id on the driver, loaded and tagged."""
    import docker

    from fte_shell.config import SandboxConfig
    from fte_shell.distributed.nodes import inspect_here, load_here, save_image
    from fte_shell.sandbox.providers.docker import image

    image_id = image.ensure_image(SandboxConfig())
    want = (docker.from_env().images.get(image_id).labels or {})[image.HASH_LABEL]
    tag = f"fte-ray-test:{TOKEN}"
    assert inspect_here(tag, None, gc=False)["image_hash"] is None  # a node without it
    try:
        assert load_here(save_image(image_id), tag) == want
        assert docker.from_env().images.get(tag).id == image_id
        assert inspect_here(tag, None, gc=False)["image_hash"] == want
    finally:
        with contextlib.suppress(Exception):
            docker.from_env().api.remove_image(tag, noprune=True)  # our tag only; the image stays


# --- the pieces ---------------------------------------------------------------------------------------
def test_pack_unpack_is_atomic_and_confined(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "workspace" / "a").mkdir(parents=True)
    (src / "result.json").write_text('{"answer": "x"}')
    (src / "workspace" / "a" / "page.md").write_text("text " * 1000)
    data = pack_dir(src)
    dest = tmp_path / "runs" / "shell" / "q1" / "r0"
    unpack_into(data, dest)
    assert (dest / "result.json").read_text() == '{"answer": "x"}'
    assert (dest / "workspace" / "a" / "page.md").read_text() == "text " * 1000
    assert [p.name for p in dest.parent.iterdir()] == ["r0"]
    # a hostile archive: a member escaping the directory is refused, and no run directory appears
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("../../escaped.txt")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))
    bad = tmp_path / "runs" / "shell" / "q2" / "r0"
    with pytest.raises(tarfile.TarError):
        unpack_into(buf.getvalue(), bad)
    assert not bad.exists() and not list(bad.parent.iterdir()) and not (tmp_path / "runs" / "escaped.txt").exists()
    # leftovers of a driver killed mid-unpack are hidden and removed
    (dest.parent / ".r1.part-abc").mkdir()
    assert remove_parts(tmp_path / "runs") == 1 and [p.name for p in dest.parent.iterdir()] == ["r0"]


def test_page_lease_downloads_a_url_once(tmp_path: Path) -> None:
    import datetime as dt

    from fte_shell.distributed.caches import CacheService
    from fte_shell.workspace import Document

    svc = CacheService(RunConfig(), False, False, str(tmp_path / "pages"))
    url = "https://example.org/a"
    assert svc.page_get(url, "node1") is None  # node1 downloads it
    got: list[Any] = []
    waiter = threading.Thread(target=lambda: got.append(svc.page_get(url, "node2")))
    waiter.start()
    time.sleep(0.3)
    assert waiter.is_alive() and not got  # node2 waits for node1's download instead of its own
    doc = Document(source=url, kind="url", title="A", text="page text", retrieved_at=dt.datetime.now(dt.UTC))
    svc.page_put(url, doc, "node1")
    waiter.join(timeout=30)
    assert got and got[0] is not None and got[0].text == "page text"
    assert svc.stats()["puts"] == {url: 1}
    # a holder whose download failed (no put) loses its lease with its next request
    other = "https://example.org/b"
    assert svc.page_get(other, "node1") is None
    assert svc.page_get("https://example.org/c", "node1") is None
    assert svc.page_get(other, "node2") is None  # not blocked: node2 now downloads it


def test_secrets_travel_in_the_runtime_env_not_the_task() -> None:
    from pydantic import SecretStr

    from fte_shell.distributed.runenv import restore_secrets, strip_secrets
    from fte_shell.distributed.task import RunSpec

    cfg = RunConfig(model=ModelConfig(base_url="http://127.0.0.1:1/v1", model="m", api_key="sk-TOPSECRET"))
    cfg.search.serper_api_key = SecretStr("serper-TOPSECRET")
    clean, env = strip_secrets(cfg)
    assert env == {"OPENAI_API_KEY": "sk-TOPSECRET", "SERPER_API_KEY": "serper-TOPSECRET"}
    spec = RunSpec(question="q", config=clean, qid="x", meta={}, has_search=False, has_pages=False)
    assert b"TOPSECRET" not in pickle.dumps(spec)
    assert cfg.model.api_key is not None  # the driver's own config is untouched
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        restore_secrets(clean)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert clean.model.api_key is not None and clean.model.api_key.get_secret_value() == "sk-TOPSECRET"
    assert clean.search.serper_api_key is not None


@pytest.mark.docker
@pytest.mark.slow
def test_rate_limits_are_split_over_the_clusters_slots(
    tmp_path: Path, cluster: tuple[Any, dict[str, Any]], questions: Path, hotpotqa_corpus: Path
) -> None:
    """``--rpm`` / ``--tpm`` over the cluster's slots (5 = 1 + 2 + 2 when this test runs alone, fewer after
    the lost-node test): each run, its own process, gets ``rpm // slots`` requests and ``tpm // slots``
    tokens a minute; the driver says so. The limits are high enough that no run waits for them."""
    from fte_shell.distributed import RayExecutor
    from fte_shell.distributed.nodes import slot_nodes

    slots = sum(n.slots for n in slot_nodes())
    rpm, tpm = 60_000, 60_000_000
    logs: list[str] = []
    with ScriptedServer(policy=ResearchPolicy()) as srv:
        cfg = RunConfig(model=ModelConfig(base_url=srv.base_url, model="scripted", api_key="x", rpm=rpm, tpm=tpm))
        cfg.search.corpus = hotpotqa_corpus
        bench = BenchConfig(dataset=f"jsonl:{questions}", limit=3, profiles=["fte"], out=tmp_path / "ray")
        stats = run_sweep(bench, cfg, remote=RayExecutor(), log=logs.append)
    assert (stats.done, stats.failed) == (3, 0)
    want = (rpm // slots, tpm // slots)
    assert any(f"split over the {slots} " in m and f"{want[0]} requests and {want[1]} tokens per minute" in m
               for m in logs), logs
    for d in run_dirs(tmp_path / "ray").values():
        start = json.loads((d / "trajectory.jsonl").read_text().splitlines()[0])
        assert (start["config"]["model"]["rpm"], start["config"]["model"]["tpm"]) == want


@pytest.mark.slow
def test_retriever_arms_on_ray_equal_the_local_sweep(
    tmp_path: Path, ray_cluster: tuple[Any, dict[str, Any]], questions: Path, hotpotqa_corpus: Path
) -> None:
    """``--retrievers`` on the cluster: the cache actor serves each arm's own search (``bm25s`` and the
    test kind ``tests.retriever_kinds:OVERLAP``), so the Ray sweep gives the runs the local sweep gives —
    the same answers, stop reasons, metrics and searches (backend name, query, results) run by run — and
    the same ``sweep.json`` search names."""
    from fte_shell.distributed import RayExecutor
    from fte_shell.record.events import ToolCallEvent
    from fte_shell.record.rundir import read_events

    overlap = "tests.retriever_kinds:OVERLAP"

    def searches(run_dir: Path) -> list[dict[str, Any]]:
        return [s.model_dump(exclude={"cache_hit"}) for e in read_events(run_dir) if isinstance(e, ToolCallEvent)
                for s in (e.meta.searches or [])]

    with ScriptedServer(policy=ResearchPolicy()) as srv:
        cfg = RunConfig(model=ModelConfig(base_url=srv.base_url, model="scripted", api_key="x"))
        cfg.search.corpus = hotpotqa_corpus

        def bench(out: Path) -> BenchConfig:
            return BenchConfig(dataset=f"jsonl:{questions}", limit=2, profiles=["fte"], out=out,
                               retrievers=["bm25s", overlap], concurrency=2)

        local = run_sweep(bench(tmp_path / "local"), cfg)
        ex = RayExecutor()
        dist = run_sweep(bench(tmp_path / "ray"), cfg, remote=ex)
    assert (local.total, local.done, local.failed) == (dist.total, dist.done, dist.failed) == (4, 4, 0), dist
    lo, di = run_dirs(tmp_path / "local"), run_dirs(tmp_path / "ray")
    assert set(lo) == set(di) and {k[0] for k in di} == {"fte@bm25s", "fte@tests.retriever_kinds-OVERLAP"}
    names = json.loads((tmp_path / "local" / "sweep.json").read_text())["search"]["recorded_as"]
    assert json.loads((tmp_path / "ray" / "sweep.json").read_text())["search"]["recorded_as"] == names
    for key in lo:
        assert comparable(di[key]) == comparable(lo[key]), key
        made = searches(di[key])
        assert made and made == searches(lo[key]), key
        spec = "bm25s" if key[0] == "fte@bm25s" else overlap
        assert {s["backend"] for s in made} == {names[spec]}, key  # each arm ranked by its own retriever
        assert json.loads((di[key] / "result.json").read_text())["meta"]["retriever"] == spec
    assert ex.cache_stats["counts"].get("search", 0) > 0  # answered by the cache actor on the driver


@pytest.mark.docker
@pytest.mark.slow
def test_corpus_arm_on_ray_equals_the_local_sweep(
    tmp_path: Path, cluster: tuple[Any, dict[str, Any]], questions: Path, hotpotqa_corpus: Path
) -> None:
    """``--corpus-arm`` on the cluster: every slot node exports the sweep's corpus for ``/corpus`` before the
    first run, the ``shell+corpus`` run's box greps it there, and both arms' runs are the local sweep's (answers,
    stop reasons, metrics). A corpus path that no node has stops the sweep before any run, naming it."""
    from fte_shell.distributed import RayExecutor
    from fte_shell.errors import SandboxError
    from fte_shell.record.events import ToolCallEvent
    from fte_shell.record.rundir import read_events

    logs: list[str] = []
    with ScriptedServer(policy=ResearchPolicy()) as srv:
        cfg = RunConfig(model=ModelConfig(base_url=srv.base_url, model="scripted", api_key="x"))
        cfg.search.corpus = hotpotqa_corpus

        def bench(out: Path, **kw: Any) -> BenchConfig:
            return BenchConfig(dataset=f"jsonl:{questions}", limit=1, profiles=["shell"], out=out, **kw)

        local = run_sweep(bench(tmp_path / "local", corpus_arm=True), cfg)
        dist = run_sweep(bench(tmp_path / "ray", corpus_arm=True), cfg, remote=RayExecutor(), log=logs.append)
        nowhere = tmp_path / "nowhere"
        cfg.sandbox.corpus = nowhere
        with pytest.raises(SandboxError) as e:
            run_sweep(bench(tmp_path / "ray-nowhere"), cfg, remote=RayExecutor())
    assert (local.done, local.failed) == (dist.done, dist.failed) == (2, 0), dist
    assert any(f"{hotpotqa_corpus} exported for /corpus on" in m for m in logs), logs
    lo, di = run_dirs(tmp_path / "local"), run_dirs(tmp_path / "ray")
    assert set(lo) == set(di) and {k[0] for k in di} == {"shell", "shell+corpus"}
    for key in lo:
        assert comparable(di[key]) == comparable(lo[key]), key
    corpus_run = next(d for k, d in di.items() if k[0] == "shell+corpus")
    greps = [c for c in read_events(corpus_run) if isinstance(c, ToolCallEvent)
             and (c.arguments or {}).get("command", "").startswith("rg -l -i -e ")]
    assert len(greps) == 1 and any(ln.startswith("/corpus/") for ln in greps[0].observation.splitlines()), greps
    assert f"sandbox.corpus {nowhere}: no such directory on this node" in str(e.value)
    assert "\n" not in str(e.value) and not list((tmp_path / "ray-nowhere").glob("runs/*/*/r*"))
    assert our_containers() == []


@pytest.mark.slow
def test_a_box_run_on_a_node_without_its_corpus_fails_naming_the_path(
    tmp_path: Path, ray_cluster: tuple[Any, dict[str, Any]]
) -> None:
    """A node that joined after the sweep's check and lacks the corpus directory: the run fails there in one
    line naming the path (the sweep retries and records it ``failed``), never runs without ``/corpus``."""
    from fte_shell.distributed.task import RunSpec, execute_run

    cfg = RunConfig(model=ModelConfig(base_url="http://127.0.0.1:1/v1", model="m"))
    cfg.agent.profile = "shell"
    cfg.sandbox.corpus = tmp_path / "nowhere"
    spec = RunSpec(question="q", config=cfg, qid="", meta={}, has_search=False, has_pages=False)
    out = ray.get(ray.remote(execute_run).options(num_cpus=0).remote(spec, None), timeout=120)
    assert out.data is None and out.answer is None and out.error is not None
    assert out.error.startswith(f"sandbox.corpus {tmp_path / 'nowhere'}: no such directory on Ray node ")
    assert "\n" not in out.error
