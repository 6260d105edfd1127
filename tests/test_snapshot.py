"""Reproducible web (fte_shell.snapshot): record from loopback servers, stop them, replay byte for byte;
the archives open with warcio's own tools; misses, fail-run, pins, concurrent writers, a lost index."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import trajectory
from warcio.archiveiterator import ArchiveIterator

from fte_shell.config import RunConfig
from fte_shell.errors import FetchRefused
from fte_shell.fetch import FetchService
from fte_shell.runner import run_question
from fte_shell.snapshot import Snapshot, SnapshotMiss, SnapshotStore, open_store
from fte_shell.standins.research import ResearchPolicy
from fte_shell.standins.server import ScriptedServer
from fte_shell.workspace import Workspace
from tests.servers import FakeSerper, LoopbackServer

Q = "Who dredged the Tern Quay harbour?"
HARBOUR = """<html><head><title>Tern Quay harbour</title></head><body><main>
<h1>Tern Quay harbour</h1>
<p>The Tern Quay harbour was dredged in 1887 by the engineer Lio Brand.</p>
<p>Its breakwater is 640 metres long. Ferries leave for the outer islands every morning.</p>
</main></body></html>"""
BREAKWATER = """<html><head><title>Breakwaters of Tern Quay</title></head><body><article>
<p>The breakwater of the Tern Quay harbour was rebuilt after the storm of 1903.</p>
</article></body></html>"""


class Web:
    """The loopback web of these tests: two pages (one behind a redirect), a 404, and a Serper."""

    def __init__(self) -> None:
        self.pages = LoopbackServer().start()
        self.set_harbour(HARBOUR)
        self.pages.route("/breakwater", body=BREAKWATER)
        self.pages.redirect("/old-breakwater", "/breakwater", 301)
        self.pages.route("/gone", status=404, body="no such page")
        self.serper = FakeSerper([
            {"title": "Tern Quay harbour", "link": self.pages.url("/tern-quay"), "snippet": "dredged in 1887", "position": 1},
            {"title": "Breakwaters", "link": self.pages.url("/old-breakwater"), "snippet": "the breakwater", "position": 2},
            {"title": "Gone", "link": self.pages.url("/gone"), "snippet": "Tern Quay harbour dredged", "position": 3},
        ])

    def set_harbour(self, html: str) -> None:
        self.pages.route("/tern-quay", body=html)

    def close(self) -> None:
        self.pages.stop()
        self.serper.close()


def config(model_url: str, web: Web | None, profile: str, snap: Path, mode: str, **snapshot: Any) -> RunConfig:
    allow = [web.pages.host_port] if web is not None else []
    serper_url = web.serper.url if web is not None else SERPER_URL[0]
    return RunConfig.model_validate({
        "model": {"base_url": model_url, "model": "scripted", "max_retries": 0, "backoff_s": 0.01},
        "agent": {"profile": profile, "current_date": "2026-11-30", "max_turns": 20},
        "search": {"backend": "serper", "serper_url": serper_url, "num_results": 3,
                   **({"serper_api_key": "serper-key"} if web is not None else {})},  # a replay needs no key
        "sandbox": {"fetch_policy": {"allow_private": allow}},
        "snapshot": {"dir": str(snap), "mode": mode, **snapshot},
    })


SERPER_URL: list[str] = [""]
"""The Serper endpoint of the recording (set when a web is started): a replay names the same endpoint, so
its searches have the same keys, though nothing listens there any more."""


def run(profile: str, snap: Path, mode: str, out: Path, web: Web | None = None, **snapshot: Any) -> Any:
    with ScriptedServer(policy=ResearchPolicy()) as srv:
        return run_question(Q, config(srv.base_url, web, profile, snap, mode, **snapshot), out, qid="q1")


def observations(run_dir: Path) -> list[tuple[str, str]]:
    return [(e["name"], e["observation"]) for e in trajectory(run_dir) if e["type"] == "tool_call"]


def files(run_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((run_dir / "workspace").glob("*.txt"))}


STRUCTURED = ["fte", "open-find", "visit-snippet", "visit-summary", "snippet-only"]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every structured profile recorded once into one snapshot; then the web is stopped."""
    root = tmp_path_factory.mktemp("recorded")
    snap = root / "snap"
    web = Web()
    SERPER_URL[0] = web.serper.url
    try:
        results = {p: run(p, snap, "record", root / "rec" / p, web) for p in STRUCTURED}
        serper_calls = len(web.serper.requests)
        page_calls = web.pages.count()
    finally:
        web.close()
    return {"root": root, "snap": snap, "results": results, "serper_calls": serper_calls, "page_calls": page_calls}


