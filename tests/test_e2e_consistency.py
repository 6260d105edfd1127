"""End-to-end consistency of the loop, the profiles, the run directory and the metrics, through the real
``openai`` client and the scripted server on loopback (nothing of ours is mocked):

- visit-summary's reader-model tokens are counted apart (``result.json`` ``summary_usage``) and reach the
  metrics and the report;
- a model that fails for good mid-run stops with ``model_error`` and leaves its trajectory on disk;
- servers that bend the OpenAI shape (null ids, non-string arguments, text beside tool calls);
- huge observations stay under the structured read cap and the shell output cap;
- a profile crash in a sweep is recorded and the sweep goes on;
- ``fte-shell run`` talks Serper's API shape when a key is set, and says plainly when there is no search.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import trajectory
from typer.testing import CliRunner

from fte_shell.cli import app
from fte_shell.config import ModelConfig, RunConfig
from fte_shell.metrics import run_metrics, summarize
from fte_shell.report.build import write_report
from fte_shell.runner import run_question
from fte_shell.search import LocalCorpus, SearchResult
from fte_shell.search.corpus import CorpusDoc, build_corpus
from fte_shell.standins.server import ScriptedServer, ScriptTurn
from fte_shell.sweep import BenchConfig, run_sweep
from fte_shell.world import RunWorld, World
from tests.servers import FakeSerper

TOKEN_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")
HARBOUR = (
    "The Tern Quay harbour was dredged in 1887 by the engineer Lio Brand.\n"
    "Its breakwater is 640 metres long.\n"
    "Ferries leave for the outer islands every morning."
)
WIDE_LINE = "wide " * 200  # 1,000 characters


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    docs = [
        CorpusDoc(docid="tern-quay", title="Tern Quay harbour", text=HARBOUR),
        CorpusDoc(docid="wide-page", title="A very wide page", text="\n".join(f"{k} {WIDE_LINE}" for k in range(400))),
    ]
    return build_corpus(docs, tmp_path_factory.mktemp("corpus") / "idx", name="harbour")


@pytest.fixture(scope="module")
def corpus(corpus_dir: Path) -> Iterator[LocalCorpus]:
    c = LocalCorpus(corpus_dir)
    yield c
    c.close()


def tc(name: str, **args: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": args}]}


def config(base_url: str, profile: str, **agent: Any) -> RunConfig:
    return RunConfig.model_validate(
        {"model": {"base_url": base_url, "model": "scripted", "max_retries": 0, "backoff_s": 0.01},
         "agent": {"profile": profile, "current_date": "2026-11-30", **agent}}
    )


def summed(usages: list[dict[str, int]]) -> dict[str, int]:
    return {k: sum(u[k] for u in usages) for k in TOKEN_KEYS}


# --- token accounting -----------------------------------------------------------------------------------
def test_reader_model_tokens_are_counted_apart_and_reach_metrics_and_report(tmp_path: Path, corpus: LocalCorpus) -> None:
    script = [
        tc("visit", url="tern-quay", goal="who dredged the harbour"),
        "Lio Brand dredged the harbour in 1887.",  # the reader's turn (same endpoint by default)
        tc("visit", url="tern-quay", goal="breakwater length"),
        "The breakwater is 640 metres long.",  # the reader again
        "<answer>Lio Brand</answer>",
    ]
    run_dir = tmp_path / "runs" / "visit-summary" / "q1" / "r0"
    with ScriptedServer(script) as srv:
        result = run_question("Who dredged Tern Quay?", config(srv.base_url, "visit-summary"), run_dir,
                              world=World(corpus, corpus), qid="q1")
    assert result.stop_reason == "answer"
    sent = [r["usage"] for r in srv.responses]
    agent_usage, reader_usage = summed([sent[0], sent[2], sent[4]]), summed([sent[1], sent[3]])
    saved = json.loads((run_dir / "result.json").read_text())
    # the agent's usage is the model_call events' sum only; the reader's is apart, from the tool calls' meta
    assert saved["usage"] == result.usage == agent_usage
    assert saved["summary_usage"] == result.summary_usage == reader_usage
    events = trajectory(run_dir)
    assert summed([e["usage"] for e in events if e["type"] == "model_call"]) == agent_usage
    assert summed([e["meta"]["summary_usage"] for e in events if e["type"] == "tool_call"]) == reader_usage
    # documented order of result.json
    assert list(saved) == ["question", "answer", "profile", "model", "turns", "stop_reason", "tool_calls", "usage",
                           "summary_usage", "cost_usd", "wall_s", "run_id", "started_at", "meta", "config_digest"]

    m = run_metrics(run_dir)
    assert (m.total_tokens, m.summary_tokens) == (agent_usage["total_tokens"], reader_usage["total_tokens"])
    # a result.json without the field (an older run) falls back to the trajectory's tool-call meta
    (run_dir / "result.json").write_text(json.dumps({k: v for k, v in saved.items() if k != "summary_usage"}))
    assert run_metrics(run_dir).summary_tokens == reader_usage["total_tokens"]
    (run_dir / "result.json").write_text(json.dumps(saved))

    rep = write_report([tmp_path], tmp_path / "report")
    (summary,) = summarize([m])
    assert summary.summary_tokens == reader_usage["total_tokens"]
    md = rep.markdown.read_text()
    assert "| Tokens | Reader tokens | Wall s |" in md
    assert f"| {agent_usage['total_tokens']:,} | {reader_usage['total_tokens']:,} |" in md
    assert json.loads(rep.metrics.read_text())["runs"][0]["summary_tokens"] == reader_usage["total_tokens"]


def test_other_profiles_report_zero_reader_tokens(tmp_path: Path, corpus: LocalCorpus) -> None:
    with ScriptedServer([tc("search", query="harbour"), "<answer>x</answer>"]) as srv:
        result = run_question("Q?", config(srv.base_url, "fte"), tmp_path / "run", world=World(corpus, corpus))
    assert result.summary_usage == dict.fromkeys(TOKEN_KEYS, 0)
    assert json.loads((tmp_path / "run" / "result.json").read_text())["summary_usage"] == result.summary_usage
    rep = write_report([tmp_path / "run"], tmp_path / "report")
    assert "| Reader tokens |" not in rep.markdown.read_text()  # the column appears only when some were spent


# --- robustness -----------------------------------------------------------------------------------------
def test_model_failing_for_good_mid_run_stops_with_endpoint_unavailable_and_keeps_the_trajectory(
    tmp_path: Path, corpus: LocalCorpus
) -> None:
    def policy(body: dict[str, Any]) -> Any:
        if len(body["messages"]) == 2:  # first turn: a real tool call
            return tc("fetch", url="tern-quay")
        return ScriptTurn(status=503, error="upstream exploded")  # 503: always retried (the same 500 twice is not)

    with ScriptedServer(policy=policy) as srv:
        cfg = config(srv.base_url, "fte")
        cfg.model.max_retries = 2
        result = run_question("Who dredged Tern Quay?", cfg, tmp_path / "run", world=World(corpus, corpus))
    assert result.stop_reason == "endpoint_unavailable" and result.answer is None and result.turns == 2
    assert len(srv.requests) == 1 + 3  # the second turn: one attempt and two retries
    events = trajectory(tmp_path / "run")
    assert [e["type"] for e in events] == ["start", "model_call", "tool_call", "retry", "retry", "error", "end"]
    assert "after 3 attempts" in events[5]["message"] and "upstream exploded" in events[5]["message"]
    assert events[2]["observation"].startswith("/work/tern-quay-")  # the work before the failure is kept
    saved = json.loads((tmp_path / "run" / "result.json").read_text())
    assert saved["stop_reason"] == "endpoint_unavailable" and saved["tool_calls"] == {"fetch": 1}
    assert saved["usage"] == srv.responses[0]["usage"]
    assert len(list((tmp_path / "run" / "workspace").glob("*.txt"))) == 1


def test_tool_calls_in_bent_shapes_are_handled(tmp_path: Path, corpus: LocalCorpus) -> None:
    """Null/missing ids, an object or a number as ``arguments``, and text (even an <answer>) beside tool
    calls: the calls run, the ids are filled in and unique, the text is not taken as final."""
    raw = [
        {"id": None, "type": "function", "function": {"name": "fetch", "arguments": {"url": "tern-quay"}}},
        {"type": "function", "function": {"name": "read", "arguments": 7}},
        {"id": "", "type": "function", "function": {"name": "list_fetched", "arguments": None}},
    ]
    script = [
        ScriptTurn(content="Let me look. <answer>premature</answer>", raw_tool_calls=raw),
        "<answer>Lio Brand</answer>",
    ]
    with ScriptedServer(script) as srv:
        result = run_question("Who dredged Tern Quay?", config(srv.base_url, "fte"), tmp_path / "run",
                              world=World(corpus, corpus))
    assert result.stop_reason == "answer" and result.answer == "Lio Brand" and result.turns == 2
    calls = [e for e in trajectory(tmp_path / "run") if e["type"] == "tool_call"]
    assert [c["name"] for c in calls] == ["fetch", "read", "list_fetched"]
    assert [c["id"] for c in calls] == ["call_1_0", "call_1_1", "call_1_2"]
    assert calls[0]["arguments"] == {"url": "tern-quay"} and not calls[0]["error"]
    assert calls[1]["arguments"] is None and calls[1]["raw_arguments"] == "7" and calls[1]["error"]
    assert calls[1]["observation"] == ("Error: the arguments of 'read' must be a JSON object, got int; they were: 7\n"
                                       "Call it again with a JSON object as its arguments.")
    assert calls[2]["arguments"] == {} and not calls[2]["error"] and "tern-quay" in calls[2]["observation"]
    # the conversation sent back holds the assistant text and one tool message per call, ids matching
    second = srv.requests[1]["messages"]
    assert second[2]["content"] == "Let me look. <answer>premature</answer>"
    assert [m["tool_call_id"] for m in second[3:6]] == ["call_1_0", "call_1_1", "call_1_2"]


def test_huge_document_read_stays_under_the_structured_caps(tmp_path: Path, corpus: LocalCorpus) -> None:
    with ScriptedServer([tc("fetch", url="wide-page"), "<answer>x</answer>"]) as srv:
        run_question("Q?", config(srv.base_url, "fte"), tmp_path / "a", world=World(corpus, corpus))
    path = next(e for e in trajectory(tmp_path / "a") if e["type"] == "tool_call")["observation"].split()[0]
    script = [tc("read", path=path), tc("read", path=path, offset=150, limit=500), tc("grep", pattern="wide", context=10),
              "<answer>x</answer>"]
    with ScriptedServer(script) as srv:
        cfg = config(srv.base_url, "fte")
        run_question("Q?", cfg, tmp_path / "a", world=World(corpus, corpus))  # same workspace
    *reads, grep = [e for e in trajectory(tmp_path / "a") if e["type"] == "tool_call"]
    cap = cfg.agent.read_max_bytes
    # grep: 402 matching lines (the two header lines too), 20 shown, each cut to grep_line_chars
    assert len(grep["observation"].encode()) <= cap and (grep["meta"]["matches"], grep["meta"]["shown"]) == (402, 20)
    assert all(len(line) <= cfg.agent.grep_line_chars + 12 for line in grep["observation"].splitlines()[:-1])
    for ev in reads:
        assert not ev["error"]
        assert len(ev["observation"].encode()) <= cap
        body = ev["observation"].splitlines()[:-1]
        assert len(body) <= cfg.agent.read_max_lines
    # 404 lines of ~1 KB: the byte cap binds before the line cap; the note says where to continue
    first = reads[0]
    assert first["meta"]["first"] == 1 and first["meta"]["last"] < 60
    assert first["observation"].endswith(f"of 404. Use offset={first['meta']['last'] + 1} to continue.)")
    assert reads[1]["meta"]["first"] == 150


@pytest.mark.docker
def test_huge_shell_output_stays_under_the_output_cap(tmp_path: Path, docker_ready: None) -> None:
    script = [tc("bash", command="head -c 3000000 /dev/zero | tr '\\0' 'y'; echo; echo tail-marker"),
              "<answer>done</answer>"]
    with ScriptedServer(script) as srv:
        cfg = config(srv.base_url, "shell")
        cfg.search.backend = "none"
        cfg.sandbox.output_cap_bytes = 20_000
        result = run_question("Q?", cfg, tmp_path / "run", qid="huge-output")
    assert result.stop_reason == "answer"
    (ev,) = [e for e in trajectory(tmp_path / "run") if e["type"] == "tool_call"]
    assert ev["meta"]["truncated"] is True and ev["meta"]["exit_code"] == 0
    assert len(ev["observation"].encode()) <= 20_000 + 1_000  # the cap plus the notes
    assert "tail-marker" in ev["observation"]  # the end of the output is kept
    # what went back to the model is exactly what was recorded
    assert srv.requests[1]["messages"][-1]["content"] == ev["observation"]


class ExplodingSearch:
    """A search backend whose index is broken in an unexpected way (not a SearchUnavailable)."""

    name = "exploding"

    def search(self, query: str, n: int) -> list[SearchResult]:
        raise RuntimeError("index file truncated")


def test_profile_crash_in_a_sweep_is_recorded_and_the_sweep_goes_on(tmp_path: Path, corpus: LocalCorpus) -> None:
    qs = tmp_path / "qs.jsonl"
    qs.write_text("".join(json.dumps({"id": f"q{k}", "question": f"Question {k}?", "answer": "Lio Brand"}) + "\n"
                          for k in (1, 2)))
    search = {"fte": ExplodingSearch(), "snippet-only": corpus}

    def run_fn(question: str, cfg: RunConfig, run_dir: Path, **kw: Any) -> Any:
        kw["world"] = World(search[cfg.agent.profile], page_cache=kw["world"].page_cache)  # fte: the broken backend
        return run_question(question, cfg, run_dir, **kw)

    def policy(body: dict[str, Any]) -> Any:
        if body["messages"][-1]["role"] == "user":
            return tc("search", query="Tern Quay harbour")
        return "<answer>Lio Brand</answer>"

    out = tmp_path / "sweep"
    with ScriptedServer(policy=policy) as srv:
        cfg = RunConfig(model=ModelConfig(base_url=srv.base_url, model="scripted", max_retries=0))
        bench = BenchConfig(dataset=f"jsonl:{qs}", profiles=["fte", "snippet-only"], out=out, retries=0, concurrency=1)
        stats = run_sweep(bench, cfg, run_fn=run_fn)
    assert (stats.done, stats.failed, stats.pending) == (2, 2, 2)  # crashed runs are not results
    for q in ("q1", "q2"):
        crashed = json.loads((out / "runs" / "fte" / q / "r0" / "result.json").read_text())
        assert crashed["stop_reason"] == "crashed" and crashed["tool_calls"] == {"search": 1}
        events = trajectory(out / "runs" / "fte" / q / "r0")
        assert [e["type"] for e in events] == ["start", "model_call", "tool_call", "error", "end"]
        # the crashed call is in the trajectory too, so the trajectory and result.json's counts agree
        assert events[2]["name"] == "search" and events[2]["error"] is True
        assert events[2]["observation"] == "(the tool crashed: RuntimeError: index file truncated)"
        assert events[3]["message"] == "RuntimeError: index file truncated"
        assert run_metrics(out / "runs" / "fte" / q / "r0").calls == 1
        ok = json.loads((out / "runs" / "snippet-only" / q / "r0" / "result.json").read_text())
        assert ok["stop_reason"] == "answer"
    failures = [json.loads(line) for line in (out / "failures.jsonl").read_text().splitlines()]
    assert sorted(f["qid"] for f in failures) == ["q1", "q2"] and all(f["profile"] == "fte" for f in failures)
    assert all("index file truncated" in f["error"] for f in failures)
    rows = {s.profile: s for s in summarize([run_metrics(d) for d in sorted(out.glob("runs/*/*/r0"))])}
    assert (rows["fte"].runs, rows["fte"].failed, rows["snippet-only"].failed) == (2, 2, 0)


# --- fte-shell run and search ---------------------------------------------------------------------------
TERN_QUAY = [
    {"title": "Tern Quay - harbour history", "link": "https://harbour.example/tern-quay",
     "snippet": "Dredged in 1887 by Lio Brand.", "position": 1},
    {"title": "Breakwaters", "link": "https://harbour.example/breakwaters",
     "snippet": "Long walls of stone.", "position": 2},
]
"""The Serper results of the run tests (served by :class:`tests.servers.FakeSerper`)."""


CLEAN_ENV = {"OPENAI_BASE_URL": "", "OPENAI_API_KEY": "", "OPENAI_MODEL": "", "SERPER_API_KEY": "", "COLUMNS": "200"}


def test_run_with_a_serper_key_talks_serpers_api_shape(tmp_path: Path) -> None:
    serper = FakeSerper(TERN_QUAY)
    try:
        (tmp_path / "c.toml").write_text(f'[search]\nserper_url = "{serper.url}"\nnum_results = 2\n')
        with ScriptedServer([tc("search", query="Tern Quay dredged"), "<answer>Lio Brand</answer>"]) as srv:
            res = CliRunner().invoke(
                app,
                ["run", "Who dredged Tern Quay?", "--profile", "fte", "--config", str(tmp_path / "c.toml"),
                 "--out", str(tmp_path / "run")],
                env={**CLEAN_ENV, "OPENAI_BASE_URL": srv.base_url, "OPENAI_MODEL": "m", "OPENAI_API_KEY": "sk-x",
                     "SERPER_API_KEY": "serper-key-1"},
            )
    finally:
        serper.close()
    assert res.exit_code == 0, res.output
    assert "search: Serper (web)" in res.output and "Lio Brand" in res.output
    (req,) = serper.requests
    assert req["path"] == "/search" and req["headers"]["X-API-KEY"] == "serper-key-1"
    assert req["body"] == {"q": "Tern Quay dredged", "num": 2}
    (ev,) = [e for e in trajectory(tmp_path / "run") if e["type"] == "tool_call"]
    assert "https://harbour.example/tern-quay" in ev["observation"]
    assert ev["observation"].index("Tern Quay - harbour history") < ev["observation"].index("Breakwaters")
    assert "serper-key-1" not in (tmp_path / "run" / "trajectory.jsonl").read_text()  # the key is masked


def test_run_without_key_or_corpus_says_search_is_unavailable(tmp_path: Path) -> None:
    with ScriptedServer([tc("fetch", url="not-a-docid"), "<answer>unknown</answer>"]) as srv:
        res = CliRunner().invoke(
            app, ["run", "Who dredged Tern Quay?", "--profile", "fte", "--out", str(tmp_path / "run")],
            env={**CLEAN_ENV, "OPENAI_BASE_URL": srv.base_url, "OPENAI_MODEL": "m"},
        )
    assert res.exit_code == 0, res.output
    assert "search: none — no SERPER_API_KEY and no local corpus configured" in res.output
    # the model is offered no search tool
    assert [t["function"]["name"] for t in srv.requests[0]["tools"]] == ["fetch", "grep", "read", "list_fetched"]


def test_run_prints_reader_tokens_apart(tmp_path: Path, corpus_dir: Path) -> None:
    script = [tc("visit", url="tern-quay", goal="who"), "Lio Brand did.", "<answer>Lio Brand</answer>"]
    with ScriptedServer(script) as srv:
        res = CliRunner().invoke(
            app, ["run", "Who dredged Tern Quay?", "--profile", "visit-summary", "--corpus", str(corpus_dir),
                  "--out", str(tmp_path / "run")],
            env={**CLEAN_ENV, "OPENAI_BASE_URL": srv.base_url, "OPENAI_MODEL": "m"},
        )
    assert res.exit_code == 0, res.output
    reader = srv.responses[1]["usage"]["total_tokens"]
    agent = srv.responses[0]["usage"]["total_tokens"] + srv.responses[2]["usage"]["total_tokens"]
    assert f"tokens {agent:,} (" in res.output and f"reader model tokens {reader:,} (apart)" in res.output
    assert f"reader model {reader:,} tokens)" in res.output  # on the visit call's line of the live log


@pytest.mark.parametrize(
    ("backend", "said", "error"),
    [
        ("serper", "search: Serper was asked for, but no SERPER_API_KEY is set", "Serper search needs an API key"),
        ("local", "search: a local corpus was asked for, but none is configured", "search backend 'local' needs a corpus"),
    ],
)
def test_run_with_an_unusable_search_backend_says_why_and_creates_nothing(
    tmp_path: Path, backend: str, said: str, error: str
) -> None:
    with ScriptedServer(["<answer>x</answer>"]) as srv:
        res = CliRunner().invoke(
            app, ["run", "Q?", "--profile", "fte", "--search", backend, "--out", str(tmp_path / "run")],
            env={**CLEAN_ENV, "OPENAI_BASE_URL": srv.base_url, "OPENAI_MODEL": "m"},
        )
    assert res.exit_code == 2 and said in res.output and f"error: {error}" in res.output
    assert srv.requests == [] and not (tmp_path / "run").exists()


@pytest.mark.docker
def test_shell_and_structured_search_show_the_same_serper_results(tmp_path: Path, docker_ready: None) -> None:
    """``fte-shell run`` with a Serper key, shell and fte profiles: the container's ``search`` helper (through
    the host gateway) and the structured tool send the same request and show the same text."""
    serper = FakeSerper(TERN_QUAY)
    seen: dict[str, str] = {}
    try:
        (tmp_path / "c.toml").write_text(f'[search]\nserper_url = "{serper.url}"\nnum_results = 2\n')
        for profile, call in (("shell", tc("bash", command="search 'Tern Quay dredged'")),
                              ("fte", tc("search", query="Tern Quay dredged"))):
            with ScriptedServer([call, "<answer>Lio Brand</answer>"]) as srv:
                res = CliRunner().invoke(
                    app, ["run", "Who dredged Tern Quay?", "--profile", profile, "--config", str(tmp_path / "c.toml"),
                          "--out", str(tmp_path / profile), "--quiet"],
                    env={**CLEAN_ENV, "OPENAI_BASE_URL": srv.base_url, "OPENAI_MODEL": "m", "SERPER_API_KEY": "k-2"},
                )
            assert res.exit_code == 0, res.output
            (ev,) = [e for e in trajectory(tmp_path / profile) if e["type"] == "tool_call"]
            seen[profile] = ev["observation"]
    finally:
        serper.close()
    assert [r["body"] for r in serper.requests] == [{"q": "Tern Quay dredged", "num": 2}] * 2
    assert all(r["headers"]["X-API-KEY"] == "k-2" for r in serper.requests)
    assert seen["shell"] == seen["fte"] and "https://harbour.example/tern-quay" in seen["fte"]


def test_visit_summary_closes_only_the_reader_it_made(tmp_path: Path, corpus: LocalCorpus) -> None:
    from fte_shell.model import ModelClient
    from fte_shell.profiles import QuestionContext, make_profile

    with ScriptedServer(["unused"]) as srv:
        agent_model = ModelClient(ModelConfig(base_url=srv.base_url, model="agent"))
        own = RunConfig.model_validate({"agent": {"summary_model": {"base_url": srv.base_url, "model": "reader"}}})
        p = make_profile("visit-summary", QuestionContext(own, tmp_path / "a", RunWorld(corpus, corpus), model=agent_model))
        reader = p.reader
        p.close()
        assert reader.closed and not agent_model.closed  # its own reader closed, the agent's client left alone
        shared = make_profile("visit-summary", QuestionContext(RunConfig(), tmp_path / "b", RunWorld(corpus, corpus), model=agent_model))
        shared.close()
        assert not agent_model.closed
        agent_model.close()
        assert agent_model.closed
