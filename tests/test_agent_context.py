"""The loop's context step: ``keep_all`` sends byte-for-byte what the loop sent before the step existed
(a fixed script against requests recorded from the loop without it), a policy that sends less is
recorded as a ``context_edit`` event, and the token estimate calibrates on the server's count only when
the request extends the last one."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any

from conftest import drive
from test_agent import NotesProfile
from test_events_written import typed_events

from fte_shell.agent import ContextEdit, ContextView, Sent, estimate_request
from fte_shell.agent.replies import estimate_tokens
from fte_shell.config import ModelConfig, RunConfig
from fte_shell.record.rundir import RunWriter
from fte_shell.standins.server import ScriptedServer, ScriptTurn, tokens_for

GOLDEN = Path(__file__).parent / "fixtures" / "golden" / "keep_all_requests.json"
WINDOW = 8000


def call(name: str, arguments: dict[str, Any] | str | None = None) -> dict[str, Any]:
    return {"name": name, "arguments": {} if arguments is None else arguments}


SCRIPT = [  # tool calls, bad calls, a nudge, a cut reply, a text tool call, an answer
    ScriptTurn(tool_calls=[call("note", {"text": "alpha"}), call("note", {"text": "beta"}), call("show")]),
    ScriptTurn(tool_calls=[call("note", "{not json"), call("nope"), call("fail")]),
    "I am thinking, no tool and no answer.",
    ScriptTurn(content="cut", finish_reason="length"),
    ScriptTurn(content='<tool_call>{"name": "show", "arguments": {}}</tool_call>'),
    ScriptTurn(tool_calls=[call("show")]),
    "<answer>alpha, beta</answer>",
]


def run(tmp_path: Path, **agent_kw: Any) -> tuple[Any, list[dict[str, Any]]]:
    with ScriptedServer(SCRIPT) as srv:
        cfg = RunConfig(model=ModelConfig(base_url=srv.base_url, model="scripted", backoff_s=0.01, max_retries=0,
                                          context_window=WINDOW, parse_text_tool_calls=True))
        cfg.agent.current_date = "2030-01-02"
        with RunWriter(tmp_path / "run") as rec:
            result = drive(cfg, NotesProfile(), rec, "What is noted?", run_id="g1", **agent_kw)
    return result, srv.requests


def test_keep_all_requests_are_byte_identical_to_the_loop_before_the_context_step(tmp_path: Path) -> None:
    result, requests = run(tmp_path)
    assert (result.stop_reason, result.turns) == ("answer", 7)
    assert json.dumps(requests, ensure_ascii=False, indent=1) + "\n" == GOLDEN.read_text()
    assert len({r["max_tokens"] for r in requests}) > 1  # fitted to the window every turn: the estimate is in it


class ClearOldObservations:
    """A test policy: every tool result before the last assistant message is replaced by a placeholder."""

    name = "clear_old"

    def __init__(self) -> None:
        self.views: list[ContextView] = []

    def prepare(self, view: ContextView) -> Sent:
        self.views.append(view)
        last = max(i for i, m in enumerate(view.messages) if m["role"] in ("assistant", "user"))
        sent, cleared = [], []
        for i, m in enumerate(view.messages):
            if m["role"] == "tool" and i < last:
                cleared.append(m["tool_call_id"])
                m = {**m, "content": "[cleared]"}
            sent.append(m)
        return Sent(sent, ContextEdit(cleared, "old observations cleared")) if cleared else Sent(view.messages)


def test_an_edit_is_sent_recorded_and_estimated_whole_on_the_servers_scale(tmp_path: Path) -> None:
    policy = ClearOldObservations()
    result, requests = run(tmp_path, context=policy)
    assert result.stop_reason == "answer"
    assert [v.turn for v in policy.views] == list(range(1, 8))
    third = requests[2]["messages"]  # turn 3: turn 1's results cleared, turn 2's (the last reply's) kept
    assert [m["content"] for m in third if m["role"] == "tool"][:3] == ["[cleared]"] * 3
    assert [m["content"] for m in third if m["role"] == "tool"][3].startswith("Error: the arguments of 'note'")
    edits = [e for e in typed_events(tmp_path / "run") if e["type"] == "context_edit"]
    assert [e["turn"] for e in edits] == [3, 4, 5, 6, 7]
    first = edits[0]
    assert (first["strategy"], first["cleared"], first["note"]) == ("clear_old", ["call_1_0", "call_1_1", "call_1_2"],
                                                                      "old observations cleared")
    assert first["messages_before"] == first["messages_after"] == len(third)
    n = len(requests[1]["messages"])  # the kept conversation extends turn 2's request: calibrated on its count
    assert first["tokens_before"] == tokens_for(requests[1]["messages"]) + estimate_tokens(third[n:])
    prev = requests[1]  # the edited one: whole, scaled by the server's count of the last request against its estimate
    scale = tokens_for(prev["messages"]) / estimate_tokens(prev["messages"], prev["tools"])
    assert first["tokens_after"] == math.ceil(estimate_tokens(third, requests[2]["tools"]) * scale)
    assert first["tokens_after"] < first["tokens_before"]  # clearing measures smaller, on the same scale
    whole = 0
    for prev, req in itertools.pairwise(requests):  # max_tokens = window - estimate - margin
        n = len(prev["messages"])
        if req["messages"][:n] == prev["messages"]:  # extends the last request: calibrated on its count
            est = tokens_for(prev["messages"]) + estimate_tokens(req["messages"][n:])
        else:  # an edit changed what was sent before: the whole request, scaled like the last one was counted
            scale = tokens_for(prev["messages"]) / estimate_tokens(prev["messages"], prev["tools"])
            est, whole = math.ceil(estimate_tokens(req["messages"], req["tools"]) * scale), whole + 1
        assert req["max_tokens"] == min(16384, WINDOW - est - 256)
    assert whole >= 2  # the edits at turns 3 and 4 changed earlier messages


def test_the_estimate_calibrates_only_on_an_extension_of_the_last_request() -> None:
    tools = [{"type": "function", "function": {"name": "t", "parameters": {}}}]
    last = [{"role": "system", "content": "s" * 300}, {"role": "user", "content": "q"}]
    new = [{"role": "assistant", "content": "a" * 30}, {"role": "tool", "tool_call_id": "c", "content": "o" * 60}]
    # extension: the server's count for the last request plus the appended messages
    assert estimate_request([*last, *new], tools, last, 1000) == 1000 + estimate_tokens(new)
    # not an extension (an earlier message changed, or one dropped): the whole request, on the server's scale
    # (the server counted 1000 where the same estimate said estimate_tokens(last, tools))
    edited = [{"role": "system", "content": "s" * 300}, {"role": "user", "content": "Q"}, *new]
    scale = 1000 / estimate_tokens(last, tools)
    assert estimate_request(edited, tools, last, 1000) == math.ceil(estimate_tokens(edited, tools) * scale)
    dropped = [last[0], *new]
    assert estimate_request(dropped, tools, last, 1000) == math.ceil(estimate_tokens(dropped, tools) * scale)
    # no count reported, or a first request: the whole request
    assert estimate_request([*last, *new], tools, last, None) == estimate_tokens([*last, *new], tools)
    assert estimate_request(last, tools, [], None) == estimate_tokens(last, tools)