def test_record_stop_replay_is_byte_identical_for_every_structured_profile(recorded: dict[str, Any], tmp_path: Path) -> None:
    root, snap = recorded["root"], recorded["snap"]
    assert all(r.stop_reason == "answer" for r in recorded["results"].values())
    # one search and one download per page for the five profiles together: the later ones were served by the store
    assert recorded["serper_calls"] == 1 and recorded["page_calls"] == 3  # harbour, redirect + breakwater
    for p in STRUCTURED:
        replayed = run(p, snap, "replay", tmp_path / p)
        assert replayed.stop_reason == "answer" and replayed.answer == recorded["results"][p].answer
        assert observations(tmp_path / p) == observations(root / "rec" / p), p
        assert files(tmp_path / p) == files(root / "rec" / p), p
    assert len(files(root / "rec" / "fte")) == 2  # the harbour and the breakwater (behind its redirect)
    assert any(name == "visit" for name, _ in observations(tmp_path / "visit-summary"))
    result = json.loads((tmp_path / "fte" / "result.json").read_text())
    assert result["meta"]["snapshot"] == {"dir": str(snap.resolve()), "mode": "replay", "on_miss": "refuse", "replayed": True}
    served = [json.loads(line)["served"] for line in (tmp_path / "fte" / "snapshot.jsonl").read_text().splitlines()]
    assert served and set(served) == {"snapshot"}


def _digest(payload: bytes) -> str:
    import base64
    import hashlib

    return "sha256:" + base64.b32encode(hashlib.sha256(payload).digest()).decode()


