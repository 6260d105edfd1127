"""The ReAct loop through the real openai client and the scripted server, with a small in-process
profile (the loop must not know which profile it drives)."""

from __future__ import annotations

import errno
import json
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import drive, trajectory

from fte_shell.agent import NUDGE, extract_answer
from fte_shell.config import ModelConfig, RunConfig
from fte_shell.errors import ToolError
from fte_shell.profiles import ToolResult
from fte_shell.record.rundir import RunWriter
from fte_shell.standins.server import ScriptedServer, ScriptTurn


class NotesProfile:
    """A tiny real profile: ``note(text)`` stores a line, ``show()`` lists them, ``fail()`` raises a
    ToolError, ``nap(s)`` sleeps."""

    name = "notes"

    def __init__(self) -> None:
        self.notes: list[str] = []
        self.closed = False

    def tools(self) -> list[dict[str, Any]]:
        def fn(name: str, props: dict[str, Any]) -> dict[str, Any]:
            return {
                "type": "function",
                "function": {
                    "name": name,
                    "description": f"{name} tool",
                    "parameters": {"type": "object", "properties": props, "required": list(props)},
                },
            }

        return [
            fn("note", {"text": {"type": "string"}}),
            fn("show", {}),
            fn("fail", {}),
            fn("nap", {"s": {"type": "number"}}),
        ]

    def system_addendum(self) -> str:
        return "You keep notes."

    def execute(self, name: str, args: dict[str, Any]) -> ToolResult:
        if name == "note":
            self.notes.append(args["text"])
            return ToolResult(output=f"noted #{len(self.notes)}", meta={"n": len(self.notes)})
        if name == "show":
            return ToolResult(output="\n".join(self.notes) or "(none)")
        if name == "fail":
            raise ToolError("this tool always fails")
        if name == "nap":
            time.sleep(float(args["s"]))
            return ToolResult(output="rested")
        raise AssertionError(f"the loop let an unknown tool through: {name}")

    def close(self) -> None:
        self.closed = True


def call(name: str, arguments: dict[str, Any] | str | None = None) -> dict[str, Any]:
    return {"name": name, "arguments": {} if arguments is None else arguments}


def run(tmp_path: Path, script: list[Any], **agent_kw: Any) -> tuple[Any, ScriptedServer, NotesProfile, list[dict]]:
    profile = NotesProfile()
    with ScriptedServer(script) as srv:
        cfg = RunConfig(model=ModelConfig(base_url=srv.base_url, model="scripted", backoff_s=0.01, max_retries=1))
        for k, v in agent_kw.items():
            setattr(cfg.agent, k, v)
        with RunWriter(tmp_path / "run") as rec:
            result = drive(cfg, profile, rec, "What is noted?", run_id="r1")
    return result, srv, profile, trajectory(tmp_path / "run")


def result_json(tmp_path: Path) -> dict[str, Any]:
    return json.loads((tmp_path / "run" / "result.json").read_text())


def test_answer_at_once(tmp_path: Path) -> None:
    result, srv, _, events = run(tmp_path, ["Easy. <answer> Paris </answer>"])
    assert (result.answer, result.stop_reason, result.turns) == ("Paris", "answer", 1)
    assert [e["type"] for e in events] == ["start", "model_call", "end"]
    assert events[-1]["stop_reason"] == "answer" and events[-1]["answer"] == "Paris"
    r = result_json(tmp_path)
    assert r["answer"] == "Paris" and r["stop_reason"] == "answer" and r["run_id"] == "r1"
    assert r["profile"] == "notes" and r["model"] == "scripted" and r["tool_calls"] == {}
    assert srv.requests[0]["messages"][1] == {"role": "user", "content": "What is noted?"}


def test_system_prompt_carries_date_and_addendum(tmp_path: Path) -> None:
    _, srv, _, events = run(tmp_path, ["<answer>x</answer>"], current_date="2031-02-03")
    system = srv.requests[0]["messages"][0]
    assert system["role"] == "system"
    assert system["content"].endswith("You keep notes.\n\nCurrent date: 2031-02-03")
    assert events[0]["system_prompt"] == system["content"]
    assert [t["function"]["name"] for t in events[0]["tools"]] == ["note", "show", "fail", "nap"]
    assert events[0]["config"]["model"]["api_key"] is None  # secrets never in clear


