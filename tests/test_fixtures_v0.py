"""Directories written by the previous main (``tests/fixtures/v0``: a sweep, a run, and the old report's
metrics.json of that sweep, all schema 0) open in ``report`` with the same metrics, in ``judge`` with the
same verdicts, in ``view``, and the sweep resumes in ``bench``. Also: typed events round-trip, old
trajectories convert on read, and a run written now records schema 1 with its fetch and search facts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO
from typer.testing import CliRunner

from fte_shell.cli import app
from fte_shell.config import ModelConfig, RunConfig
from fte_shell.metrics import actions_from_events, run_metrics
from fte_shell.record.events import (
    SCHEMA_VERSION,
    EndEvent,
    OtherEvent,
    StartEvent,
    ToolCallEvent,
    event_dict,
    parse_event,
    typed_events,
)
from fte_shell.record.rundir import find_runs, read_events, read_judgement
from fte_shell.record.sweepdir import SweepDir
from fte_shell.report.build import write_report
from fte_shell.sweep.judge import judge_runs
from fte_shell.viewer import Catalog

FIXTURES = REPO / "tests" / "fixtures" / "v0"
OLD_ROOT = "/work/fixtures/sweep-v0"  # where the fixture sweep was written
runner = CliRunner()


@pytest.fixture
def sweep(tmp_path: Path) -> Path:
    out = tmp_path / "sweep-v0"
    shutil.copytree(FIXTURES / "sweep", out)
    return out


def _raw_lines(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (run_dir / "trajectory.jsonl").read_text().splitlines() if x.strip()]


def test_old_trajectories_convert_on_read_and_round_trip(sweep: Path) -> None:
    for d in [FIXTURES / "run", *(d for d, *_ in find_runs(sweep))]:
        raw = _raw_lines(d)
        assert all("schema_version" not in e for e in raw)  # written before versioning
        events = read_events(d)
        assert not [e for e in events if isinstance(e, OtherEvent)], d  # every event of the old main is known
        assert isinstance(events[0], StartEvent) and events[0].schema_version == 0
        assert isinstance(events[-1], EndEvent) and events[-1].stop_reason == "answer"
        calls = [e for e in events if isinstance(e, ToolCallEvent)]
        assert calls and all(c.meta.fetches is None and c.meta.searches is None for c in calls)
        # converted = the raw events plus the start's schema_version 0; nothing lost, nothing invented
        assert [event_dict(e) for e in events] == [{**e, "schema_version": 0} if e["type"] == "start" else e
                                                   for e in raw]


def test_unknown_types_and_keys_are_kept() -> None:
    ev = parse_event({"type": "tool_call", "t": 1.0, "name": "x", "future_field": [1], "meta": {"later": 2}})
    assert isinstance(ev, ToolCallEvent) and event_dict(ev)["future_field"] == [1]
    assert event_dict(ev)["meta"] == {"later": 2}
    other = parse_event({"type": "telemetry", "t": 2.0, "cpu": 0.5})
    assert isinstance(other, OtherEvent) and event_dict(other) == {"type": "telemetry", "t": 2.0, "cpu": 0.5}


def test_report_of_the_old_sweep_has_the_old_metrics(sweep: Path, tmp_path: Path) -> None:
    write_report([sweep], tmp_path / "rep")
    got = json.loads((tmp_path / "rep" / "metrics.json").read_text().replace(str(sweep), OLD_ROOT))
    want = json.loads((FIXTURES / "sweep-metrics.json").read_text())
    # every number the old report gave is given again, unchanged; keys added since carry no value for an
    # old sweep (its runs recorded no cost)
    assert _without(got, ADDED | COUNTED) == want
    assert {v for k, v in _items(got) if k in ADDED} == {None}
    # the stop counts added since count what the old runs recorded; no stuck detector existed then
    assert {p["profile"]: p["stops"] for p in got["profiles"]} == {"shell": {"answer": 2}, "fte": {"answer": 2},
                                                                  "open-find": {"answer": 2}}
    # the context arms added since: every old run is keep_all (an old profile row names no arm), none edited
    assert {r["context"] for r in got["runs"]} == {"keep_all"}
    assert {p["context"] for p in got["profiles"]} == {None}
    assert {(r["edits"]["edits"], r["edits"]["first_edit_turn"]) for r in got["runs"]} == {(0, None)}
    assert {v for k, v in _items(got) if k in {"stuck_noticed", "stuck_went_on", "stuck_notices"}} == {0}
    # the retrieval arms added since: the old runs ranked with bm25s (the retriever of that time), the corpus
    # was not in the box, and an old profile row names no retriever arm
    assert {(r["retriever"], r["corpus_in_box"]) for r in got["runs"]} == {("bm25s", False)}
    assert {p["retriever"] for p in got["profiles"]} == {None}


ADDED = {"cost_usd", "cost_per_run", "cost_per_correct"}
"""Keys of metrics.json that the report gained after the fixture was written."""
COUNTED = {"stops", "stuck_noticed", "stuck_went_on", "stuck_notices", "context", "edits", "retriever",
           "corpus_in_box"}
"""Keys of metrics.json that the report gained after the fixture was written, counted from the old runs."""


def _without(x: Any, keys: set[str]) -> Any:
    if isinstance(x, dict):
        return {k: _without(v, keys) for k, v in x.items() if k not in keys}
    if isinstance(x, list):
        return [_without(v, keys) for v in x]
    return x


def _items(x: Any) -> list[tuple[str, Any]]:
    if isinstance(x, dict):
        return [kv for k, v in x.items() for kv in [(k, v), *_items(v)]]
    if isinstance(x, list):
        return [kv for v in x for kv in _items(v)]
    return []


def test_judge_of_the_old_sweep_gives_the_old_verdicts(sweep: Path) -> None:
    before = {d: read_judgement(d) for d, *_ in find_runs(sweep)}
    s = judge_runs([sweep], "match", force=True)
    assert (s.judged, s.errors) == (6, [])
    # every old field keeps its value; the fields verdicts gained since (which preset graded it, the
    # three-way grade, the grading call) are added with what a model-free match gives
    new = {"preset": "match", "grade": None, "call": None}
    assert {d: read_judgement(d) for d, *_ in find_runs(sweep)} == {
        d: {"match": {**j["match"], **new}} for d, j in before.items() if j is not None}


def test_view_of_the_old_sweep_and_run(sweep: Path) -> None:
    cat = Catalog([sweep, FIXTURES / "run"])
    rows = cat.index()["runs"]
    assert len(rows) == 7 and {r["profile"] for r in rows} == {"shell", "fte", "open-find"}
    assert {r["status"] for r in rows if r["root"] == 0} <= {"correct", "wrong"}
    for run in cat.runs:
        d = cat.detail(run)
        assert d["events"][0]["type"] == "start" and d["events"][-1]["type"] == "end"
        for doc in d["workspace"]:  # the headers, read by fte_shell.workspace
            assert doc["title"] and doc["source"]


def test_the_old_sweep_resumes_in_bench(sweep: Path, hotpotqa_dir: Path, docker_ready: None, tmp_path: Path) -> None:
    sd = SweepDir(sweep)
    manifest = sd.manifest()
    assert manifest is not None
    manifest.dataset.source = str(hotpotqa_dir)
    sd.write_manifest(manifest)
    args = ["bench", f"hotpotqa:{hotpotqa_dir}", "--profiles", "shell,fte,open-find", "--limit", "2",
            "--out", str(sweep), "--scripted", "--no-progress", "-j", "2"]
    # its runs had no stuck detector (on by default since): resuming with it would mix configurations
    r = runner.invoke(app, args)
    assert r.exit_code == 2 and "agent.stuck_repeats: (unset) -> 3" in r.output, r.output
    old = tmp_path / "old.toml"
    old.write_text('[agent]\nstuck_repeats = "off"\n')
    r = runner.invoke(app, [*args, "--config", str(old)])
    assert r.exit_code == 0, r.output
    assert "6 already done" in r.output and "0 run(s) finished now" in r.output


def test_a_run_written_now_records_schema_1_and_its_facts(tmp_path: Path, hotpotqa_dir: Path) -> None:
    from fte_shell.benchmarks.hotpotqa import ensure_hotpotqa_corpus
    from fte_shell.runner import run_question
    from fte_shell.standins.research import ResearchPolicy
    from fte_shell.standins.server import ScriptedServer

    corpus = ensure_hotpotqa_corpus(hotpotqa_dir, tmp_path / "corpus" / "hotpotqa")
    q = json.loads((hotpotqa_dir / "dev.jsonl").read_text().splitlines()[0])
    with ScriptedServer(policy=ResearchPolicy()) as srv:
        cfg = RunConfig(model=ModelConfig(base_url=srv.base_url, model="scripted", api_key="x"))
        cfg.agent.profile = "fte"
        cfg.search.backend = "local"
        cfg.search.corpus = str(corpus)
        run_question(q["question"], cfg, tmp_path / "run")
    raw = _raw_lines(tmp_path / "run")
    assert raw[0]["type"] == "start" and raw[0]["schema_version"] == SCHEMA_VERSION
    events = read_events(tmp_path / "run")
    assert [event_dict(e) for e in events] == raw  # the typed models hold every key written
    calls = [e for e in events if isinstance(e, ToolCallEvent)]
    fetches = [f for c in calls if c.name == "fetch" for f in c.meta.fetches or []]
    searches = [s for c in calls if c.name == "search" for s in c.meta.searches or []]
    assert fetches and all(f.ok and f.path and f.source and f.chars for f in fetches)
    assert searches and all(s.urls and s.backend for s in searches)
    # the metrics read the facts; parsing the observations (the schema-0 path) gives the same actions
    as_v0 = [{k: v for k, v in e.items() if k != "schema_version"} for e in raw]
    assert actions_from_events(typed_events(raw)) == actions_from_events(typed_events(as_v0))
    assert run_metrics(tmp_path / "run").n_fetch == len(fetches)
