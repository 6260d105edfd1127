"""``bench --retrievers``: every (profile, retriever) arm on the same questions through the real harness
(structured profiles, the scripted loopback model, the HotpotQA local corpus; no Docker), with ``bm25s`` and a
third-party kind loaded by ``module:attr`` (tests/retriever_kinds.py): a run directory per arm, the retriever
in each run's configuration, ``result.json``, ``sweep.json`` and the exports, the searches of each arm ranked
by its own retriever, resume, the combination with ``--context``, and the report's paired rows per arm. An
old sweep (recorded before ``[search] retriever``) resumes with bm25s unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_bench_arms import bench  # the sweep command of the arm tests
from typer.testing import CliRunner

from fte_shell.cli import app
from fte_shell.record.events import SearchFact, StartEvent, ToolCallEvent
from fte_shell.record.rundir import read_events

runner = CliRunner()
OVERLAP = "tests.retriever_kinds:OVERLAP"
OVERLAP_DIR = "tests.retriever_kinds-OVERLAP"


def searches(run_dir: Path) -> list[SearchFact]:
    return [s for e in read_events(run_dir) if isinstance(e, ToolCallEvent) for s in (e.meta.searches or [])]


def results(out: Path) -> dict[Path, dict]:
    return {p.parent: json.loads(p.read_text()) for p in sorted((out / "runs").glob("*/*/r*/result.json"))}


def test_two_retriever_sweep_paired_in_report(tmp_path: Path, hotpotqa_dir: Path, hotpotqa_corpus: Path) -> None:
    out = tmp_path / "sweep"
    args = bench(out, hotpotqa_dir, hotpotqa_corpus, "--retrievers", f"bm25s,{OVERLAP}")
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    assert "8 run(s) finished now" in r.output
    arms = sorted(p.name for p in (out / "runs").iterdir())
    assert arms == sorted(["fte@bm25s", f"fte@{OVERLAP_DIR}", "snippet-only@bm25s", f"snippet-only@{OVERLAP_DIR}"])
    manifest = json.loads((out / "sweep.json").read_text())
    assert manifest["retrievers"] == ["bm25s", OVERLAP] and manifest["bench"]["retrievers"] == ["bm25s", OVERLAP]
    assert set(manifest["run_config_digests"]) == set(arms)
    assert "retriever" not in manifest["config_canonical"]["search"]  # it varies by arm
    meta = json.loads((hotpotqa_corpus / "meta.json").read_text())
    base = f"local:{meta['name']}:{meta['fingerprint'][:8]}"  # bm25s: the name of every earlier version
    assert manifest["search"] == {"backend": "local", "recorded_as": {"bm25s": base, OVERLAP: f"{base}@{OVERLAP}"}}
    res = results(out)
    assert len(res) == 8
    for run_dir, rec in res.items():
        arm = run_dir.parent.parent.name
        spec = "bm25s" if arm.endswith("@bm25s") else OVERLAP
        assert rec["meta"]["retriever"] == spec
        assert rec["config_digest"] == manifest["run_config_digests"][arm]
        events = read_events(run_dir)
        start = next(e for e in events if isinstance(e, StartEvent))
        assert start.config["search"]["retriever"] == spec
        made = searches(run_dir)
        assert made, f"{run_dir}: the scripted policy searched"
        assert {e.backend for e in made} == {base if spec == "bm25s" else f"{base}@{OVERLAP}"}  # its own ranking
    assert (hotpotqa_corpus / "indexes" / "bm25s").is_dir() and (hotpotqa_corpus / "indexes" / "overlap-1").is_dir()

    r = runner.invoke(app, args)  # resume: nothing to do
    assert r.exit_code == 0 and "8 already done" in r.output and "0 run(s) finished now" in r.output

    r = runner.invoke(app, ["report", str(out), "--out", str(tmp_path / "rep")])
    assert r.exit_code == 0, r.output
    md = (tmp_path / "rep" / "report.md").read_text()
    rows = [line.split(" | ")[0].lstrip("| ") for line in md.split("## Arms")[1].split("\n\n")[1].splitlines()[2:]]
    assert rows == ["fte · bm25s", f"fte · {OVERLAP}", "snippet-only · bm25s", f"snippet-only · {OVERLAP}"]
    metrics = json.loads((tmp_path / "rep" / "metrics.json").read_text())
    assert {r["retriever"] for r in metrics["runs"]} == {"bm25s", OVERLAP}
    # paired run for run: every pair of the 4 arms, each on the 2 judged questions
    pairs = {(p["a"], p["b"]): p for p in metrics["paired"]}
    assert len(pairs) == 6 and {p["n"] for p in pairs.values()} == {2}
    assert ("fte · bm25s", f"fte · {OVERLAP}") in pairs

    r = runner.invoke(app, ["export", "atif", str(out), "--out", str(tmp_path / "atif")])
    assert r.exit_code == 0, r.output
    exported = sorted((tmp_path / "atif").rglob("r0.json"))
    assert len(exported) == 8
    metas = [json.loads(p.read_text())["agent"]["extra"]["retriever"] for p in exported]
    assert sorted(set(metas)) == sorted({"bm25s", OVERLAP})
    assert len({p.relative_to(tmp_path / "atif").parts[0] for p in exported}) == 4  # a directory per arm


def test_retrievers_with_context_arms(tmp_path: Path, hotpotqa_dir: Path, hotpotqa_corpus: Path) -> None:
    out = tmp_path / "sweep"
    r = runner.invoke(app, [*bench(out, hotpotqa_dir, hotpotqa_corpus, "--retrievers", f"bm25s,{OVERLAP}",
                                   "--context", "keep_all,discard_all"), "--profiles", "fte", "--limit", "1"])
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in (out / "runs").iterdir()) == sorted(
        ["fte@bm25s", "fte@bm25s+discard_all", f"fte@{OVERLAP_DIR}", f"fte@{OVERLAP_DIR}+discard_all"])
    r = runner.invoke(app, ["report", str(out), "--out", str(tmp_path / "rep")])
    assert r.exit_code == 0, r.output
    metrics = json.loads((tmp_path / "rep" / "metrics.json").read_text())
    assert [p["label"] for p in metrics["profiles"]] == [
        "fte · bm25s · keep_all", "fte · bm25s · discard_all", f"fte · {OVERLAP} · keep_all",
        f"fte · {OVERLAP} · discard_all"]


@pytest.mark.parametrize(("spec", "message"), [
    ("bm25s,bm25s", "bm25s more than once"),
    ("nosuch", "unknown retriever"),
    ("dense:a:b,dense:a-b", "share the arm directory"),
])
def test_bad_retrievers_are_one_line(tmp_path: Path, hotpotqa_dir: Path, hotpotqa_corpus: Path, spec: str,
                                     message: str) -> None:
    r = runner.invoke(app, bench(tmp_path / "s", hotpotqa_dir, hotpotqa_corpus, "--retrievers", spec))
    assert r.exit_code == 2 and message in r.output, r.output
    assert not (tmp_path / "s").exists()


def test_old_sweep_resumes_with_bm25s(tmp_path: Path, hotpotqa_dir: Path, hotpotqa_corpus: Path) -> None:
    """A sweep recorded before ``[search] retriever``: its manifest's configuration has no such key. Resumed
    by this version with the default configuration, its new runs rank with bm25s (as the old ones did), under
    the same backend name, and the configuration compares equal (no change refused or recorded)."""
    out = tmp_path / "sweep"
    r = runner.invoke(app, [*bench(out, hotpotqa_dir, hotpotqa_corpus, "--retriever", "bm25s"), "--limit", "1"])
    assert r.exit_code == 0, r.output
    manifest = json.loads((out / "sweep.json").read_text())
    # make it an old sweep: what the earlier version wrote (no retriever anywhere)
    del manifest["config"]["search"]["retriever"]
    del manifest["config"]["search"]["embeddings"]
    del manifest["retrievers"]
    (out / "sweep.json").write_text(json.dumps(manifest, indent=2))
    for run_dir in (out / "runs").glob("*/*/r*"):
        res = json.loads((run_dir / "result.json").read_text())
        res["meta"].pop("retriever")
        (run_dir / "result.json").write_text(json.dumps(res))
    old_backends = {e.backend for d in (out / "runs").glob("*/*/r*") for e in searches(d)}
    meta = json.loads((hotpotqa_corpus / "meta.json").read_text())
    assert old_backends == {f"local:{meta['name']}:{meta['fingerprint'][:8]}"}

    r = runner.invoke(app, bench(out, hotpotqa_dir, hotpotqa_corpus))  # the default retriever is not bm25s
    assert r.exit_code == 0, r.output
    assert "2 already done" in r.output and "2 run(s) finished now" in r.output
    assert "changed configuration" not in r.output
    after = json.loads((out / "sweep.json").read_text())
    assert after["config_changes"] == [] and after["config"]["search"]["retriever"] == "bm25s"
    new = [d for d in (out / "runs").glob("*/*/r*") if json.loads((d / "result.json").read_text())["meta"].get("retriever")]
    assert len(new) == 2
    for d in new:
        assert json.loads((d / "result.json").read_text())["meta"]["retriever"] == "bm25s"
        assert {e.backend for e in searches(d)} <= old_backends
    # a retriever given explicitly is a change of the sweep's configuration, refused
    r = runner.invoke(app, [*bench(out, hotpotqa_dir, hotpotqa_corpus), "--retriever", OVERLAP])
    assert r.exit_code == 2 and "search.retriever" in r.output and "--allow-config-change" in r.output


def test_retriever_arms_recorded_apart_in_a_snapshot(tmp_path: Path, hotpotqa_dir: Path, hotpotqa_corpus: Path) -> None:
    """With ``--snapshot``, each arm's searches are captures of its own backend name; a replay of the same
    sweep answers every search from them."""
    snap = tmp_path / "snap"
    args = [*bench(tmp_path / "rec", hotpotqa_dir, hotpotqa_corpus, "--retrievers", f"bm25s,{OVERLAP}"),
            "--profiles", "fte", "--limit", "1", "--snapshot", str(snap)]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    from fte_shell.snapshot import SnapshotStore

    names = {json.loads(c.key)["backend"] for c in SnapshotStore(snap).index.all() if c.kind == "search"}
    meta = json.loads((hotpotqa_corpus / "meta.json").read_text())
    base = f"local:{meta['name']}:{meta['fingerprint'][:8]}"
    assert names == {base, f"{base}@{OVERLAP}"}
    replay = [*bench(tmp_path / "rep", hotpotqa_dir, hotpotqa_corpus, "--retrievers", f"bm25s,{OVERLAP}"),
              "--profiles", "fte", "--limit", "1", "--snapshot", str(snap), "--snapshot-mode", "replay"]
    r = runner.invoke(app, replay)
    assert r.exit_code == 0, r.output
    for run_dir in (tmp_path / "rep" / "runs").glob("*/*/r*"):
        made = searches(run_dir)
        assert made and all(s.cache_hit for s in made)  # the snapshot answered every search