def test_archives_pass_warcio_check_and_index_and_read_back(recorded: dict[str, Any]) -> None:
    warcs = sorted(recorded["snap"].glob("*.warc.gz"))
    assert len(warcs) == 1  # one writer process, one file
    warcio = [sys.executable, "-c", "import sys; from warcio.cli import main; sys.exit(main())"]
    check = subprocess.run([*warcio, "check", "-v", *map(str, warcs)], capture_output=True, text=True, timeout=120, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "digest pass" in check.stdout and "digest fail" not in check.stdout
    index = subprocess.run([*warcio, "index", "-f", "warc-type,warc-target-uri", *map(str, warcs)],
                           capture_output=True, text=True, timeout=120, check=False)
    assert index.returncode == 0, index.stderr
    rows = [json.loads(line) for line in index.stdout.splitlines()]
    types = [r["warc-type"] for r in rows]
    assert types[0] == "warcinfo"
    assert types.count("conversion") == 2 and types.count("resource") == 1
    # Serper's HTTP exchange + 3 page hops (one redirect)
    assert types.count("request") == 4 and types.count("response") == 4
    assert types.count("metadata") == 3
    seen: dict[str, int] = {}
    with open(warcs[0], "rb") as fh:
        for rec in ArchiveIterator(fh):
            h = rec.rec_headers
            assert h.protocol == "WARC/1.1"
            payload = rec.content_stream().read()
            seen[h.get_header("WARC-Type")] = seen.get(h.get_header("WARC-Type"), 0) + 1
            if h.get_header("WARC-Type") == "warcinfo":
                continue
            assert h.get_header("WARC-Payload-Digest") == _digest(payload)  # sha256 of the payload as stored
            assert h.get_header("WARC-Block-Digest").startswith("sha256:")
            if h.get_header("WARC-Type") == "conversion":
                text = payload.decode()
                assert text.startswith("URL: " + h.get_header("WARC-Target-URI") + "\nTitle: ")
                rep = recorded["root"] / "rec" / "fte" / "workspace"
                assert text.encode() in {p.read_bytes() for p in rep.glob("*.txt")}  # exactly what went to /work
            if h.get_header("WARC-Type") == "metadata":
                meta = json.loads(payload)
                if meta["capture"]["kind"] == "page":
                    assert meta["status"] == 200 and meta["address"] == "127.0.0.1" and meta["first_asked_by"]["run"] == "q1"
                    assert len(meta["body_sha256"]) == 64 and meta["converter"]["name"].startswith("crawl4ai")
                    if meta["capture"]["key"].endswith("/old-breakwater"):
                        assert meta["redirects"][-1].endswith("/breakwater") and meta["final_url"].endswith("/breakwater")
    assert seen["response"] == 4
    import gzip

    raw = gzip.decompress(warcs[0].read_bytes())
    assert b"serper-key" not in raw and b"X-API-KEY: REDACTED" in raw  # the key never reaches the archive
    assert b'"q": "Who dredged the Tern Quay harbour?"' in raw or b'"q":"Who dredged' in raw  # the body sent
    from fte_shell.snapshot.tools import verify

    assert verify(recorded["snap"]).ok


def test_replay_miss_is_one_line_and_builds_no_http_client(recorded: dict[str, Any], tmp_path: Path) -> None:
    store = open_store(recorded["snap"])
    snap = Snapshot(store, "replay")
    svc = FetchService(Workspace(tmp_path / "ws"), RunConfig().sandbox.fetch_policy, page_cache=snap)
    with pytest.raises(FetchRefused) as e:
        svc.fetch("https://never.example/page")
    assert str(e.value) == "refused https://never.example/page: not in the snapshot (replay mode: nothing is fetched live)"
    assert svc._http is None  # replay never builds an HTTP client
    # a search miss is one line for the model too
    with ScriptedServer(policy=ResearchPolicy()) as srv:
        cfg = config(srv.base_url, None, "fte", recorded["snap"], "replay")
        res = run_question("What is a quay?", cfg, tmp_path / "run", qid="q2")
    (first, *_) = observations(tmp_path / "run")
    assert first[1].startswith('Error: search "What is a quay?" (serper@') and first[1].endswith(
        "not in the snapshot (replay mode: nothing is searched live)")
    assert res.stop_reason == "answer"


def test_fail_run_mode_stops_the_run_as_an_infrastructure_failure(recorded: dict[str, Any], tmp_path: Path) -> None:
    from fte_shell.stops import is_infra_failure

    with ScriptedServer(policy=ResearchPolicy()) as srv:
        cfg = config(srv.base_url, None, "fte", recorded["snap"], "replay", on_miss="fail-run")
        with pytest.raises(SnapshotMiss, match="not in the snapshot .* on_miss = fail-run"):
            run_question("What is a quay?", cfg, tmp_path / "run", qid="q3")
    end = [e for e in trajectory(tmp_path / "run") if e["type"] == "end"]
    assert end and end[0]["stop_reason"] == "snapshot_miss" and is_infra_failure("snapshot_miss")  # not "crashed"
    assert json.loads((tmp_path / "run" / "result.json").read_text())["stop_reason"] == "snapshot_miss"


def test_fail_run_mode_in_a_sweep_is_a_snapshot_miss_failure_not_retried(recorded: dict[str, Any], tmp_path: Path) -> None:
    """In ``bench``, a run stopped by a replay miss (``on_miss = fail-run``) is one ``snapshot_miss`` line of
    failures.jsonl: no immediate retry (a miss is deterministic), no outage (nothing to probe)."""
    from fte_shell.sweep import BenchConfig, run_sweep

    qs = tmp_path / "qs.jsonl"
    qs.write_text(json.dumps({"id": "quay", "question": "What is a quay?", "answer": "a wharf"}) + "\n")
    out = tmp_path / "sweep"
    with ScriptedServer(policy=ResearchPolicy()) as srv:
        cfg = config(srv.base_url, None, "fte", recorded["snap"], "replay", on_miss="fail-run")
        stats = run_sweep(BenchConfig(dataset=f"jsonl:{qs}", profiles=["fte"], out=out, retries=2), cfg)
        firsts = sum(1 for b in srv.requests if len(b["messages"]) == 2)
    assert (stats.done, stats.failed, stats.outages) == (0, 1, 0) and stats.failed_by_reason == {"snapshot_miss": 1}
    assert firsts == 1  # the run was not retried
    (row,) = [json.loads(x) for x in (out / "failures.jsonl").read_text().splitlines()]
    assert row["stop_reason"] == "snapshot_miss" and "SnapshotMiss" in row["error"]
    result = json.loads((out / "runs" / "fte" / "quay" / "r0" / "result.json").read_text())
    assert result["stop_reason"] == "snapshot_miss"


def test_refusals_are_recorded_and_replayed(tmp_path: Path) -> None:
    web = Web()
    policy = RunConfig.model_validate({"sandbox": {"fetch_policy": {"allow_private": [web.pages.host_port]}}}).sandbox.fetch_policy
    gone = web.pages.url("/gone")
    try:
        snap = Snapshot(SnapshotStore(tmp_path / "snap"), "record")
        with pytest.raises(FetchRefused) as live:
            FetchService(Workspace(tmp_path / "a"), policy, page_cache=snap).fetch(gone)
        hits = web.pages.count("/gone")
    finally:
        web.close()
    assert live.value.message.startswith("HTTP 404")
    replay = Snapshot(SnapshotStore(tmp_path / "snap"), "replay")
    with pytest.raises(FetchRefused) as again:
        FetchService(Workspace(tmp_path / "b"), policy, page_cache=replay).fetch(gone)
    assert again.value.message == live.value.message and hits == 1
    (cap,) = replay.store.index.all()
    assert cap.status == "refused" and replay.store.metadata(cap)["status"] == 404


def test_manifest_pins_the_captures_a_sweep_used_after_a_refresh(tmp_path: Path) -> None:
    web = Web()
    policy = RunConfig.model_validate({"sandbox": {"fetch_policy": {"allow_private": [web.pages.host_port]}}}).sandbox.fetch_policy
    url = web.pages.url("/tern-quay")
    manifest = tmp_path / "sweep-a" / "snapshot-manifest.jsonl"
    try:
        a = Snapshot(SnapshotStore(tmp_path / "snap"), "record", manifest=manifest)
        first = FetchService(Workspace(tmp_path / "a1"), policy, page_cache=a.bind("a", tmp_path / "a1r")).get_document(url)
        web.set_harbour(HARBOUR.replace("Lio Brand", "Ada Reef"))
        # a later refresh adds a newer capture; within its session every run sees that one capture
        b = Snapshot(SnapshotStore(tmp_path / "snap"), "refresh")
        newer = FetchService(Workspace(tmp_path / "b1"), policy, page_cache=b).get_document(url)
        again = FetchService(Workspace(tmp_path / "b2"), policy, page_cache=b).get_document(url)
        assert web.pages.count("/tern-quay") == 2
    finally:
        web.close()
    assert "Lio Brand" in first.text and "Ada Reef" in newer.text and again == newer
    store = SnapshotStore(tmp_path / "snap")
    assert len(store.index.for_key("page", first.source)) == 2
    # replaying with sweep A's manifest serves A's capture; without it, the newest
    pinned = Snapshot(store, "replay", pins_from=[manifest])
    assert FetchService(Workspace(tmp_path / "c"), policy, page_cache=pinned).get_document(url).text == first.text
    latest = Snapshot(store, "replay")
    assert "Ada Reef" in FetchService(Workspace(tmp_path / "d"), policy, page_cache=latest).get_document(url).text
    # the run's own log pins the same capture (export reads it)
    (line,) = [json.loads(x) for x in (tmp_path / "a1r" / "snapshot.jsonl").read_text().splitlines()]
    assert line["capture"] == json.loads(manifest.read_text().splitlines()[0])["capture"]


WRITER = r"""
import sys
from fte_shell.config import FetchPolicy
from fte_shell.fetch import FetchService
from fte_shell.snapshot import Snapshot, open_store
from fte_shell.workspace import Workspace
snap_dir, ws, host, *urls = sys.argv[1:]
snap = Snapshot(open_store(snap_dir), "refresh")
svc = FetchService(Workspace(ws), FetchPolicy(allow_private=[host]), page_cache=snap)
for u in urls:
    svc.get_document(u)
print("ok")
"""


def test_concurrent_writers_and_an_index_rebuilt_after_deletion(tmp_path: Path) -> None:
    import os

    web = Web()
    urls = [web.pages.route(f"/p{i}", body=f"page {i}\\n", content_type="text/plain") for i in range(6)]
    snap = tmp_path / "snap"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    try:
        procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(snap), str(tmp_path / f"ws{k}"), web.pages.host_port, *urls],
                                  env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for k in range(3)]
        outs = [p.communicate(timeout=300) for p in procs]
    finally:
        web.close()
    assert all(p.returncode == 0 for p in procs), outs
    assert len(list(snap.glob("*.warc.gz"))) == 3  # one WARC file per writer process
    store = SnapshotStore(snap)
    before = sorted((c.id, c.key, c.file, c.meta_offset, c.sha256) for c in store.index.all())
    assert len(before) == 18 and {k for _, k, *_ in before} == set(urls)
    store.close()
    from fte_shell.snapshot.tools import verify

    assert verify(snap).ok
    for f in snap.glob("index.sqlite*"):
        f.unlink()
    rebuilt = SnapshotStore(snap)
    assert rebuilt.index.rebuilt
    assert sorted((c.id, c.key, c.file, c.meta_offset, c.sha256) for c in rebuilt.index.all()) == before
    doc = FetchService(Workspace(tmp_path / "r"), RunConfig().sandbox.fetch_policy,
                       page_cache=Snapshot(rebuilt, "replay")).get_document(urls[2])
    assert doc.title == "p2" and "page 2" in doc.text


