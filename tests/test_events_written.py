"""Every event a run writes is one of the typed models of ``fte_shell.record.events``: each line of a
scripted run's trajectory (every profile, the scripted research policy over a local corpus; the shell
profile in a real box) validates strictly against its own model — not the lenient reader that falls back
to ``OtherEvent`` — and carries no key its model does not name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import drive
from pydantic import TypeAdapter

from fte_shell.config import RunConfig
from fte_shell.profiles import PROFILES
from fte_shell.record.events import EVENT_TYPES, KnownEvent
from fte_shell.runner import run_question
from fte_shell.search.corpus import CorpusDoc, build_corpus
from fte_shell.standins.research import ResearchPolicy
from fte_shell.standins.server import ScriptedServer

STRICT: TypeAdapter[Any] = TypeAdapter(KnownEvent)


def typed_events(run: Path) -> list[dict[str, Any]]:
    """The trajectory's events, each checked: it validates strictly against the model of its type and
    names only that model's fields."""
    events = []
    for line in (run / "trajectory.jsonl").read_text().splitlines():
        model = STRICT.validate_json(line, strict=True)
        ev = json.loads(line)
        assert type(model) is EVENT_TYPES[ev["type"]]
        assert set(ev) <= set(type(model).model_fields), f"{ev['type']}: keys without a field {set(ev) - set(type(model).model_fields)}"
        events.append(ev)
    return events


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_corpus([CorpusDoc(docid="eiffel", title="Eiffel Tower", text="The Eiffel Tower opened in 1889.\n"
                                   "It is in Paris.", url="https://en.wikipedia.org/wiki/Eiffel_Tower"),
                         CorpusDoc(docid="louvre", title="Louvre", text="The Louvre is a museum in Paris.")],
                        tmp_path_factory.mktemp("corpus") / "idx", name="t", source="t")


def run_profile(tmp_path: Path, corpus: Path, profile: str) -> list[dict[str, Any]]:
    with ScriptedServer(policy=ResearchPolicy()) as srv:
        cfg = RunConfig.model_validate({
            "model": {"base_url": srv.base_url, "model": "policy", "max_retries": 0, "context_window": 100_000},
            "agent": {"profile": profile, "max_turns": 12},
            "search": {"backend": "local", "corpus": str(corpus)}})
        result = run_question("In what year did the Eiffel Tower open?", cfg, tmp_path / "run", qid="q1")
    assert result.stop_reason == "answer", result
    return typed_events(tmp_path / "run")


@pytest.mark.parametrize("profile", [p for p in PROFILES if p != "shell"])
def test_every_event_of_a_profiles_run_has_its_model(tmp_path: Path, corpus: Path, profile: str) -> None:
    events = run_profile(tmp_path, corpus, profile)
    kinds = {e["type"] for e in events}
    assert {"start", "model_call", "tool_call", "end"} <= kinds


@pytest.mark.docker
def test_every_event_of_a_shell_run_has_its_model(docker_ready: None, tmp_path: Path, corpus: Path) -> None:
    events = run_profile(tmp_path, corpus, "shell")
    bash = [e for e in events if e["type"] == "tool_call"]
    assert bash and all("fetches" in e["meta"] and "searches" in e["meta"] for e in bash)


def test_every_event_kind_the_loop_writes_has_its_model(tmp_path: Path) -> None:
    """Retries, warnings, text tool calls, nudges, a final-answer request and errors: a scripted run
    that makes the loop write each of them."""
    from test_agent import NotesProfile

    from fte_shell.config import ModelConfig
    from fte_shell.record.rundir import RunWriter
    from fte_shell.standins.server import ScriptTurn

    script = [
        ScriptTurn(status=503),  # retried
        ScriptTurn(content='<tool_call>{"name": "show", "arguments": {}}</tool_call>'),  # a text tool call
        "no tool, no answer",  # nudged
        ScriptTurn(tool_calls=[{"name": "note", "arguments": {"text": "x" * 40_000}}]),
        ScriptTurn(status=400, error="context_length_exceeded"),  # overflow -> final answer request
        "<answer>x</answer>",
    ]
    with ScriptedServer(script) as srv:
        cfg = RunConfig(model=ModelConfig(base_url=srv.base_url, model="scripted", backoff_s=0.01, max_retries=2,
                                          server="ollama", parse_text_tool_calls=False))
        cfg.agent.on_context_overflow = "final_answer"
        with RunWriter(tmp_path / "run") as rec:
            result = drive(cfg, NotesProfile(), rec, "q")
    assert result.stop_reason == "answer", result
    kinds = [e["type"] for e in typed_events(tmp_path / "run")]
    assert {"start", "warning", "retry", "text_tool_call", "nudge", "tool_call", "error", "final_answer_request", "model_call",
            "end"} <= set(kinds), kinds
