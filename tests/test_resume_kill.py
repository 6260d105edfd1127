"""A stop loses nothing: ``fte-shell run --out DIR`` SIGKILLed at 20+ points (before a turn's model request,
and between a reply and its tool result) and started again each time finishes as an uninterrupted run
does — on docker and on bwrap, and under keep_recent / discard_all killed after a context edit:

* zero model requests repeated: the emulator's answered requests are, in order, byte for byte the
  uninterrupted run's (so each resumed run sent exactly the request the model would have got, its
  context edits taken back), and each killed request is the one answered next;
* zero pages fetched again from the web: every page was served (completed) once;
* the same workspace (sha256 of every file), the same answer, turns, tool calls and token usage;
* ``result.json``'s ``resumed.count`` is the number of kills, and the trajectory's ``resume`` events say
  where each resume went on.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import IN_CI, trajectory
from resume_harness import (
    Killer,
    Web,
    gc_boxes,
    run_until_done,
    shell_script,
    start_emulator,
    tree,
    write_config,
)

from fte_shell.record.rundir import read_result
from tests.providers import CASES

KILL_PAGES = [1, 2, 3, 4, 5]
METRICS = ("stop_reason", "answer", "turns", "tool_calls", "usage", "summary_usage")


@pytest.fixture
def runs_root() -> Iterator[Path]:
    """Where the run directories go: searchable by the uid a bwrap box started by root runs as."""
    d = Path(tempfile.mkdtemp(prefix="fte-resume-"))
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _case(case_id: str) -> Any:
    case = next(c for c in CASES if c.id == case_id)
    problem = case.problem()
    if problem:
        if IN_CI:
            pytest.fail(problem)
        pytest.skip(problem)
    return case


def _killed_vs_uninterrupted(tmp_path: Path, provider: str, points: set[tuple[str, int]],
                             context: dict[str, Any] | None = None) -> dict[str, Any]:
    """The killed run and the uninterrupted one (same script, same snapshot store: the uninterrupted run
    is served the pages the killed one recorded, so their files carry the same retrieval time)."""
    tmp_path.mkdir(exist_ok=True)
    os.chmod(tmp_path, 0o755)
    killer = Killer(points)
    web_k = Web(KILL_PAGES, killer)
    snap = tmp_path / "snap"
    try:
        script = shell_script(web_k.pages.base_url, KILL_PAGES)
        emu, brain = start_emulator(script, killer)
        try:
            cfg = write_config(tmp_path / "killed.toml", emu.base_url, web_k, provider, snap, context)
            codes = run_until_done(cfg, tmp_path / "killed", killer)
        finally:
            emu.__exit__(None, None, None)
        served = web_k.served()
        web_k.pages.route("/tern-quay", status=404, body="gone")  # the uninterrupted run must not need the web
        ref_emu, ref_brain = start_emulator(script, None)
        try:
            cfg = write_config(tmp_path / "ref.toml", ref_emu.base_url, web_k, provider, snap, context)
            run_until_done(cfg, tmp_path / "ref", None)
        finally:
            ref_emu.__exit__(None, None, None)
    finally:
        web_k.close()
        gc_boxes()
    return {"codes": codes, "killer": killer, "brain": brain, "ref_brain": ref_brain, "served": served,
            "killed": tmp_path / "killed", "ref": tmp_path / "ref"}


def _assert_lossless(r: dict[str, Any]) -> None:
    killer, brain, ref = r["killer"], r["brain"], r["ref_brain"]
    assert set(killer.fired) == killer.points, "every kill point was reached"
    assert r["codes"].count(-9) == len(killer.points) and r["codes"][-1] == 0
    # zero model requests repeated: the answered requests are the uninterrupted run's, in order
    assert len(brain.answered) == len(ref.answered)
    for i, (mine, theirs) in enumerate(zip(brain.answered, ref.answered, strict=True)):
        assert mine == theirs, f"request {i + 1} differs from the uninterrupted run's"
    for body in brain.killed:  # a killed request was never answered; the resumed run sent it again as it was
        assert body in brain.answered
    # zero pages fetched again from the web
    assert r["served"], "the killed run fetched its pages"
    assert all(n == 1 for n in r["served"].values()), r["served"]
    killed, ref_dir = r["killed"], r["ref"]
    assert tree(killed / "workspace") == tree(ref_dir / "workspace")
    mine_res, ref_res = read_result(killed), read_result(ref_dir)
    assert mine_res is not None and ref_res is not None
    assert {k: mine_res.get(k) for k in METRICS} == {k: ref_res.get(k) for k in METRICS}
    assert mine_res["answer"] == "Lio Brand"
    kills = len(killer.points)
    assert mine_res["resumed"]["count"] == kills and mine_res["resumed"]["redone"] == 0
    assert "resumed" not in ref_res
    events = trajectory(killed)
    resumes = [e for e in events if e["type"] == "resume"]
    assert len(resumes) == 1 and resumes[0]["equal"] and resumes[0]["count"] == kills
    assert len(resumes[0]["checks"]["history"]) == kills
    assert not (killed / ".resume").exists()
    calls = [e for e in events if e["type"] == "model_call"]
    assert [e["turn"] for e in calls] == list(range(1, len(ref.answered) + 1))
    assert sum(1 for e in calls if not e.get("replayed")) >= 1


@pytest.mark.slow
@pytest.mark.parametrize("case_id", ["docker", "bwrap"])
def test_sigkill_at_20_points_loses_nothing(runs_root: Path, case_id: str) -> None:
    case = _case(case_id)
    # before the model request of every turn 2..16, and between the reply and the result of 5 kill pages
    points = {("request", n) for n in range(2, 17)} | {("page", n) for n in KILL_PAGES}
    assert len(points) >= 20
    r = _killed_vs_uninterrupted(runs_root, case.provider, points)
    _assert_lossless(r)
    cut = [e for e in trajectory(r["killed"]) if e["type"] == "resume"]
    assert cut[0]["checks"]["observations"] > 0


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.parametrize("strategy", ["keep_recent", "discard_all"])
def test_a_context_strategy_resumes_with_the_context_the_model_saw(runs_root: Path, strategy: str) -> None:
    """Killed after the first context edit (before the request it was made for, and after that turn):
    the resumed requests equal the uninterrupted run's, so the edits were taken back."""
    case = _case("docker")
    context = {"strategy": strategy, "trigger_tokens": 1200, **({"keep": 2} if strategy == "keep_recent" else {})}
    # find the first edit's turn from an uninterrupted run of the same script
    probe = _killed_vs_uninterrupted(runs_root / "probe", case.provider, set(), context)
    edits = [e for e in trajectory(probe["ref"]) if e["type"] == "context_edit"]
    assert edits, "the trigger makes the strategy act"
    first = edits[0]["turn"]
    points = {("request", first), ("request", first + 1), ("request", first + 3), ("page", 3)}
    r = _killed_vs_uninterrupted(runs_root / "killed", case.provider, points, context)
    _assert_lossless(r)
    replayed = [e for e in trajectory(r["killed"]) if e["type"] == "context_edit" and e.get("replayed")]
    assert replayed and all(e.get("state") for e in replayed)
