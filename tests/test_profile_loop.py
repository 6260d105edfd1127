"""Each non-shell profile driven end to end by the real loop (``run_question``) and the scripted
OpenAI-compatible server: the tools the model is offered are the profile's schemas, and scripted tool
calls produce exactly the expected observations in the trajectory. (The shell profile's end-to-end run is
covered with the sandbox in test_profile_shell.py and D1's runner tests.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import trajectory

from fte_shell.config import RunConfig
from fte_shell.profiles import QuestionContext, make_profile
from fte_shell.runner import run_question
from fte_shell.search import LocalCorpus, format_results
from fte_shell.search.corpus import CorpusDoc, build_corpus
from fte_shell.standins.server import ScriptedServer
from fte_shell.workspace import filename_for
from fte_shell.world import RunWorld, World

GARDEN = "\n".join(
    [
        "The Saltmarsh garden was laid out in 1902 by Ines Varga.",
        "Its glasshouse holds a collection of 340 ferns.",
        "The garden closes every January for repairs.",
    ]
)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> LocalCorpus:
    docs = [
        CorpusDoc(docid="saltmarsh-garden", title="Saltmarsh garden", text=GARDEN),
        CorpusDoc(docid="fern-care", title="Fern care", text="Ferns like shade and damp soil."),
    ]
    c = LocalCorpus(build_corpus(docs, tmp_path_factory.mktemp("corpus") / "idx", name="garden"))
    yield c
    c.close()


def tc(name: str, **args: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": args}]}


def run(tmp_path: Path, corpus: LocalCorpus, profile: str, script: list[Any]) -> tuple[list[dict], ScriptedServer]:
    with ScriptedServer(script) as srv:
        cfg = RunConfig.model_validate(
            {"model": {"base_url": srv.base_url, "model": "scripted", "max_retries": 0},
             "agent": {"profile": profile, "current_date": "2026-11-30"}}
        )
        result = run_question("Who laid out the Saltmarsh garden?", cfg, tmp_path / "run", world=World(corpus, corpus),
                              qid="q1")
    assert result.stop_reason == "answer"
    return trajectory(tmp_path / "run"), srv


def observations(events: list[dict]) -> list[str]:
    return [e["observation"] for e in events if e["type"] == "tool_call"]


def expected_tools(tmp_path: Path, corpus: LocalCorpus, profile: str, model: Any = None) -> list[dict]:
    p = make_profile(profile, QuestionContext(RunConfig(), tmp_path / "other", RunWorld(corpus, corpus), model=model))
    try:
        return p.tools()
    finally:
        p.close()


def test_fte_profile_through_the_loop(tmp_path: Path, corpus: LocalCorpus) -> None:
    name = filename_for("saltmarsh-garden", "docid")
    path = f"/work/{name}"
    script = [
        tc("search", query="Saltmarsh garden"),
        tc("fetch", url="saltmarsh-garden"),
        tc("grep", pattern="laid out", context=0),
        tc("read", path=path, offset=5, limit=2),
        "<answer>Ines Varga</answer>",
    ]
    events, srv = run(tmp_path, corpus, "fte", script)
    assert srv.requests[0]["tools"] == expected_tools(tmp_path, corpus, "fte")
    assert events[0]["tools"] == srv.requests[0]["tools"]
    assert observations(events) == [
        format_results("Saltmarsh garden", corpus.search("Saltmarsh garden", 10)),
        f'{path}  {len(GARDEN) + 1} chars  new  saltmarsh-garden  "Saltmarsh garden"',
        f"{path}:\n5: The Saltmarsh garden was laid out in 1902 by Ines Varga.\n\n(1 matching line in 1 file.)",
        (
            "5: The Saltmarsh garden was laid out in 1902 by Ines Varga.\n"
            "6: Its glasshouse holds a collection of 340 ferns.\n"
            "(Showing lines 5-6 of 7. Use offset=7 to continue.)"
        ),
    ]
    assert (tmp_path / "run" / "workspace" / name).is_file()
    fetch_event = [e for e in events if e["type"] == "tool_call"][1]
    facts = fetch_event["meta"].pop("fetches")
    assert fetch_event["meta"] == {"path": path, "chars": len(GARDEN) + 1, "new": True, "source": "saltmarsh-garden"}
    assert [(f["path"], f["chars"], f["new"], f["source"]) for f in facts] == [(path, len(GARDEN) + 1, True, "saltmarsh-garden")]
    assert "Current date: 2026-11-30" in srv.requests[0]["messages"][0]["content"]


def test_open_find_profile_through_the_loop(tmp_path: Path, corpus: LocalCorpus) -> None:
    script = [
        tc("open", url="saltmarsh-garden", line=5),
        tc("find", pattern="ferns?"),
        tc("open", url="fern-care"),
        tc("find", pattern="glasshouse"),
        "<answer>Ines Varga</answer>",
    ]
    events, _ = run(tmp_path, corpus, "open-find", script)
    obs = observations(events)
    assert obs[0] == (
        'Open page: saltmarsh-garden  "Saltmarsh garden"\n'
        "5: The Saltmarsh garden was laid out in 1902 by Ines Varga.\n"
        "6: Its glasshouse holds a collection of 340 ferns.\n"
        "7: The garden closes every January for repairs.\n"
        "(Showing lines 5-7 of 7. End of page.)"
    )
    assert obs[1] == "6: Its glasshouse holds a collection of 340 ferns.\n(1 matching line. Scroll with line=N to read around one.)"
    assert obs[2].startswith('Open page: fern-care  "Fern care"\n1: Docid: fern-care\n')
    assert obs[3] == "No matches for 'glasshouse' in the open page (fern-care)."
    assert list((tmp_path / "run" / "workspace").iterdir()) == []


def test_visit_summary_uses_the_agents_endpoint_by_default(tmp_path: Path, corpus: LocalCorpus) -> None:
    script = [
        tc("visit", url="saltmarsh-garden", goal="who laid out the garden"),
        "The page says Ines Varga laid out the garden in 1902.",  # the reader's turn, same endpoint
        "<answer>Ines Varga</answer>",
    ]
    events, srv = run(tmp_path, corpus, "visit-summary", script)
    assert observations(events) == [
        (
            "Docid: saltmarsh-garden\nTitle: Saltmarsh garden\n"
            "Evidence for the goal (summary by the reader model):\n"
            "The page says Ines Varga laid out the garden in 1902."
        )
    ]
    reader_request = srv.requests[1]
    assert reader_request["messages"][1]["content"].startswith("Goal: who laid out the garden\n\nPage:\nDocid: saltmarsh-garden\n")
    assert "tools" not in reader_request
    assert [t["function"]["name"] for t in srv.requests[0]["tools"]] == ["search", "visit"]


def test_snippet_only_and_visit_snippet_through_the_loop(tmp_path: Path, corpus: LocalCorpus) -> None:
    events, _ = run(tmp_path / "a", corpus, "snippet-only", [tc("search", query="ferns", n=1), "<answer>x</answer>"])
    assert observations(events) == [format_results("ferns", corpus.search("ferns", 1))]
    events, _ = run(tmp_path / "b", corpus, "visit-snippet",
                    [tc("visit", url="saltmarsh-garden", goal="ferns glasshouse"), "<answer>x</answer>"])
    assert observations(events) == [
        "Docid: saltmarsh-garden\nTitle: Saltmarsh garden\n"
        f"Passage 1 of 1 (characters 1-{len(GARDEN) + 1} of {len(GARDEN) + 1}), best match for the goal:\n\n" + GARDEN
    ]


def test_bad_calls_through_the_loop_are_correctable(tmp_path: Path, corpus: LocalCorpus) -> None:
    script = [
        tc("grep", pattern="[unclosed"),
        tc("read", path="/work/../../etc/passwd"),
        tc("read", path="/work/x.txt", offset="first"),
        "<answer>none</answer>",
    ]
    events, _ = run(tmp_path, corpus, "fte", script)
    calls = [e for e in events if e["type"] == "tool_call"]
    assert all(c["error"] for c in calls)
    assert calls[0]["observation"].startswith("Error: invalid regular expression '[unclosed': ")
    assert calls[1]["observation"] == "Error: not a workspace file: '/work/../../etc/passwd' (expected /work/<name>.txt)"
    assert calls[2]["observation"].startswith("Error: invalid arguments for read: 'offset': Input should be a valid integer")

