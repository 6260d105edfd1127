"""BrowseComp-Plus's templates read from a clone's prompts.py (parsed, never run), the own-wording fallback,
and the answer format's parser (hand-written replies)."""

from __future__ import annotations

from pathlib import Path

import pytest
from bcplus_fixture import make_bcplus_clone

from fte_shell.benchmarks.browsecomp_plus.templates import (
    GRADER,
    find_prompts_file,
    load_templates,
    parse_answer,
    parse_confidence,
)
from fte_shell.errors import ConfigError


def test_templates_from_the_clone(tmp_path: Path) -> None:
    fx = make_bcplus_clone(tmp_path / "bc", n_docs=30, n_queries=2)
    path = find_prompts_file(fx.root)
    assert path == fx.root / "search_agent" / "prompts.py"
    t = load_templates(path)  # the file starts with an import that fails: it was parsed, not imported
    assert t.official and t.source == str(path)
    msg = t.pose("Which river?", get_document=True)
    assert msg.startswith("[fixture wording] Answer the question below with the search and get_document tools")
    assert "Question: Which river?" in msg and "Exact Answer: {the short final answer}" in msg  # {{ }} unescaped
    assert "with the search tool;" in t.pose("Q", get_document=False)
    assert "Reply in exactly this shape" in t.pose("Q", get_document=False, citations=False)
    assert "[correct_answer]: Quorn" in t.grader_prompt("q", "resp", "Quorn") and "[response]: resp" in t.grader_prompt(
        "q", "resp", "Quorn")
    assert find_prompts_file(tmp_path) is None and find_prompts_file(None) is None


def test_own_wording_and_bad_files(tmp_path: Path) -> None:
    own = load_templates(None)
    assert not own.official and own.source == "fte-shell"
    for get_document in (True, False):
        msg = own.pose("Which river?", get_document=get_document)
        assert "Question: Which river?" in msg and "Exact Answer: {" in msg and "Confidence: {" in msg
    assert ("get_document" in own.pose("Q", get_document=True)) and "get_document" not in own.pose("Q", get_document=False)
    assert "[response]: R" in own.grader_prompt("Q", "R", "A")
    with pytest.raises(ConfigError, match="cannot read the BrowseComp-Plus prompts file"):
        load_templates(tmp_path / "nope.py")
    bad = tmp_path / "p.py"
    bad.write_text("QUERY_TEMPLATE = 'x {Question}'\n")
    with pytest.raises(ConfigError, match=f"p.py: no string QUERY_TEMPLATE_NO_GET_DOCUMENT, .*{GRADER}"):
        load_templates(bad)
    bad.write_text("def (:\n")
    with pytest.raises(ConfigError, match=r"p.py:1: not valid Python"):
        load_templates(bad)
    names = ("QUERY_TEMPLATE", "QUERY_TEMPLATE_NO_GET_DOCUMENT", "QUERY_TEMPLATE_NO_GET_DOCUMENT_NO_CITATION")
    bad.write_text("".join(f"{n} = 'Q: {{Questoin}}'\n" for n in names) + "GRADER_TEMPLATE = '{question}'\n")
    with pytest.raises(ConfigError, match=r"QUERY_TEMPLATE has a placeholder other than \{Question\}"):
        load_templates(bad).pose("q", get_document=True)


def test_parse_answer() -> None:
    reply = ("I searched.\n\n**Explanation:** The river runs through the town [10000]. Founded by them [10007].\n"
             "**Exact Answer:** Belmir\n**Confidence:** 85%\n")
    a = parse_answer(reply)
    assert a is not None and a.exact_answer == "Belmir" and a.confidence == 85.0 and a.confidence_text == "85%"
    assert a.explanation == "The river runs through the town [10000]. Founded by them [10007]."
    assert a.response == reply.strip()
    b = parse_answer("Exact Answer: first\nExact Answer: Second one\nConfidence: very sure")
    assert b is not None and b.exact_answer == "Second one" and b.confidence is None and b.explanation is None
    assert parse_answer("Exact Answer:   \nConfidence: 50%") is None  # empty: not an answer
    assert parse_answer("<answer>Belmir</answer>") is None and parse_answer(None) is None
    assert [parse_confidence(s) for s in ("85", "85 %", "0.85", "100%", "120%", "high", "-5%", "7.5%.")] == [
        85.0, 85.0, 85.0, 100.0, None, None, None, 7.5]
