"""The context strategies, seen from the requests a loopback server receives: which tool results are sent
verbatim and which cleared or dropped, every call with its result, the note, the window respected — for the
fte and shell profiles, on chat-completions servers that need their reasoning back (vLLM's ``reasoning``,
DeepSeek's ``reasoning_content``, OpenRouter's ``reasoning_details``) and on the Responses API (whose
reasoning items the emulator verifies)."""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import trajectory
from emulator_responses import ResponsesAPI, chat_view, serve
from emulators import PERSONALITIES
from test_events_written import typed_events

from fte_shell.agent.context.edits import DROP_NOTE, WORKSPACE_NOTE, placeholder
from fte_shell.config import STRATEGIES, AgentConfig, ContextConfig, ModelConfig, RunConfig, SearchConfig
from fte_shell.runner import run_question
from fte_shell.standins.server import ScriptTurn

Q = "Which function in the json module serializes an object to a JSON formatted str?"
WINDOW = 10000
TURNS = 16
SUMMARY = "SUMMARY: json.dumps serializes to a str; json.dump writes to a file."
QUERIES = ["json dumps", "json loads", "pickle dump", "csv writer", "re compile", "os path join"]
SERVERS = ["vllm", "deepseek", "openrouter", "responses"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from fte_shell.search.pydoc_corpus import build_pydoc_corpus

    return build_pydoc_corpus(tmp_path_factory.mktemp("pydoc") / "index")


class Steps:
    """A brain: one tool call per turn, id ``s<n>``, with an observation of its own; asked without tools
    (the summary's writer), it answers :data:`SUMMARY`. The shell's step 2 writes a scratch file."""

    def __init__(self) -> None:
        self.n = 0
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> ScriptTurn:
        tools = {t.get("function", {}).get("name") for t in body.get("tools") or []}
        if not tools:
            return ScriptTurn(content=SUMMARY)
        with self.lock:
            self.n += 1
            n = self.n
        if "bash" in tools:
            cmd = f"seq -f 'obs-{n}-line-%g' 1 45" + (" | tee /tmp/notes-2.txt" if n == 2 else "")
            return ScriptTurn(content=f"step {n}", tool_calls=[{"name": "bash", "id": f"s{n}", "arguments": {"command": cmd}}])
        return ScriptTurn(content=f"step {n}", tool_calls=[
            {"name": "search", "id": f"s{n}", "arguments": {"query": QUERIES[n % len(QUERIES)]}}])


def personality(server: str, strict: bool = False) -> Any:
    if server == "responses":  # strict: no earlier reasoning item dropped (dropping whole turns is allowed)
        return ResponsesAPI(window=WINDOW, strict=strict)
    return PERSONALITIES[server](window=WINDOW)  # type: ignore[call-arg]


Run = tuple[Any, list[dict[str, Any]], list[dict[str, Any]], Any]


def run(server: str, profile: str, spec: str | ContextConfig, out: Path, corpus: Path, turns: int = TURNS,
        strict: bool = False) -> Run:
    """One run; returns (result, events, the requests as chat messages lists, the emulator)."""
    context = ContextConfig.parse(spec) if isinstance(spec, str) else spec
    with serve(server, Steps(), personality(server, strict)) as emu:
        model: dict[str, Any] = {"api": "responses"} if server == "responses" else {}
        if server in ("openrouter", "deepseek"):
            model["thinking"] = True
        cfg = RunConfig(
            model=ModelConfig(base_url=emu.base_url, model=emu.model, context_window=WINDOW, **model),
            agent=AgentConfig(profile=profile, max_turns=turns, context=context),
            search=SearchConfig(backend="local", corpus=str(corpus), retriever="bm25s"),
        )
        result = run_question(Q, cfg, out)
    requests = [chat_view(r) if server == "responses" else r for r in emu.requests]
    return result, trajectory(out), requests, emu


def observations(events: list[dict[str, Any]]) -> dict[str, str]:
    return {e["id"]: e["observation"] for e in events if e["type"] == "tool_call"}


def agent_requests(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The agent's requests (with tools), not the summary writer's."""
    return [r for r in requests if r.get("tools")]


def check_pairs(messages: list[dict[str, Any]]) -> None:
    """Every tool result right after its call's assistant message, every call answered."""
    pending: list[str] = []
    for m in messages:
        if m["role"] == "tool":
            assert m["tool_call_id"] in pending, (m["tool_call_id"], pending)
            pending.remove(m["tool_call_id"])
            continue
        assert not pending, f"calls without a result: {pending}"
        if m["role"] == "assistant":
            pending = [tc["id"] for tc in m.get("tool_calls") or []]
    assert not pending


def check_window(events: list[dict[str, Any]], emu: Any) -> None:
    """Nothing refused; each call's prompt plus its max_tokens inside the window."""
    assert {s for s, _ in emu.replies} == {200}
    for e in events:
        if e["type"] == "model_call":
            want = e["request"].get("max_tokens") or e["request"].get("max_output_tokens")
            assert e["usage"]["prompt_tokens"] + want <= WINDOW


def tool_contents(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(m["tool_call_id"], m["content"]) for m in messages if m["role"] == "tool"]


@pytest.mark.parametrize("server", SERVERS)
def test_keep_all_overflows_where_keep_recent_and_discard_all_go_on(server: str, tmp_path: Path, corpus: Path) -> None:
    result, events, _, emu = run(server, "fte", "keep_all", tmp_path / "all", corpus)
    assert result.stop_reason == "context_overflow" and result.turns < TURNS
    assert not [e for e in events if e["type"] == "context_edit"]
    assert "context" not in json.loads((tmp_path / "all" / "result.json").read_text())
    overflow = result.turns

    # keep_recent:2 — every request: the 2 most recent results verbatim, each older one the placeholder
    result, events, requests, emu = run(server, "fte", "keep_recent:2", tmp_path / "recent", corpus, strict=True)
    assert (result.stop_reason, result.turns) == ("max_turns", TURNS) and TURNS > overflow
    obs = observations(events)
    requests = agent_requests(requests)
    assert len(requests) == TURNS
    for i, req in enumerate(requests):
        check_pairs(req["messages"])
        sent = tool_contents(req["messages"])
        assert [cid for cid, _ in sent] == [f"s{k}" for k in range(1, i + 1)]  # every call stays, with its result
        for k, (cid, content) in enumerate(sent):
            if k >= len(sent) - 2:
                assert content == obs[cid]
            else:
                assert content == placeholder("search", True) and obs[cid] not in content
    check_window(events, emu)
    if server == "responses":  # each request carried every earlier reasoning item, verified
        assert emu.personality.intact == list(range(TURNS))
    edits = [e for e in events if e["type"] == "context_edit"]
    assert [(e["turn"], e["cleared"]) for e in edits] == [(t, [f"s{t - 3}"]) for t in range(4, TURNS + 1)]
    assert all(e["strategy"] == "keep_recent:2" and e["messages_after"] == e["messages_before"] for e in edits)
    assert json.loads((tmp_path / "recent" / "result.json").read_text())["context"] == "keep_recent:2"

    # discard_all — past the trigger: system, question + note, then only what came after
    result, events, requests, emu = run(server, "fte", "discard_all", tmp_path / "discard", corpus)
    assert (result.stop_reason, result.turns) == ("max_turns", TURNS)
    requests = agent_requests(requests)
    edits = [e for e in typed_events(tmp_path / "discard") if e["type"] == "context_edit"]
    assert edits and all(e["strategy"] == "discard_all" and not e["escalated"] for e in edits)
    first = edits[0]["turn"]
    assert first <= overflow
    assert edits[0]["cleared"] == [f"s{k}" for k in range(1, first)]
    assert edits[0]["messages_after"] == 2 and edits[0]["messages_before"] == 2 + 2 * (first - 1)
    for i, req in enumerate(requests):
        msgs = req["messages"]
        check_pairs(msgs)
        assert msgs[0]["role"] == "system"
        last_edit = max((e["turn"] for e in edits if e["turn"] <= i + 1), default=None)
        if last_edit is None:
            assert msgs[1]["content"] == Q and len(msgs) == 2 + 2 * i
        else:  # the calls from the last edit's turn on, nothing earlier
            assert msgs[1]["content"] == f"{Q}\n\n{DROP_NOTE}{WORKSPACE_NOTE}"
            assert [cid for cid, _ in tool_contents(msgs)] == [f"s{k}" for k in range(last_edit, i + 1)]
            assert all(content == observations(events)[cid] for cid, content in tool_contents(msgs))
    check_window(events, emu)
    if server == "openrouter":  # every assistant message sent carried its reasoning_details unchanged
        assert all(n == min(i, i - (max((e["turn"] for e in edits if e["turn"] <= i + 1), default=1) - 1))
                   for i, n in enumerate(emu.personality.preserved))


@pytest.mark.parametrize("server", ["vllm", "responses"])
def test_discard_fraction_drops_the_oldest_share_of_the_calls(server: str, tmp_path: Path, corpus: Path) -> None:
    result, events, requests, emu = run(server, "fte", "discard_fraction:0.75", tmp_path / "r", corpus)
    assert (result.stop_reason, result.turns) == ("max_turns", TURNS)
    requests = agent_requests(requests)
    edits = [e for e in events if e["type"] == "context_edit"]
    assert edits
    for e in edits:
        before = [cid for cid, _ in tool_contents(requests[e["turn"] - 2]["messages"])]  # the request before it
        sent = before + [f"s{e['turn'] - 1}"]  # plus the last turn's call
        n_drop = math.ceil(0.75 * len(sent))
        assert e["cleared"] == sent[:n_drop]
        now = requests[e["turn"] - 1]["messages"]
        assert [cid for cid, _ in tool_contents(now)] == sent[n_drop:]
        assert now[1]["content"] == f"{Q}\n\n{DROP_NOTE}{WORKSPACE_NOTE}"
    for req in requests:
        check_pairs(req["messages"])
    check_window(events, emu)


@pytest.mark.parametrize("server", ["deepseek", "responses"])
def test_summary_replaces_the_steps_and_counts_its_tokens_apart(server: str, tmp_path: Path, corpus: Path) -> None:
    result, events, requests, emu = run(server, "fte", "summary", tmp_path / "r", corpus)
    assert (result.stop_reason, result.turns) == ("max_turns", TURNS)
    writer = [r for r in requests if not r.get("tools")]
    edits = [e for e in events if e["type"] == "context_edit"]
    assert edits and len(writer) == len(edits)
    assert "Steps:" in writer[0]["messages"][-1]["content"] and Q in writer[0]["messages"][-1]["content"]
    agent = agent_requests(requests)
    first = edits[0]["turn"]
    after = agent[first - 1]["messages"]
    assert len(after) == 2 and SUMMARY in after[1]["content"] and after[1]["content"].startswith(Q)
    spent = {k: sum(e["usage"][k] for e in edits) for k in ("prompt_tokens", "completion_tokens", "total_tokens")}
    assert result.summary_usage == spent and spent["total_tokens"] > 0
    calls = [e for e in events if e["type"] == "model_call"]
    assert len(calls) == TURNS and result.usage["total_tokens"] == sum(e["usage"]["total_tokens"] for e in calls)
    for req in agent:
        check_pairs(req["messages"])
    check_window(events, emu)


def test_workspace_reset_lists_what_the_workspace_holds(tmp_path: Path, corpus: Path) -> None:
    result, events, requests, emu = run("vllm", "fte", ContextConfig(strategy="workspace_reset", trigger_tokens=2500),
                                        tmp_path / "r", corpus, turns=10)
    assert (result.stop_reason, result.turns) == ("max_turns", 10)
    edits = [e for e in events if e["type"] == "context_edit"]
    assert edits
    from fte_shell.workspace import Workspace

    listing = Workspace(tmp_path / "r" / "workspace").listing_text()
    note = agent_requests(requests)[edits[0]["turn"] - 1]["messages"][1]["content"]
    assert note.startswith(f"{Q}\n\nYour earlier steps were cleared") and "(list_fetched)" in note
    assert listing == "(no documents fetched yet)" and note.endswith(listing)  # search only: nothing fetched
    check_window(events, emu)


def test_escalation_drops_the_oldest_steps_when_the_strategy_is_not_enough(tmp_path: Path, corpus: Path) -> None:
    """keep_recent:15 keeps more than the window holds: the oldest steps are dropped until it fits."""
    result, events, requests, emu = run("vllm", "fte", "keep_recent:15", tmp_path / "r", corpus)
    assert (result.stop_reason, result.turns) == ("max_turns", TURNS)
    edits = [e for e in events if e["type"] == "context_edit"]
    assert any(e["escalated"] for e in edits)
    esc = next(e for e in edits if e["escalated"])
    msgs = agent_requests(requests)[esc["turn"] - 1]["messages"]
    assert msgs[1]["content"] == f"{Q}\n\n{DROP_NOTE}{WORKSPACE_NOTE}" and "escalated" in esc["note"]
    for req in agent_requests(requests):
        check_pairs(req["messages"])
    check_window(events, emu)


def test_keep_recent_only_past_the_trigger_keeps_the_prefix_between_edits(tmp_path: Path, corpus: Path) -> None:
    cfg = ContextConfig(strategy="keep_recent", keep=1, keep_recent_every_turn=False)
    result, events, requests, _ = run("vllm", "fte", cfg, tmp_path / "r", corpus)
    assert result.stop_reason == "max_turns"
    edits = [e["turn"] for e in events if e["type"] == "context_edit"]
    assert 0 < len(edits) < TURNS - 3
    agent = agent_requests(requests)
    for t in range(2, TURNS + 1):  # between edits each request extends the last one (the prefix cache holds)
        prev, now = agent[t - 2]["messages"], agent[t - 1]["messages"]
        assert (now[:len(prev)] == prev) == (t not in edits)


@pytest.mark.docker
@pytest.mark.parametrize("server", ["deepseek", "responses"])
def test_the_shell_profile_keep_recent_and_workspace_reset(server: str, tmp_path: Path, corpus: Path,
                                                          docker_ready: None) -> None:
    result, events, requests, emu = run(server, "shell", "keep_recent:1", tmp_path / "k", corpus, turns=6)
    assert (result.stop_reason, result.turns) == ("max_turns", 6)
    obs = observations(events)
    for i, req in enumerate(agent_requests(requests)):
        check_pairs(req["messages"])
        sent = tool_contents(req["messages"])
        assert [c for _, c in sent] == [placeholder("bash", True)] * (i - 1) + [obs[cid] for cid, _ in sent[-1:] if i]
    check_window(events, emu)
    result, events, requests, emu = run(server, "shell", ContextConfig(strategy="workspace_reset", trigger_tokens=1800),
                                        tmp_path / "w", corpus, turns=6)
    edits = [e for e in events if e["type"] == "context_edit"]
    assert result.stop_reason == "max_turns" and edits and edits[0]["turn"] > 2
    note = agent_requests(requests)[edits[0]["turn"] - 1]["messages"][1]["content"]
    assert "Files you wrote under /tmp:\n/tmp/notes-2.txt (" in note
    check_window(events, emu)


def test_run_context_flag_end_to_end(tmp_path: Path, corpus: Path) -> None:
    """``fte-shell run --context discard_all``: the live log says where the edits were, result.json names it."""
    from typer.testing import CliRunner

    from fte_shell.cli import app

    out = tmp_path / "run"
    with serve("vllm", Steps(), personality("vllm")) as emu:
        r = CliRunner().invoke(app, ["run", Q, "--profile", "fte", "--base-url", emu.base_url, "--model", emu.model,
                                     "--corpus", str(corpus), "--retriever", "bm25s", "--max-turns", "10", "--context", "discard_all",
                                     "--context-window", "6000",
                                     "--out", str(out)], env={"COLUMNS": "300", "SERPER_API_KEY": ""})
    assert r.exit_code == 0, r.output
    edits = [e for e in trajectory(out) if e["type"] == "context_edit"]
    assert edits
    e = edits[0]
    assert (f"context discard_all: {len(e['cleared'])} call(s) dropped; {e['messages_before']} → 2 messages"
            in r.output)
    assert "· context discard_all ·" in r.output
    assert json.loads((out / "result.json").read_text())["context"] == "discard_all"


def test_summary_model_writes_the_summary_and_is_priced_apart(tmp_path: Path, corpus: Path) -> None:
    """``[agent.context.summary_model]`` on a server of its own (its unset api_key taken from [model]): it
    gets every summary request, the agent's server none; its tokens are ``summary_usage`` and its cost is
    in ``cost_usd`` at its own price."""
    from fte_shell.config import ModelPrice
    from fte_shell.model.prices import usage_cost
    from fte_shell.standins.server import ScriptedServer

    agent_price, writer_price = ModelPrice(input=1.0, output=2.0), ModelPrice(input=10.0, output=20.0)
    with ScriptedServer(policy=lambda body: SUMMARY) as writer:
        cfg = ContextConfig(strategy="summary", summary_model=ModelConfig(base_url=writer.base_url, model="writer",
                                                                           price=writer_price))
        with serve("vllm", Steps(), personality("vllm")) as emu:
            run_cfg = RunConfig(
                model=ModelConfig(base_url=emu.base_url, model=emu.model, api_key="k-1", price=agent_price),
                agent=AgentConfig(profile="fte", max_turns=TURNS, context=cfg),
                search=SearchConfig(backend="local", corpus=str(corpus), retriever="bm25s"),
            )
            result = run_question(Q, run_cfg, tmp_path / "r")
        assert all(r.get("tools") for r in emu.requests)
    events = trajectory(tmp_path / "r")
    edits = [e for e in events if e["type"] == "context_edit"]
    assert edits and len(writer.requests) == len(edits) and writer.requests[0]["model"] == "writer"
    assert [e["usage"] for e in edits] == [r["usage"] for r in writer.responses]
    spent = {k: sum(r["usage"][k] for r in writer.responses) for k in ("prompt_tokens", "completion_tokens", "total_tokens")}
    assert result.summary_usage == spent
    agent_cost = sum(e["cost_usd"] for e in events if e["type"] == "model_call")
    writer_cost = sum(usage_cost(r["usage"], writer_price) for r in writer.responses)
    assert result.cost_usd == round(agent_cost + writer_cost, 8) and writer_cost > 0


def _view(messages: list[dict[str, Any]], window: int | None = None) -> Any:
    from types import SimpleNamespace

    from fte_shell.agent.context import ContextView
    from fte_shell.model import ServerInfo

    episode = SimpleNamespace(names={"search", "list_fetched"}, profile=SimpleNamespace(name="fte"))
    server = ServerInfo(context_window=window) if window else None
    return ContextView(messages, [], len(messages), server, 0, episode, None)  # type: ignore[arg-type]


def _call(cid: str) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": "search", "arguments": "{}"}}


CONVERSATION = [
    {"role": "system", "content": "S"}, {"role": "user", "content": "Q"},
    {"role": "assistant", "content": "", "tool_calls": [_call("c1"), _call("c2")], "reasoning_content": "r1"},
    {"role": "tool", "tool_call_id": "c1", "content": "one"}, {"role": "tool", "tool_call_id": "c2", "content": "two"},
    {"role": "assistant", "content": "thinking aloud"}, {"role": "user", "content": "NUDGE"},
    {"role": "assistant", "content": "", "tool_calls": [_call("c3")]},
    {"role": "tool", "tool_call_id": "c3", "content": "three"},
    {"role": "user", "content": "FINAL"},
]


def test_steps_go_whole_and_the_request_s_own_notice_stays() -> None:
    """Hand-made: discard_all keeps the system prompt, the question with the note and the final notice (in
    one user message); keep_recent:1 keeps every message, the oldest results as placeholders; neither changes
    the kept conversation."""
    from fte_shell.agent.context import make_policy

    kept = json.loads(json.dumps(CONVERSATION))
    cfg = RunConfig(agent=AgentConfig(context=ContextConfig(strategy="discard_all", trigger_tokens=1)))
    sent = make_policy(cfg).prepare(_view(kept))
    assert sent.messages == [CONVERSATION[0], {"role": "user", "content": f"Q\n\n{DROP_NOTE}{WORKSPACE_NOTE}\n\nFINAL"}]
    assert sent.edit is not None and sent.edit.cleared == ["c1", "c2", "c3"] and not sent.edit.escalated
    cfg = RunConfig(agent=AgentConfig(context=ContextConfig.parse("keep_recent:1")))
    sent = make_policy(cfg).prepare(_view(kept))
    gone = placeholder("search", True)
    assert sent.messages == [*CONVERSATION[:3], {**CONVERSATION[3], "content": gone},
                             {**CONVERSATION[4], "content": gone}, *CONVERSATION[5:]]
    assert sent.edit is not None and sent.edit.cleared == ["c1", "c2"]
    cfg = RunConfig(agent=AgentConfig(context=ContextConfig.parse("discard_fraction:0.5")))  # 2 of 3 calls: c1, c2
    sent = make_policy(cfg).prepare(_view(kept, window=100))  # past the window: acts, then escalates to fit
    assert sent.edit is not None and sent.edit.cleared == ["c1", "c2", "c3"] and sent.edit.escalated
    assert kept == CONVERSATION


def test_a_third_party_strategy_loads_by_reference() -> None:
    """``strategy = "module:attr"`` (tests/thirdparty_plugins.py: keep_recent keeping one observation) is
    built as a built-in one is, and ``--context`` takes the reference too."""
    from fte_shell.agent.context import STRATEGY_CLASSES, make_policy

    assert list(STRATEGY_CLASSES) == [s for s in STRATEGIES if s != "keep_all"]
    spec = ContextConfig.parse("tests.thirdparty_plugins:KeepLastOne")
    assert spec.strategy == spec.label == "tests.thirdparty_plugins:KeepLastOne"
    sent = make_policy(RunConfig(agent=AgentConfig(context=spec))).prepare(_view(json.loads(json.dumps(CONVERSATION))))
    assert sent.edit is not None and sent.edit.cleared == ["c1", "c2"]
    with pytest.raises(ValueError, match="or a third-party one as module:attr"):
        ContextConfig(strategy="nope")


def test_a_summary_that_fails_drops_the_steps_and_says_so(tmp_path: Path, corpus: Path) -> None:
    """The writer answers with no text, then with an error: the steps are dropped as discard_all does, each
    edit says why, and the empty answer's tokens are counted all the same."""
    from fte_shell.standins.server import ScriptedServer

    with ScriptedServer(["", ScriptTurn(status=400, error="writer refused")] * 4) as writer:
        cfg = ContextConfig(strategy="summary", trigger_tokens=3000,
                            summary_model=ModelConfig(base_url=writer.base_url, model="w", max_retries=0))
        result, events, requests, emu = run("vllm", "fte", cfg, tmp_path / "r", corpus)
    assert result.stop_reason == "max_turns"
    edits = [e for e in events if e["type"] == "context_edit"]
    assert len(edits) >= 2 and "summary failed (the writer returned no text)" in edits[0]["note"]
    assert "summary failed (" in edits[1]["note"] and "writer refused" in edits[1]["note"]
    assert edits[0]["usage"] == writer.responses[0]["usage"] and edits[1]["usage"] is None
    assert result.summary_usage["total_tokens"] == sum(r["usage"]["total_tokens"] for r in writer.responses)
    assert agent_requests(requests)[edits[0]["turn"] - 1]["messages"][1]["content"] == f"{Q}\n\n{DROP_NOTE}{WORKSPACE_NOTE}"
    check_window(events, emu)