OPENER = r"""
import sys, time
from pathlib import Path
from fte_shell.snapshot.index import Index
root, t0 = Path(sys.argv[1]), float(sys.argv[2])
for i in range(int(sys.argv[3])):
    while time.time() < t0 + 0.15 * i:
        pass
    Index(root / str(i)).close()
print("ok")
"""


def test_processes_opening_a_new_index_at_the_same_moment_all_open_it(tmp_path: Path) -> None:
    """sqlite refuses at once ("database is locked", no busy wait) a process that opens the file while
    another makes it a WAL database; three processes open 30 new indexes each, in step: before the fix
    about one round in five failed."""
    import os
    import time

    rounds = 30
    for i in range(rounds):
        (tmp_path / str(i)).mkdir()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    t0 = time.time() + 3.0
    procs = [subprocess.Popen([sys.executable, "-c", OPENER, str(tmp_path), str(t0), str(rounds)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [o for o, _ in outs] == ["ok\n"] * 3, outs
    assert all((tmp_path / str(i) / "index.sqlite").exists() for i in range(rounds))


def test_closed_world_refuses_outside_urls_unless_open_web(tmp_path: Path) -> None:
    from fte_shell.fetch.pages import ClosedWorld
    from fte_shell.search import LocalCorpus
    from fte_shell.search.corpus import CorpusDoc, build_corpus

    corpus = LocalCorpus(build_corpus([CorpusDoc(docid="tern-quay", title="Tern Quay", text="dredged in 1887")],
                                      tmp_path / "idx", name="harbour"))
    web = Web()
    url = web.pages.url("/tern-quay")
    policy = RunConfig.model_validate({"sandbox": {"fetch_policy": {"allow_private": [web.pages.host_port]}}}).sandbox.fetch_policy
    try:
        closed = FetchService(Workspace(tmp_path / "a"), policy, local=ClosedWorld(corpus))
        assert closed.fetch("tern-quay").new
        with pytest.raises(FetchRefused) as e:
            closed.fetch(url)
        assert web.pages.count("/tern-quay") == 0  # never fetched live
        assert "not in the local corpus" in str(e.value) and "open_web = true" in str(e.value) and "\n" not in str(e.value)
        opened = FetchService(Workspace(tmp_path / "b"), policy, local=corpus)
        assert opened.fetch(url).new and web.pages.count("/tern-quay") == 1
    finally:
        web.close()
        corpus.close()


# --- the shell profile (real sandbox) and the CLI: run, bench, shell ------------------------------------
@pytest.mark.docker
def test_shell_profile_record_stop_replay_is_byte_identical(tmp_path: Path, docker_ready: None) -> None:
    snap = tmp_path / "snap"
    web = Web()
    SERPER_URL[0] = web.serper.url
    try:
        rec = run("shell", snap, "record", tmp_path / "rec", web)
    finally:
        web.close()
    rep = run("shell", snap, "replay", tmp_path / "rep")
    assert rec.stop_reason == rep.stop_reason == "answer" and rec.answer == rep.answer
    assert observations(tmp_path / "rep") == observations(tmp_path / "rec")
    assert len(files(tmp_path / "rec")) == 2 and files(tmp_path / "rep") == files(tmp_path / "rec")
    # fail-run through the gateway: the container's `search` misses, the run stops
    with ScriptedServer(policy=ResearchPolicy()) as srv:
        cfg = config(srv.base_url, None, "shell", snap, "replay", on_miss="fail-run")
        with pytest.raises(SnapshotMiss, match="on_miss = fail-run"):
            run_question("What is a quay?", cfg, tmp_path / "miss", qid="q4")
    assert json.loads((tmp_path / "miss" / "result.json").read_text())["stop_reason"] == "snapshot_miss"


CLEAN_ENV = {"OPENAI_BASE_URL": "", "OPENAI_API_KEY": "", "OPENAI_MODEL": "", "SERPER_API_KEY": "", "COLUMNS": "200"}


def _toml(path: Path, web: Web) -> Path:
    path.write_text(
        f'[search]\nbackend = "serper"\nserper_url = "{web.serper.url}"\nnum_results = 3\n'
        f'[sandbox.fetch_policy]\nallow_private = ["{web.pages.host_port}"]\n'
    )
    return path


def test_cli_run_and_bench_record_then_replay_and_export(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from fte_shell.cli import app

    cli = CliRunner()
    snap = tmp_path / "snap"
    qs = tmp_path / "qs.jsonl"
    qs.write_text(json.dumps({"id": "tq", "question": Q, "answer": "Lio Brand"}) + "\n")
    web = Web()
    cfg = _toml(tmp_path / "c.toml", web)
    bench = ["bench", f"jsonl:{qs}", "--profiles", "fte,visit-snippet", "--scripted", "--config", str(cfg),
             "--snapshot", str(snap), "--no-progress", "--no-judge"]
    try:
        with ScriptedServer(policy=ResearchPolicy()) as srv:
            env = {**CLEAN_ENV, "OPENAI_BASE_URL": srv.base_url, "OPENAI_MODEL": "m", "SERPER_API_KEY": "k"}
            r = cli.invoke(app, ["run", Q, "--profile", "fte", "--config", str(cfg), "--out", str(tmp_path / "run-rec"),
                                 "--snapshot", str(snap), "--snapshot-mode", "record", "--quiet"], env=env)
            assert r.exit_code == 0, r.output
        b = cli.invoke(app, [*bench, "--out", str(tmp_path / "sweep-rec"), "--snapshot-mode", "record"],
                       env={**CLEAN_ENV, "SERPER_API_KEY": "k"})
        assert b.exit_code == 0, b.output
        other = Snapshot(open_store(snap), "record")  # a capture no run used (export leaves it out)
        policy = RunConfig.model_validate({"sandbox": {"fetch_policy": {"allow_private": [web.pages.host_port]}}}).sandbox.fetch_policy
        with pytest.raises(FetchRefused):
            FetchService(Workspace(tmp_path / "other"), policy, page_cache=other).fetch(web.pages.url("/gone"))
    finally:
        web.close()
    with ScriptedServer(policy=ResearchPolicy()) as srv:
        env = {**CLEAN_ENV, "OPENAI_BASE_URL": srv.base_url, "OPENAI_MODEL": "m"}  # no Serper key: replay needs none
        r = cli.invoke(app, ["run", Q, "--profile", "fte", "--config", str(cfg), "--out", str(tmp_path / "run-rep"),
                             "--snapshot", str(snap), "--snapshot-mode", "replay", "--quiet"], env=env)
        assert r.exit_code == 0, r.output
    assert observations(tmp_path / "run-rep") == observations(tmp_path / "run-rec")
    assert files(tmp_path / "run-rep") == files(tmp_path / "run-rec") and files(tmp_path / "run-rec")
    pins = tmp_path / "sweep-rec" / "shared" / "snapshot-manifest.jsonl"
    b = cli.invoke(app, [*bench, "--out", str(tmp_path / "sweep-rep"), "--snapshot-mode", "replay",
                         "--snapshot-manifest", str(pins)], env=CLEAN_ENV)
    assert b.exit_code == 0, b.output
    assert "1 run(s) finished now (1 answered, 0 failed)" not in b.output and "2 run(s) finished now (2 answered" in b.output
    for profile in ("fte", "visit-snippet"):
        a, z = tmp_path / "sweep-rec" / "runs" / profile / "tq" / "r0", tmp_path / "sweep-rep" / "runs" / profile / "tq" / "r0"
        assert observations(a) == observations(z) and files(a) == files(z), profile
    manifest = pins.read_text().splitlines()
    assert {json.loads(x)["kind"] for x in manifest} == {"page", "search"}
    replay_pins = (tmp_path / "sweep-rep" / "shared" / "snapshot-manifest.jsonl").read_text().splitlines()
    assert sorted(json.loads(x)["capture"] for x in replay_pins) == sorted(json.loads(x)["capture"] for x in manifest)
    bad = cli.invoke(app, [*bench, "--out", str(tmp_path / "sweep-bad"), "--snapshot-mode", "bogus"], env=CLEAN_ENV)
    assert bad.exit_code == 2 and "snapshot.mode" in bad.output
    # export what the single run used: a small archive that warcio accepts and replays the run alone
    e = cli.invoke(app, ["snapshot", "export", str(snap), "--run", str(tmp_path / "run-rec"), "--out", str(tmp_path / "pub")])
    assert e.exit_code == 0, e.output
    (pub,) = (tmp_path / "pub").glob("*.warc.gz")
    check = subprocess.run([sys.executable, "-c", "import sys; from warcio.cli import main; sys.exit(main())", "check", str(pub)],
                           capture_output=True, text=True, timeout=120, check=False)
    assert check.returncode == 0, check.stdout
    exported = SnapshotStore(tmp_path / "pub").index.all()
    used = {json.loads(x)["capture"] for x in (tmp_path / "run-rec" / "snapshot.jsonl").read_text().splitlines()}
    assert {c.id for c in exported} == used and len(exported) < len(SnapshotStore(snap).index.all())
    v = cli.invoke(app, ["snapshot", "verify", str(tmp_path / "pub")])
    assert v.exit_code == 0 and "ok" in v.output
    ls = cli.invoke(app, ["snapshot", "ls", str(snap), "--json"])
    assert ls.exit_code == 0 and any(json.loads(x)["uri"].endswith("/old-breakwater") for x in ls.output.splitlines())
    show = cli.invoke(app, ["snapshot", "show", str(snap), json.loads(manifest[0])["uri"]])
    assert show.exit_code == 0 and "capture <urn:uuid:" in show.output
    m = cli.invoke(app, ["snapshot", "merge", str(tmp_path / "merged"), str(tmp_path / "pub"), str(snap)])
    assert m.exit_code == 0, m.output
    assert {c.id for c in SnapshotStore(tmp_path / "merged").index.all()} == {c.id for c in SnapshotStore(snap).index.all()}
    missing = cli.invoke(app, ["snapshot", "show", str(snap), "https://never.example/"])
    assert missing.exit_code == 1 and "is not in the snapshot" in missing.output


@pytest.mark.docker
def test_cli_shell_records_and_replays_through_the_real_sandbox(tmp_path: Path, docker_ready: None) -> None:
    import os

    snap = tmp_path / "snap"
    env = {**os.environ, **CLEAN_ENV, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    web = Web()
    cfg = _toml(tmp_path / "c.toml", web)
    url = web.pages.url("/old-breakwater")
    script = f"search 'Tern Quay harbour'\nfetch {url}\nexit\n"

    def shell(mode: str, ws: Path, extra_env: dict[str, str]) -> str:
        p = subprocess.run([sys.executable, "-m", "fte_shell", "shell", "--config", str(cfg), "--workspace", str(ws),
                            "--snapshot", str(snap), "--snapshot-mode", mode], input=script, capture_output=True,
                           text=True, timeout=300, env={**env, **extra_env}, check=False)
        assert p.returncode == 0, p.stdout + p.stderr
        return p.stdout

    try:
        live = shell("record", tmp_path / "ws-rec", {"SERPER_API_KEY": "k"})
    finally:
        web.close()
    again = shell("replay", tmp_path / "ws-rep", {})
    assert "3 results for" in live and "new" in live
    assert again == live
    rec = {p.name: p.read_bytes() for p in (tmp_path / "ws-rec").glob("*.txt")}
    assert len(rec) == 1 and rec == {p.name: p.read_bytes() for p in (tmp_path / "ws-rep").glob("*.txt")}


def test_a_run_over_a_local_corpus_is_a_closed_world_unless_open_web(tmp_path: Path) -> None:
    from fte_shell.search.corpus import CorpusDoc, build_corpus

    idx = build_corpus([CorpusDoc(docid="tern-quay", title="Tern Quay", text="dredged in 1887 by Lio Brand")],
                       tmp_path / "idx", name="harbour")
    web = Web()
    url = web.pages.url("/tern-quay")
    script = [{"tool_calls": [{"name": "fetch", "arguments": {"url": url}}]}, "<answer>x</answer>"]
    seen = {}
    try:
        for open_web in (False, True):
            cfg = RunConfig.model_validate({
                "model": {"model": "scripted", "max_retries": 0}, "agent": {"profile": "fte", "current_date": "2026-11-30"},
                "search": {"backend": "local", "corpus": str(idx), "open_web": open_web},
                "sandbox": {"fetch_policy": {"allow_private": [web.pages.host_port]}},
            })
            with ScriptedServer(script) as srv:
                cfg.model.base_url = srv.base_url
                run_question(Q, cfg, tmp_path / f"run-{open_web}")
            seen[open_web] = (observations(tmp_path / f"run-{open_web}")[0][1], web.pages.count("/tern-quay"))
    finally:
        web.close()
    refusal = (f"Error: refused {url}: not in the local corpus (this run is a closed world over the corpus; "
               "[search] open_web = true lets it fetch other URLs)")
    assert seen[False] == (refusal, 0)
    assert seen[True][0].endswith(f'  new  {url}  "Tern Quay harbour"') and seen[True][1] == 1


def test_a_policy_refusal_is_checked_again_when_recording_and_replayed_as_recorded(tmp_path: Path) -> None:
    web = Web()
    url = web.pages.url("/tern-quay")
    strict = RunConfig().sandbox.fetch_policy  # loopback is not allowed
    loose = RunConfig.model_validate({"sandbox": {"fetch_policy": {"allow_private": [web.pages.host_port]}}}).sandbox.fetch_policy
    try:
        snap = Snapshot(SnapshotStore(tmp_path / "snap"), "record")
        with pytest.raises(FetchRefused) as refused:
            FetchService(Workspace(tmp_path / "a"), strict, page_cache=snap).fetch(url)
        replay = Snapshot(SnapshotStore(tmp_path / "snap"), "replay")
        with pytest.raises(FetchRefused) as again:
            FetchService(Workspace(tmp_path / "b"), loose, page_cache=replay).fetch(url)
        assert again.value.message == refused.value.message and web.pages.count() == 0
        later = Snapshot(SnapshotStore(tmp_path / "snap"), "record")
        assert FetchService(Workspace(tmp_path / "c"), loose, page_cache=later).fetch(url).new
        assert web.pages.count("/tern-quay") == 1
    finally:
        web.close()


def test_verify_finds_a_tampered_index_a_missing_entry_and_a_corrupt_record(recorded: dict[str, Any], tmp_path: Path) -> None:
    import shutil
    import sqlite3

    from typer.testing import CliRunner

    from fte_shell.cli import app
    from fte_shell.snapshot.tools import verify

    snap = tmp_path / "snap"
    shutil.copytree(recorded["snap"], snap)
    db = sqlite3.connect(snap / "index.sqlite")
    (first, second) = [r[0] for r in db.execute("SELECT id FROM captures WHERE kind = 'page' ORDER BY id")]
    db.execute("UPDATE captures SET sha256 = ? WHERE id = ?", ("0" * 64, first))
    db.execute("DELETE FROM captures WHERE id = ?", (second,))
    db.commit()
    db.close()
    problems = verify(snap).problems
    assert any(f"index entry of {first}" in p for p in problems)
    assert any(f"capture {second}" in p and "is not in the index" in p for p in problems)
    r = CliRunner().invoke(app, ["snapshot", "verify", str(snap)])
    assert r.exit_code == 1 and "problem" in r.output
    # a stored page edited by hand (its gzip member rewritten) fails its digest
    import gzip

    (warc,) = snap.glob("*.warc.gz")
    conv = next(c for c in SnapshotStore(recorded["snap"]).index.all() if c.kind == "page")
    data = warc.read_bytes()
    member = gzip.decompress(data[conv.body_offset : conv.body_offset + conv.body_length])
    edited = member.replace(b"Lio Brand", b"Lio Brant", 1) if b"Lio Brand" in member else member.replace(b"1903", b"1904", 1)
    assert edited != member
    warc.write_bytes(data[: conv.body_offset] + gzip.compress(edited) + data[conv.body_offset + conv.body_length :])
    assert any("digest" in p.lower() for p in verify(snap).problems)
