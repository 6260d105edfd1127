"""Resume in place (fte_shell.episode.resume), in process, on a finished run of the structured profile
recorded with a WARC snapshot of loopback pages (the page server is stopped before any resume), made
into a stopped run the way SIGKILL leaves one: ``result.json`` gone, the trajectory cut after an event,
its last line torn. The resumed run asks the model only for the turns not on disk (the loopback server
counts every request), its first live request is the uninterrupted run's, and it ends as that run did.
Bad input — another configuration, a hand-edited trajectory, an older schema, a run without a snapshot —
is redone from scratch with a one-line reason in the trajectory and ``result.json``."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import trajectory
from test_fork import BREAKWATER, HARBOUR, Q, config, fte_script, workspace

from fte_shell.episode.resume import STASH, CannotResume, read_stopped, stash
from fte_shell.record.rundir import read_result
from fte_shell.runner import run_question
from fte_shell.standins.server import ScriptedServer
from tests.servers import FakeSerper, LoopbackServer


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A finished fte run with a snapshot (and its model requests), and one without; then the web stops."""
    root = tmp_path_factory.mktemp("resume")
    pages = LoopbackServer().start()
    pages.route("/tern-quay", body=HARBOUR)
    pages.route("/breakwater", body=BREAKWATER)
    serper = FakeSerper([{"title": "Tern Quay harbour", "link": pages.url("/tern-quay"), "snippet": "dredged", "position": 1}])
    web = {"pages": pages, "serper": serper}
    out: dict[str, Any] = {"root": root, "web": web, "base": pages.base_url}
    try:
        with ScriptedServer(fte_script(pages.base_url)) as srv:
            cfg = config(srv.base_url, "fte", root / "snap", web)
            cfg.agent.current_date = "2026-01-15"  # type: ignore[assignment]
            assert run_question(Q, cfg, root / "done").stop_reason == "answer"
            out["requests"], out["config"] = srv.requests, cfg
        with ScriptedServer(fte_script(pages.base_url)) as srv:
            bare = config(srv.base_url, "fte", None, web)
            bare.agent.current_date = "2026-01-15"  # type: ignore[assignment]
            run_question(Q, bare, root / "bare")
            out["bare"] = bare
    finally:
        pages.stop()
        serper.close()
    return out


