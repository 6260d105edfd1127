"""The stuck detector (``agent.stuck_repeats``): the same call with the same observation K times in a row
gets one notice, one more stops the run with ``stuck``; a varied trajectory never trips it; ``off`` keeps
the loop as it was; the shell and fte profiles meet the same rule; the notices and stops are counted and
reported (hand-made runs, hand-computed values)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import trajectory
from test_agent import call
from test_agent import run as run_notes
from test_events_written import typed_events

from fte_shell.agent.stuck import STUCK_NOTICE, CallStreak, notice_text
from fte_shell.config import AgentConfig, ModelConfig, RunConfig, SearchConfig
from fte_shell.digest import canonical_config, config_digest
from fte_shell.metrics import run_metrics, summarize
from fte_shell.report.build import write_report
from fte_shell.runner import run_question
from fte_shell.standins.server import ScriptedServer, ScriptTurn

SHOW = ScriptTurn(tool_calls=[call("show")])


def nudges(events: list[dict[str, Any]], kind: str = "stuck") -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == "nudge" and e["kind"] == kind]


# --- the rule, on hand-made call sequences ----------------------------------------------------------------
def fn(name: str, arguments: Any) -> dict[str, Any]:
    return {"function": {"name": name, "arguments": arguments}}


def verdicts(turns: list[list[tuple[dict[str, Any], str]]], k: int | None = 3) -> list[str | None]:
    """The verdict after each turn of (call, observation) lists."""
    streak, out = CallStreak(), []
    for calls in turns:
        for c, obs in calls:
            streak.see(c, obs)
        out.append(streak.verdict(k))
    return out


def test_the_rule_on_hand_made_sequences() -> None:
    a, a_reordered = fn("grep", '{"pattern": "x", "path": "/work"}'), fn("grep", '{ "path":"/work","pattern":"x" }')
    b = fn("grep", '{"pattern": "y", "path": "/work"}')
    # K = 3: notice after the third, stop at the fourth (key order and spacing of the arguments do not matter)
    assert verdicts([[(a, "none")], [(a_reordered, "none")], [(a, "none")], [(a, "none")]]) == [
        None, None, "notice", "stop"]
    # the same call with another observation, or another call with the same observation, starts a new streak
    assert verdicts([[(a, "none")], [(a, "none")], [(a, "1 match")], [(b, "1 match")], [(b, "1 match")]]) == [None] * 5
    # a streak broken after its notice starts over: a new notice, never a stop at once
    assert verdicts([[(a, "o")]] * 3 + [[(b, "o")]] + [[(a, "o")]] * 4) == [
        None, None, "notice", None, None, None, "notice", "stop"]
    # several calls in one turn count one by one; the notice goes to the streak still going at the turn's end
    assert verdicts([[(a, "o"), (a, "o"), (a, "o")], [(a, "o")]]) == ["notice", "stop"]
    assert verdicts([[(a, "o"), (a, "o"), (a, "o"), (b, "o")], [(a, "o")]]) == [None, None]
    # A B A B … is not "in a row"; off never says anything
    assert verdicts([[(a, "o")], [(b, "o")]] * 4) == [None] * 8
    assert verdicts([[(a, "o")]] * 8, k=None) == [None] * 8
    # arguments that are not a JSON object compare as sent
    assert verdicts([[(fn("grep", "{bad"), "Error")]] * 2 + [[(fn("grep", "{bad "), "Error")]], k=2) == [
        None, "notice", None]


def test_off_in_toml_and_the_digest_of_today_s_behaviour() -> None:
    assert AgentConfig().stuck_repeats == 3 and AgentConfig(stuck_repeats="off").stuck_repeats is None
    with pytest.raises(ValueError):
        AgentConfig(stuck_repeats=1)
    off = RunConfig(agent=AgentConfig(stuck_repeats="off"))
    before = off.model_dump(mode="json")
    del before["agent"]["stuck_repeats"]  # what a run recorded before the detector existed
    assert config_digest(before) == config_digest(off) and "stuck_repeats" not in canonical_config(off)["agent"]
    assert config_digest(RunConfig()) != config_digest(off)  # on (the default): other runs, another digest


# --- the loop -------------------------------------------------------------------------------------------
def test_same_call_same_observation_one_notice_then_stuck(tmp_path: Path) -> None:
    script = [ScriptTurn(content=f"Let me look again ({i}).", tool_calls=[call("show")]) for i in range(10)]
    result, srv, _, events = run_notes(tmp_path, script)
    assert (result.stop_reason, result.answer, result.turns, result.tool_calls) == ("stuck", None, 4, {"show": 4})
    (notice,) = nudges(events)
    assert (notice["turn"], notice["tool"], notice["repeats"]) == (3, "show", 3)
    assert notice["message"] == notice_text("show", 3) and "the run stops" in notice["message"]
    # the notice is the last message of the fourth request, after the third turn's tool result
    fourth = srv.requests[3]["messages"]
    assert [m["role"] for m in fourth[-2:]] == ["tool", "user"] and fourth[-1]["content"] == notice["message"]
    assert all(m["content"] != notice["message"] for r in srv.requests[:3] for m in r["messages"])
    end = events[-1]
    assert end["type"] == "end" and end["stop_reason"] == "stuck" and end["turns"] == 4
    (err,) = [e for e in events if e["type"] == "error"]
    assert "show" in err["message"] and "4 times in a row" in err["message"]
    r = json.loads((tmp_path / "run" / "result.json").read_text())
    assert r["stop_reason"] == "stuck" and r["answer"] is None
    typed_events(tmp_path / "run")  # the notice's fields are the nudge event's own


def test_the_model_that_changes_course_after_the_notice_goes_on(tmp_path: Path) -> None:
    script = [SHOW] * 3 + [ScriptTurn(tool_calls=[call("note", {"text": "x"})]), SHOW, "<answer>x</answer>"]
    result, _, _, events = run_notes(tmp_path, script, stuck_repeats=3)
    assert (result.stop_reason, result.answer, result.turns) == ("answer", "x", 6)
    assert len(nudges(events)) == 1


def test_a_varied_trajectory_never_trips_it(tmp_path: Path) -> None:
    script = [  # show repeats, but its observation changes with each note; a call fails the same way twice
        ScriptTurn(tool_calls=[call("show")]), ScriptTurn(tool_calls=[call("note", {"text": "a"})]),
        ScriptTurn(tool_calls=[call("show")]), ScriptTurn(tool_calls=[call("note", {"text": "b"})]),
        ScriptTurn(tool_calls=[call("show")]), ScriptTurn(tool_calls=[call("show")]),
        ScriptTurn(tool_calls=[call("fail")]), ScriptTurn(tool_calls=[call("fail")]),
        "Thinking without a tool.", ScriptTurn(tool_calls=[call("show")]), "<answer>a, b</answer>",
    ]
    result, _, _, events = run_notes(tmp_path, script, stuck_repeats=3)
    assert (result.stop_reason, result.turns) == ("answer", 11)
    assert nudges(events) == [] and len(nudges(events, "no_tool_call")) == 1


def test_off_keeps_today_s_loop(tmp_path: Path) -> None:
    script = [ScriptTurn(content=f"Again ({i}).", tool_calls=[call("show")]) for i in range(6)]
    result, srv, _, events = run_notes(tmp_path, script, stuck_repeats=None, max_turns=6)
    assert (result.stop_reason, result.turns, result.tool_calls) == ("max_turns", 6, {"show": 6})
    assert [e for e in events if e["type"] == "nudge"] == []
    assert [m["role"] for m in srv.requests[-1]["messages"]] == ["system", "user", *["assistant", "tool"] * 5]


# --- both profiles, the same rule -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from fte_shell.search.pydoc_corpus import build_pydoc_corpus

    return build_pydoc_corpus(tmp_path_factory.mktemp("pydoc") / "index")


REPEATED = {  # what the small local model did on llama.cpp (issue 25): the same call, turn after turn
    "shell": ("bash", {"command": "grep -n 'json.dumps' /work/*.txt"}),
    "fte": ("search", {"query": "json module serialize object to str"}),
}


@pytest.mark.parametrize("profile", [pytest.param("shell", marks=pytest.mark.docker), "fte"])
def test_each_profile_repeating_one_call_gets_one_notice_then_stops_stuck(
        profile: str, tmp_path: Path, corpus: Path, request: pytest.FixtureRequest) -> None:
    if profile == "shell":
        request.getfixturevalue("docker_ready")
    name, args = REPEATED[profile]

    def same_call(body: dict[str, Any]) -> ScriptTurn:  # the text differs each turn: max_repeated_replies sees nothing
        return ScriptTurn(content=f"Step {len(body['messages'])}: let me check.", tool_calls=[call(name, args)])

    with ScriptedServer(policy=same_call) as srv:
        cfg = RunConfig(model=ModelConfig(base_url=srv.base_url, model="scripted", backoff_s=0.01),
                        agent=AgentConfig(profile=profile, max_turns=10),
                        search=SearchConfig(backend="local", corpus=str(corpus), retriever="bm25s"))
        result = run_question("Which function serializes an object to a JSON formatted str?", cfg, tmp_path / "run")
    events = trajectory(tmp_path / "run")
    assert (result.stop_reason, result.turns, result.tool_calls) == ("stuck", 4, {name: 4})
    calls = [e for e in events if e["type"] == "tool_call"]
    assert len({c["observation"] for c in calls}) == 1 and not any(c["error"] for c in calls)
    if profile == "shell":  # grep on an empty workspace exits 2: an observation, not a failed call
        assert "No such file or directory" in calls[0]["observation"] and calls[0]["meta"]["exit_code"] == 2
    (notice,) = nudges(events)
    assert (notice["turn"], notice["tool"], notice["repeats"]) == (3, name, 3)
    assert len(srv.requests) == 4 and srv.requests[3]["messages"][-1]["content"] == notice["message"]
    m = run_metrics(tmp_path / "run")
    assert (m.stop_reason, m.stuck_notices, m.infra_failure) == ("stuck", 1, False)


# --- counted and reported ---------------------------------------------------------------------------------
def mk_run(d: Path, stop: str, notices: int, answer: str | None = None) -> None:
    """A hand-made run: one model call and one tool call per turn, ``notices`` stuck notices, a result."""
    d.mkdir(parents=True)
    ev: list[dict[str, Any]] = [{"type": "start", "t": 0, "profile": "fte", "model": "m"}]
    for i in range(1, 5):
        ev.append({"type": "model_call", "t": i, "turn": i, "message": {"role": "assistant", "content": ""}})
        ev.append({"type": "tool_call", "t": i, "turn": i, "name": "search", "arguments": {"query": "q"},
                   "observation": "0 results", "error": False, "meta": {}})
    ev += [{"type": "nudge", "t": 5, "turn": 3, "kind": "stuck", "message": STUCK_NOTICE, "tool": "search",
            "repeats": 3}] * notices
    ev.append({"type": "nudge", "t": 6, "turn": 4, "kind": "no_tool_call", "message": "nudge"})
    (d / "trajectory.jsonl").write_text("".join(json.dumps(e) + "\n" for e in ev))
    (d / "result.json").write_text(json.dumps({"stop_reason": stop, "answer": answer, "profile": "fte", "model": "m",
                                               "wall_s": 1.0, "turns": 4}))


def test_stops_and_notices_are_counted_per_profile_and_reported(tmp_path: Path) -> None:
    root = tmp_path / "runs" / "fte"
    mk_run(root / "q1" / "r0", "stuck", 1)  # told, went on repeating: stuck
    mk_run(root / "q2" / "r0", "answer", 2, "x")  # told twice (two streaks), changed course, answered
    mk_run(root / "q3" / "r0", "answer", 0, "y")
    mk_run(root / "q4" / "r0", "max_turns", 1)  # told, changed course, ran out of turns
    mk_run(root / "q5" / "r0", "endpoint_unavailable", 1)  # not a result: counted nowhere below
    ms = {Path(m.run_dir).parent.name: m for m in (run_metrics(root / q / "r0") for q in ("q1", "q2", "q3", "q4", "q5"))}
    assert {q: m.stuck_notices for q, m in ms.items()} == {"q1": 1, "q2": 2, "q3": 0, "q4": 1, "q5": 1}
    (s,) = summarize(list(ms.values()))
    # results q1..q4: answer 2, max_turns 1, stuck 1 (in the order of fte_shell.stops.STOPS); noticed q1, q2, q4;
    # went on: q2, q4
    assert list(s.stops.items()) == [("answer", 2), ("max_turns", 1), ("stuck", 1)]
    assert (s.runs, s.failed, s.stuck_noticed, s.stuck_went_on) == (5, 1, 3, 2)
    write_report([tmp_path], tmp_path / "rep")
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "| Profile | Results | answer | max_turns | stuck | Stuck notice (runs) | Went on after notice |" in md
    assert "| fte | 4 | 2 | 1 | 1 | 3 | 2 |" in md
    prof = json.loads((tmp_path / "rep" / "metrics.json").read_text())["profiles"][0]
    assert (prof["stops"], prof["stuck_noticed"], prof["stuck_went_on"]) == (
        {"answer": 2, "max_turns": 1, "stuck": 1}, 3, 2)