def test_tool_calls_run_in_order_and_observations_are_appended(tmp_path: Path) -> None:
    script = [
        ScriptTurn(tool_calls=[call("note", {"text": "alpha"}), call("note", {"text": "beta"}), call("show")]),
        "<answer>alpha, beta</answer>",
    ]
    result, srv, profile, events = run(tmp_path, script)
    assert profile.notes == ["alpha", "beta"]
    tool_msgs = [m for m in srv.requests[1]["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in tool_msgs] == ["noted #1", "noted #2", "alpha\nbeta"]
    assert [m["tool_call_id"] for m in tool_msgs] == ["call_1_0", "call_1_1", "call_1_2"]
    tc = [e for e in events if e["type"] == "tool_call"]
    assert [(e["name"], e["arguments"], e["error"]) for e in tc] == [
        ("note", {"text": "alpha"}, False),
        ("note", {"text": "beta"}, False),
        ("show", {}, False),
    ]
    assert tc[0]["meta"] == {"n": 1} and tc[0]["raw_arguments"] == '{"text": "alpha"}'
    assert result.tool_calls == {"note": 2, "show": 1} and result.answer == "alpha, beta"


def test_malformed_json_arguments_become_a_correctable_error(tmp_path: Path) -> None:
    script = [
        ScriptTurn(tool_calls=[call("note", '{"text": "unterminated')]),
        ScriptTurn(tool_calls=[call("note", '["not", "an", "object"]')]),
        ScriptTurn(tool_calls=[call("note", {"text": "fixed"})]),
        "<answer>fixed</answer>",
    ]
    result, srv, profile, events = run(tmp_path, script)
    tc = [e for e in events if e["type"] == "tool_call"]
    assert tc[0]["error"] is True and tc[0]["arguments"] is None
    assert tc[0]["raw_arguments"] == '{"text": "unterminated'
    assert "not valid JSON" in tc[0]["observation"]
    assert "must be a JSON object" in tc[1]["observation"] and tc[1]["error"] is True
    assert tc[2]["error"] is False and profile.notes == ["fixed"]
    # the model saw the error as the tool's observation
    seen = srv.requests[1]["messages"][-1]
    assert seen["role"] == "tool" and "not valid JSON" in seen["content"]
    assert result.stop_reason == "answer"


def test_unknown_tool_and_tool_error_are_observations(tmp_path: Path) -> None:
    script = [
        ScriptTurn(tool_calls=[call("teleport", {"to": "moon"})]),
        ScriptTurn(tool_calls=[call("fail")]),
        "<answer>none</answer>",
    ]
    result, _, _, events = run(tmp_path, script)
    tc = [e for e in events if e["type"] == "tool_call"]
    assert tc[0]["observation"] == "Error: unknown tool 'teleport'. Available tools: fail, nap, note, show."
    assert tc[0]["error"] is True
    assert tc[1]["observation"] == "Error: this tool always fails" and tc[1]["error"] is True
    assert result.tool_calls == {"teleport": 1, "fail": 1} and result.stop_reason == "answer"


def test_model_that_never_answers_hits_the_turn_budget(tmp_path: Path) -> None:
    result, srv, _, events = run(tmp_path, ["hmm", "still thinking", "maybe"], max_turns=3)
    assert result.stop_reason == "max_turns" and result.answer is None and result.turns == 3
    assert len(srv.requests) == 3
    # after each reply without tool call or answer the model gets a nudge
    assert srv.requests[1]["messages"][-1] == {"role": "user", "content": NUDGE}
    assert sum(e["type"] == "nudge" for e in events) == 3
    r = result_json(tmp_path)
    assert r["answer"] is None and r["stop_reason"] == "max_turns" and r["turns"] == 3


def test_time_budget_stops_the_loop(tmp_path: Path) -> None:
    script = [ScriptTurn(tool_calls=[call("nap", {"s": 0.4})]), "<answer>never reached</answer>"]
    result, srv, _, _ = run(tmp_path, script, time_budget_s=0.3)
    assert result.stop_reason == "time_budget" and result.answer is None
    assert len(srv.requests) == 1 and result.turns == 1


def test_time_budget_bounds_a_slow_model_call(tmp_path: Path) -> None:
    script = [ScriptTurn(content="<answer>too late</answer>", delay_s=3), "<answer>never asked</answer>"]
    result, srv, _, events = run(tmp_path, script, time_budget_s=0.5)
    # the call's timeout was cut to the budget, and no retry was made past it
    assert result.stop_reason == "time_budget" and result.answer is None and len(srv.requests) == 1
    (err,) = [e for e in events if e["type"] == "error"]
    assert "time budget" in err["message"]


def test_consecutive_failed_turns_stop_with_errors(tmp_path: Path) -> None:
    script = [ScriptTurn(tool_calls=[call("fail")])] * 2 + [
        ScriptTurn(tool_calls=[call("note", {"text": "ok"})]),
        ScriptTurn(tool_calls=[call("fail")]),
        ScriptTurn(tool_calls=[call("fail"), call("nope")]),
        ScriptTurn(tool_calls=[call("fail")]),
    ]
    result, _, _, events = run(tmp_path, script, max_consecutive_errors=3)
    # the success on turn 3 resets the count: turns 4, 5, 6 fail -> stop after turn 6
    assert result.stop_reason == "errors" and result.turns == 6
    assert events[-2]["type"] == "error" and "3 consecutive" in events[-2]["message"]


def test_endpoint_unavailable_after_retries_is_recorded(tmp_path: Path) -> None:
    script = [ScriptTurn(tool_calls=[call("show")]), ScriptTurn(status=500), ScriptTurn(status=502, error="bad gateway")]
    result, srv, _, events = run(tmp_path, script)  # max_retries=1: two attempts on turn 2
    assert result.stop_reason == "endpoint_unavailable" and result.turns == 2 and len(srv.requests) == 3
    err = [e for e in events if e["type"] == "error"]
    assert len(err) == 1 and "bad gateway" in err[0]["message"] and err[0]["turn"] == 2
    assert result_json(tmp_path)["stop_reason"] == "endpoint_unavailable"


def test_500_then_success_inside_the_loop(tmp_path: Path) -> None:
    result, srv, _, events = run(tmp_path, [ScriptTurn(status=500), "<answer>ok</answer>"])
    assert result.stop_reason == "answer" and result.turns == 1 and len(srv.requests) == 2
    assert [e["attempts"] for e in events if e["type"] == "model_call"] == [2]


def test_token_counts_add_up(tmp_path: Path) -> None:
    script = [
        ScriptTurn(tool_calls=[call("note", {"text": "x" * 50})]),
        ScriptTurn(tool_calls=[call("show")]),
        "thinking out loud",
        "<answer>x</answer>",
    ]
    result, srv, _, events = run(tmp_path, script)
    sent = [r["usage"] for r in srv.responses]
    recorded = [e["usage"] for e in events if e["type"] == "model_call"]
    assert recorded == sent and len(sent) == 4
    totals = {k: sum(u[k] for u in sent) for k in ("prompt_tokens", "completion_tokens", "total_tokens")}
    assert result.usage == totals == result_json(tmp_path)["usage"]
    assert totals["total_tokens"] == totals["prompt_tokens"] + totals["completion_tokens"] > 0


def test_keyboard_interrupt_is_recorded_and_reraised(tmp_path: Path) -> None:
    class Interrupting(NotesProfile):
        def execute(self, name: str, args: dict[str, Any]) -> ToolResult:
            raise KeyboardInterrupt

    profile = Interrupting()
    with ScriptedServer([ScriptTurn(tool_calls=[call("show")])]) as server:
        cfg = RunConfig(model=ModelConfig(base_url=server.base_url, model="scripted"))
        with RunWriter(tmp_path / "run") as rec, pytest.raises(KeyboardInterrupt):
            drive(cfg, profile, rec, "q")
    events = trajectory(tmp_path / "run")
    assert events[-1]["type"] == "end" and events[-1]["stop_reason"] == "interrupted"
    assert result_json(tmp_path)["stop_reason"] == "interrupted"
    # the interrupted call is recorded, so the trajectory agrees with result.json's tool-call counts
    assert [e["type"] for e in events] == ["start", "model_call", "tool_call", "error", "end"]
    assert events[2]["observation"] == "(the tool call was interrupted)" and events[2]["error"] is True
    assert result_json(tmp_path)["tool_calls"] == {"show": 1}


def test_an_exception_that_names_its_stop_reason_ends_the_run_with_it(tmp_path: Path) -> None:
    """The crash handler maps exceptions through stops.stop_of_exception: a full disk is ``disk_full``, an
    exception with a ``stop_reason`` that one, anything else ``crashed``; each is re-raised after result.json."""

    class Named(RuntimeError):
        stop_reason = "sandbox_unavailable"

    for exc, want in ((OSError(errno.ENOSPC, "No space left on device"), "disk_full"),
                      (Named("the daemon went away"), "sandbox_unavailable"), (RuntimeError("boom"), "crashed")):
        class Raising(NotesProfile):
            def execute(self, name: str, args: dict[str, Any], exc: BaseException = exc) -> ToolResult:
                raise exc

        run_dir = tmp_path / want
        with ScriptedServer([ScriptTurn(tool_calls=[call("show")])]) as server:
            cfg = RunConfig(model=ModelConfig(base_url=server.base_url, model="scripted"))
            with RunWriter(run_dir) as rec, pytest.raises(type(exc)):
                drive(cfg, Raising(), rec, "q")
        events = trajectory(run_dir)
        assert [e["type"] for e in events] == ["start", "model_call", "tool_call", "error", "end"]
        assert events[-1]["stop_reason"] == want == json.loads((run_dir / "result.json").read_text())["stop_reason"]


def test_extract_answer() -> None:
    assert extract_answer("a <answer>1</answer> b <ANSWER>\n two \n</ANSWER>") == "two"
    assert extract_answer("<answer>unclosed") == "unclosed"  # opened, never closed: the answer (issue 8)
    assert extract_answer(None) is None
    assert extract_answer("<answer></answer>") is None  # empty is not an answer
    assert extract_answer("<answer>a</answer> <answer> </answer>") == "a"


def test_a_failing_live_log_does_not_stop_the_run(tmp_path: Path) -> None:
    def broken(ev: dict[str, Any]) -> None:
        raise RuntimeError("terminal went away")

    with ScriptedServer(["<answer>fine</answer>"]) as srv:
        cfg = RunConfig(model=ModelConfig(base_url=srv.base_url, model="scripted"))
        with RunWriter(tmp_path / "run", listener=broken) as rec:
            result = drive(cfg, NotesProfile(), rec, "q")
    assert result.answer == "fine"
    assert [e["type"] for e in trajectory(tmp_path / "run")] == ["start", "model_call", "end"]