def stopped_copy(src: Path, dest: Path, after: str, torn: bool = True) -> Path:
    """A copy of the finished run ``src`` as a SIGKILL leaves it: cut after the first event for which
    ``after`` (``"type:turn"``) matches, the next line torn half-way, no ``result.json``."""
    shutil.copytree(src, dest)
    lines = (dest / "trajectory.jsonl").read_text().splitlines()
    kind, turn = after.split(":")
    i = next(i for i, line in enumerate(lines) if (ev := json.loads(line))["type"] == kind and ev.get("turn") == int(turn))
    kept = lines[:i + 1]
    (dest / "trajectory.jsonl").write_text("\n".join(kept) + "\n" + (lines[i + 1][: len(lines[i + 1]) // 2] if torn else ""))
    (dest / "result.json").unlink()
    return dest


def resume(rec: dict[str, Any], run_dir: Path, live: list[Any], cfg: Any = None) -> tuple[Any, list[dict[str, Any]]]:
    with ScriptedServer(live) as srv:
        c = (cfg or rec["config"]).model_copy(deep=True)
        c.model.base_url = srv.base_url
        res = run_question(Q, c, run_dir)
        return res, srv.requests


@pytest.mark.parametrize(("after", "k", "cut"), [
    ("tool_call:2", 2, False),   # between turns 2 and 3 (the kill tore turn 3's reply: it is asked again)
    ("model_call:4", 4, True),   # between turn 4's reply and its tool result: turn 4 redone from its reply
    ("nudge:3", 3, False),       # after the nudge of a reply without a tool call
])
def test_a_stopped_run_resumes_at_its_last_completed_turn(recorded: dict[str, Any], tmp_path: Path, after: str, k: int,
                                                          cut: bool) -> None:
    run_dir = stopped_copy(recorded["root"] / "done", tmp_path / "run", after)
    script = fte_script(recorded["base"])
    res, requests = resume(recorded, run_dir, script[k:])
    assert res.stop_reason == "answer" and res.answer == "Lio Brand"
    assert len(requests) == len(script) - k  # only the turns not on disk asked the model
    assert requests[0]["messages"] == recorded["requests"][k]["messages"]  # the context the model would have seen
    result = read_result(run_dir)
    done = read_result(recorded["root"] / "done")
    assert result is not None and done is not None
    assert result["resumed"] == {"count": 1, "turns": [k], "redone": 0, "cut_turn": cut}
    assert result["run_id"] == done["run_id"]  # the run keeps its id and directory
    for key in ("turns", "tool_calls", "usage", "stop_reason", "answer"):
        assert result[key] == done[key], key  # budgets count the replayed turns once
    events = trajectory(run_dir)
    ev = next(e for e in events if e["type"] == "resume")
    assert ev["turn"] == k and ev["equal"] and ev["count"] == 1 and ev["cut_turn"] == cut and ev["mismatches"] == []
    assert [e["turn"] for e in events if e["type"] == "model_call" and e.get("replayed")] == list(range(1, k + 1))
    assert workspace(run_dir) == workspace(recorded["root"] / "done")
    assert not (run_dir / STASH).exists()


def test_a_resume_stopped_during_its_replay_reads_the_stash_again(recorded: dict[str, Any], tmp_path: Path) -> None:
    run_dir = stopped_copy(recorded["root"] / "done", tmp_path / "run", "tool_call:4")
    stash(run_dir)  # an earlier resume moved the record aside, replayed one turn, and was killed
    (run_dir / "trajectory.jsonl").write_text((run_dir / STASH / "trajectory.jsonl").read_text().splitlines()[0] + "\n")
    (run_dir / "workspace").mkdir()
    stopped = read_stopped(run_dir, Q, recorded["config"])
    assert stopped is not None and stopped.turn == 4 and not stopped.cut
    res, requests = resume(recorded, run_dir, fte_script(recorded["base"])[4:])
    assert res.answer == "Lio Brand" and len(requests) == 2


def test_a_second_stop_resumes_again_and_counts(recorded: dict[str, Any], tmp_path: Path) -> None:
    run_dir = stopped_copy(recorded["root"] / "done", tmp_path / "run", "tool_call:1")
    script = fte_script(recorded["base"])
    with ScriptedServer(script[1:3] + [{"status": 503, "error": "down"}]) as srv:  # the endpoint fails at turn 4
        c = recorded["config"].model_copy(deep=True)
        c.model.base_url = srv.base_url
        assert run_question(Q, c, run_dir).stop_reason == "endpoint_unavailable"
    res, requests = resume(recorded, run_dir, script[3:])  # an infrastructure stop is resumed too
    assert res.answer == "Lio Brand" and len(requests) == 3
    result = read_result(run_dir)
    assert result is not None and result["resumed"]["count"] == 2 and result["resumed"]["turns"] == [1, 3]


def _redone(recorded: dict[str, Any], run_dir: Path, cfg: Any = None) -> tuple[dict[str, Any], dict[str, Any], int]:
    script = fte_script(recorded["base"])
    res, requests = resume(recorded, run_dir, script, cfg)
    assert res.stop_reason == "answer"
    result = read_result(run_dir)
    assert result is not None and result["resumed"]["count"] == 0 and result["resumed"]["redone"] == 1
    ev = next(e for e in trajectory(run_dir) if e["type"] == "resume")
    assert ev["turn"] == 0 and not ev["equal"] and ev["redone"] == 1
    assert [e["type"] for e in trajectory(run_dir)][:2] == ["start", "resume"]
    assert not (run_dir / STASH).exists()
    return result, ev, len(requests)


def test_a_changed_configuration_is_redone_from_scratch_and_says_what_changed(recorded: dict[str, Any],
                                                                              tmp_path: Path) -> None:
    run_dir = stopped_copy(recorded["root"] / "done", tmp_path / "run", "tool_call:4")
    cfg = recorded["config"].model_copy(deep=True)
    cfg.agent.max_turns = 19
    result, ev, asked = _redone(recorded, run_dir, cfg)
    assert asked == 6  # from scratch: every turn asked again
    assert "the configuration changed (agent.max_turns: 20 -> 19)" in ev["mismatches"][0]
    assert result["resumed"]["mismatch"] == ev["mismatches"][0]


def test_a_hand_edited_trajectory_is_redone_from_scratch_naming_the_turn(recorded: dict[str, Any],
                                                                         tmp_path: Path) -> None:
    run_dir = stopped_copy(recorded["root"] / "done", tmp_path / "run", "tool_call:4")
    lines = (run_dir / "trajectory.jsonl").read_text().splitlines()
    for i, line in enumerate(lines):
        try:
            ev = json.loads(line)
        except json.JSONDecodeError:
            continue
        if ev["type"] == "tool_call" and ev["name"] == "grep":
            ev["observation"] += "\nan extra line"
            lines[i] = json.dumps(ev)
    (run_dir / "trajectory.jsonl").write_text("\n".join(lines) + "\n")
    _result, ev, asked = _redone(recorded, run_dir)
    assert asked == 6
    assert "turn 4: the observation of grep (call_4_0) differs from the recorded one" in ev["mismatches"][0]


@pytest.mark.parametrize("bad", ["schema", "snapshot"])
def test_an_old_schema_or_a_run_without_a_snapshot_cannot_be_resumed(recorded: dict[str, Any], tmp_path: Path,
                                                                     bad: str) -> None:
    src, cfg = (recorded["root"] / "done", recorded["config"]) if bad == "schema" else \
        (recorded["root"] / "bare", recorded["bare"])
    run_dir = stopped_copy(src, tmp_path / "run", "tool_call:2")
    if bad == "schema":
        lines = (run_dir / "trajectory.jsonl").read_text().splitlines()
        start = json.loads(lines[0])
        del start["schema_version"]
        (run_dir / "trajectory.jsonl").write_text("\n".join([json.dumps(start), *lines[1:]]) + "\n")
    want = "trajectory schema 0" if bad == "schema" else "recorded without a snapshot"
    with pytest.raises(CannotResume, match=want):
        read_stopped(run_dir, Q, cfg)
    if bad == "schema":
        _result, ev, _asked = _redone(recorded, run_dir, cfg)
        assert want in ev["mismatches"][0]


def test_a_run_killed_before_its_first_reply_starts_over_without_a_resume(recorded: dict[str, Any], tmp_path: Path) -> None:
    run_dir = stopped_copy(recorded["root"] / "done", tmp_path / "run", "model_call:1")
    lines = (run_dir / "trajectory.jsonl").read_text().splitlines()
    (run_dir / "trajectory.jsonl").write_text(lines[0] + "\n")
    assert read_stopped(run_dir, Q, recorded["config"]) is None
    res, requests = resume(recorded, run_dir, fte_script(recorded["base"]))
    assert res.answer == "Lio Brand" and len(requests) == 6
    assert "resumed" not in (read_result(run_dir) or {})


def test_the_cache_actor_keeps_the_longest_checkpoint_of_a_ray_run(tmp_path: Path) -> None:
    """A Ray task re-run after a lost node resumes from what its node checkpointed (the actor's body, a
    plain class): the longest record by replies, so an attempt lost during its replay loses nothing."""
    from fte_shell.config import RunConfig
    from fte_shell.distributed.caches import CacheService

    svc = CacheService(RunConfig(), False, False, str(tmp_path / "pages"))
    record = [json.dumps({"type": "start"}), json.dumps({"type": "model_call", "turn": 1}),
              json.dumps({"type": "tool_call", "turn": 1}), json.dumps({"type": "model_call", "turn": 2})]
    for line in record:
        svc.checkpoint("q1-shell-r0", line)
    assert svc.begin("q1-shell-r0") == record  # the second attempt resumes it
    svc.checkpoint("q1-shell-r0", record[0])  # the second attempt was lost during its replay
    assert svc.begin("q1-shell-r0") == record and svc.begin("other") == []
    svc.forget("q1-shell-r0")  # its directory reached the driver
    assert svc.begin("q1-shell-r0") == []


def test_a_summary_is_re_used_on_resume_not_written_again(recorded: dict[str, Any], tmp_path: Path) -> None:
    """``summary``: the resumed run takes the recorded summary back (the context_edit's state): the model
    is asked neither for the summary again nor for a recorded turn, and the first live request — the
    summary in it — is the uninterrupted run's."""
    from fte_shell.agent.context.reset import SUMMARY_INSTRUCTIONS

    script = fte_script(recorded["base"])

    class Writer:
        """The scripted turns by count, and a summary whenever one is asked for."""

        def __init__(self, start: int):
            self.n, self.summaries = start, 0

        def __call__(self, body: dict[str, Any]) -> Any:
            if (body.get("messages") or [{}])[0].get("content") == SUMMARY_INSTRUCTIONS:
                self.summaries += 1
                return {"content": "Established: the Tern Quay harbour was dredged by Lio Brand (tern-quay)."}
            self.n += 1
            return script[self.n - 1]

    cfg = recorded["config"].model_copy(deep=True)
    cfg.agent.context = cfg.agent.context.model_validate({"strategy": "summary", "trigger_tokens": 600})
    first = Writer(0)
    with ScriptedServer(policy=first) as srv:  # pages and searches come from the snapshot: the web is gone
        c = cfg.model_copy(deep=True)
        c.model.base_url = srv.base_url
        assert run_question(Q, c, tmp_path / "whole").answer == "Lio Brand"
        whole = [b for b in srv.requests if b["messages"][0].get("content") != SUMMARY_INSTRUCTIONS]
    edits = [e for e in trajectory(tmp_path / "whole") if e["type"] == "context_edit"]
    assert first.summaries >= 1 and edits and edits[0]["state"]["summary"]
    k = edits[0]["turn"]
    assert k < len(script) - 1
    # stopped after turn k, the turn the summary was made for (turn 3's reply has no call: its nudge ends it)
    run_dir = stopped_copy(tmp_path / "whole", tmp_path / "run", f"{'nudge' if k == 3 else 'tool_call'}:{k}")
    again = Writer(k)
    with ScriptedServer(policy=again) as srv:
        c = cfg.model_copy(deep=True)
        c.model.base_url = srv.base_url
        assert run_question(Q, c, run_dir).answer == "Lio Brand"
        live = [b for b in srv.requests if b["messages"][0].get("content") != SUMMARY_INSTRUCTIONS]
    assert again.summaries == first.summaries - 1  # the summary of turn k re-used (a later one written live)
    assert live == whole[k:]  # the same requests, summary and max_tokens included, as the whole run's
    result, done = read_result(run_dir), read_result(tmp_path / "whole")
    assert result is not None and done is not None
    assert (result["usage"], result["summary_usage"]) == (done["usage"], done["summary_usage"])
    assert any(e.get("replayed") for e in trajectory(run_dir) if e["type"] == "context_edit")


def test_a_snapshot_missing_a_recorded_page_redoes_the_run_naming_the_turn(recorded: dict[str, Any],
                                                                           tmp_path: Path) -> None:
    """The snapshot lost its captures (the web is gone too): the replayed search and fetch differ from the
    record, so the run is redone from scratch, the first differing turn named."""
    run_dir = stopped_copy(recorded["root"] / "done", tmp_path / "run", "tool_call:2")
    snap = recorded["root"] / "snap"
    snap.rename(recorded["root"] / "snap.kept")
    try:
        snap.mkdir()
        _result, ev, asked = _redone(recorded, run_dir)
    finally:
        shutil.rmtree(snap)
        (recorded["root"] / "snap.kept").rename(snap)
    assert asked == 6
    assert ev["mismatches"][0].startswith(f"{run_dir}: the replayed turns 1..2 differ from the record: turn 1: "
                                          "the observation of search")


@pytest.mark.parametrize("profile", ["fte", "shell"])
def test_a_trajectory_alone_resumes_on_a_closed_corpus_writing_the_same_files(tmp_path: Path, hotpotqa_dir: Path,
                                                                              profile: str) -> None:
    """What a Ray task re-run after a lost node has: the checkpointed trajectory, no workspace. On a closed
    local corpus (no snapshot) the replayed fetches stamp each document with the time its recorded fetch
    wrote it (``meta.fetches[].retrieved_at``), so the resumed run's files are the uninterrupted run's,
    byte for byte, and nothing is asked of the model twice."""
    from fte_shell.benchmarks.hotpotqa import ensure_hotpotqa_corpus
    from fte_shell.config import ModelConfig, RunConfig
    from fte_shell.standins.research import ResearchPolicy

    corpus = ensure_hotpotqa_corpus(hotpotqa_dir, tmp_path / "corpus")
    question = json.loads((hotpotqa_dir / "dev.jsonl").read_text().splitlines()[0])["question"]

    def run(out: Path) -> tuple[Any, int]:
        with ScriptedServer(policy=ResearchPolicy()) as srv:
            cfg = RunConfig(model=ModelConfig(base_url=srv.base_url, model="scripted", api_key="x"))
            cfg.agent.profile, cfg.search.backend, cfg.search.corpus = profile, "local", corpus  # type: ignore[assignment]
            cfg.agent.current_date = "2026-01-15"  # type: ignore[assignment]
            return run_question(question, cfg, out), len(srv.requests)

    done, asked = run(tmp_path / "done")
    fetched = [f for e in trajectory(tmp_path / "done") if e["type"] == "tool_call"
               for f in e["meta"].get("fetches") or [] if f.get("new")]
    assert fetched and all(f["retrieved_at"] for f in fetched)
    k = max(e["turn"] for e in trajectory(tmp_path / "done") if e["type"] == "tool_call" and e["meta"].get("fetches"))
    shutil.copytree(tmp_path / "done", tmp_path / "run")
    run_dir, lines = tmp_path / "run", (tmp_path / "done" / "trajectory.jsonl").read_text().splitlines()
    last = max(i for i, line in enumerate(lines) if (e := json.loads(line))["type"] == "tool_call" and e["turn"] == k)
    (run_dir / "trajectory.jsonl").write_text("\n".join(lines[:last + 1]) + "\n")  # turn k complete, then lost
    (run_dir / "result.json").unlink()
    shutil.rmtree(run_dir / "workspace")  # the record is the trajectory alone
    time.sleep(1.1)  # a document stamped now would carry another Retrieved: second
    res, asked_again = run(run_dir)
    result = read_result(run_dir)
    assert result is not None and result["resumed"]["count"] == 1, result.get("resumed")
    assert (res.stop_reason, res.answer) == (done.stop_reason, done.answer)
    assert asked_again == asked - k  # only the turns not on disk
    ev = next(e for e in trajectory(run_dir) if e["type"] == "resume")
    assert ev["equal"] and ev["checks"]["workspace"]["recorded_files"] is None
    assert workspace(run_dir) == workspace(tmp_path / "done")
