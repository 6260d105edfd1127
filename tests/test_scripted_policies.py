"""The deterministic research policies: their parsing, term matching, answer spans, and the steps they
take for each profile (observations rendered by the project's real formatters)."""

from __future__ import annotations

import json
import re
from typing import Any

from fte_shell.search import SearchResult, format_results
from fte_shell.search.base import result_refs
from fte_shell.standins.reading import (
    best_line,
    extract_answer_span,
    grep_terms,
    parse_grep_shell,
    parse_grep_structured,
    question_terms,
    score,
    term_pattern,
)
from fte_shell.standins.research import ResearchPolicy
from fte_shell.standins.server import ScriptTurn

Q = "Which function in the json module serializes an object to a JSON formatted str?"
SEARCH_OUT = format_results(
    Q,
    [
        SearchResult(1, "json (module)", "json", "json.dumps: Serialize obj to a JSON formatted str."),
        SearchResult(2, "json.JSONDecoder (class)", "json.JSONDecoder", "Simple JSON decoder."),
        SearchResult(3, "json.load (function)", "https://example.org/a_(b)", "Deserialize fp."),
    ],
)


def tools(*names: str) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in names]


class Convo:
    """Builds the request the policy sees, feeding back observations for its calls."""

    def __init__(self, *tool_names: str):
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": "s"}, {"role": "user", "content": Q}]
        self.tools = tools(*tool_names)

    def step(self, policy: ResearchPolicy, observations: dict[str, str] | None = None) -> ScriptTurn:
        turn = policy({"messages": self.messages, "tools": self.tools})
        calls = [
            {"id": tc.id, "type": "function", "function": {"name": tc.name, "arguments": json.dumps(tc.arguments)}}
            for tc in turn.tool_calls
        ]
        self.messages.append({"role": "assistant", "content": turn.content, **({"tool_calls": calls} if calls else {})})
        for tc in turn.tool_calls:
            out = (observations or {}).get(tc.id or "", "")
            self.messages.append({"role": "tool", "tool_call_id": tc.id, "content": out})
        return turn


def test_terms_pattern_and_score() -> None:
    terms = question_terms(Q)
    assert terms == ["json", "serializes", "object", "formatted", "str"]  # frame and stop words dropped
    pat = term_pattern(terms)
    assert pat == r"\bjson\b|\bseria|\bobjec|\bforma|\bstr\b"
    assert re.search(pat, "SERIALIZE it", re.IGNORECASE) and not re.search(pat, "a stream", re.IGNORECASE)
    assert score("json.dumps: Serialize obj to a JSON formatted str.", terms) == 4
    assert grep_terms(terms, ["json", "json (module)"]) == ["serializes", "object", "formatted", "str"]
    assert grep_terms(["json"], ["json"]) == ["json"]


def test_best_line_prefers_more_terms_then_the_shorter_line() -> None:
    terms = ["alpha", "beta"]
    lines = ["nothing", "alpha and a long tail of words and beta", "beta alpha", "alpha"]
    assert best_line(lines, terms) == (2, "beta alpha")
    assert best_line(["none here"], terms) is None


def test_answer_spans() -> None:
    assert extract_answer_span(Q, "  json.dumps: Serialize obj to a JSON formatted str.") == "json.dumps"
    assert extract_answer_span(Q, "json.dumps(obj, *, skipkeys=False) (function)") == "json.dumps"
    assert extract_answer_span("When was the bridge opened?", "The bridge opened in May 1932 to traffic.") == "1932"
    assert extract_answer_span("How many ships were named Scipio?", "Three ships were named so.") == "Three"  # no digits
    assert extract_answer_span("How many moons?", "It has 14 known moons.") == "14"
    assert extract_answer_span("Are both cats?", "anything") == "yes"
    q = "Which class is a dict subclass for counting hashable objects?"
    assert extract_answer_span(q, "* Counter dict subclass for counting hashable objects") == "Counter"
    assert extract_answer_span("Who wrote the novel?", "It was written by Jane Austen in England.") == "Jane Austen"
    assert extract_answer_span("Who?", "no capitals here at all", "fallback") == "fallback"


def test_parsers_read_the_real_formats() -> None:
    assert result_refs(SEARCH_OUT) == ["json", "json.JSONDecoder", "https://example.org/a_(b)"]
    shell = "/work/a-1.txt:7:json.dumps: x\n/work/b-2.txt:12:y: z\n[exit status 0]"
    assert [(h.path, h.line, h.text) for h in parse_grep_shell(shell)] == [
        ("/work/a-1.txt", 7, "json.dumps: x"),
        ("/work/b-2.txt", 12, "y: z"),
    ]
    structured = "/work/a-1.txt:\n6- context\n7: match one\n--\n/work/b-2.txt:\n3: match two"
    assert [(h.path, h.line, h.text) for h in parse_grep_structured(structured)] == [
        ("/work/a-1.txt", 7, "match one"),
        ("/work/b-2.txt", 3, "match two"),
    ]


def test_shell_steps() -> None:
    p, c = ResearchPolicy(), Convo("bash")
    t = c.step(p, {"p-search": SEARCH_OUT})
    assert t.tool_calls[0].arguments == {"command": "search 'Which function in the json module serializes an object to a JSON formatted str?'"}
    records = {
        "p-fetch-0": '/work/json-02bd.txt  3,531 chars  new  json  "json (module)"',
        "p-fetch-1": '/work/json-JSONDecoder-b32d.txt  1,417 chars  new  json.JSONDecoder  "json.JSONDecoder (class)"',
    }
    t = c.step(p, records)
    assert [tc.arguments for tc in t.tool_calls] == [{"command": "fetch json"}, {"command": "fetch json.JSONDecoder"}]
    grep_out = (
        "/work/json-02bd.txt:2:Title: json (module) serializes\n"
        "/work/json-02bd.txt:15:  json.dump: Serialize obj as a JSON formatted stream to fp (a file-like object).\n"
        "/work/json-02bd.txt:16:  json.dumps: Serialize obj to a JSON formatted str.\n"
    )
    t = c.step(p, {"p-grep": grep_out})
    assert t.tool_calls[0].arguments == {
        "command": r"grep -H -i -n -E '\bseria|\bobjec|\bforma|\bstr\b' /work/*.txt | head -n 60"
    }
    t = c.step(p, {"p-read": "  json.dump: Serialize obj as a JSON formatted stream.\n  json.dumps: Serialize obj to a JSON formatted str."})
    # lines 15 and 16 both hold 4 terms: the shorter line 16 wins, read from 2 lines before
    assert t.tool_calls[0].arguments == {"command": "sed -n '14,22p' /work/json-02bd.txt"}
    t = c.step(p)
    assert not t.tool_calls and t.content is not None and t.content.endswith("<answer>json.dumps</answer>")


def test_structured_steps_and_no_results() -> None:
    p, c = ResearchPolicy(), Convo("search", "fetch", "grep", "read", "list_fetched")
    names = []
    obs = {
        "p-search": SEARCH_OUT,
        "p-fetch-0": '/work/json-02bd.txt  3,531 chars  new  json  "json (module)"',
        "p-fetch-1": "Error: refused",
        "p-list": "/work/json-02bd.txt  3,531 chars  json  \"json (module)\"\n1 document, 3,531 chars",
        "p-grep": "/work/json-02bd.txt:\n16:   json.dumps: Serialize obj to a JSON formatted str.",
        "p-read": "14: x\n15: y\n16:   json.dumps: Serialize obj to a JSON formatted str.\n(Showing lines 14-16 of 16. End of file.)",
    }
    while True:
        t = c.step(p, obs)
        if not t.tool_calls:
            break
        names.append([(tc.name, tc.arguments) for tc in t.tool_calls])
    assert names[0] == [("search", {"query": Q})]
    assert names[1] == [("fetch", {"url": "json"}), ("fetch", {"url": "json.JSONDecoder"})]
    assert names[2] == [("list_fetched", {})]
    assert names[3] == [("grep", {"pattern": r"\bseria|\bobjec|\bforma|\bstr\b", "context": 0})]
    assert names[4] == [("read", {"path": "/work/json-02bd.txt", "offset": 14, "limit": 9})]
    assert "<answer>json.dumps</answer>" in (t.content or "")

    empty = Convo("search", "fetch", "grep", "read", "list_fetched")
    empty.step(p, {"p-search": 'No results for "x".'})
    assert "<answer>unknown</answer>" in (empty.step(p).content or "")


def test_baseline_steps() -> None:
    p = ResearchPolicy()
    c = Convo("search")
    c.step(p, {"p-search": SEARCH_OUT})
    assert "<answer>json.dumps</answer>" in (c.step(p).content or "")

    c = Convo("search", "visit")
    c.step(p, {"p-search": SEARCH_OUT})
    t = c.step(p, {"p-visit": "json.dumps: Serialize obj to a JSON formatted str."})
    assert t.tool_calls[0].name == "visit" and t.tool_calls[0].arguments == {"url": "json", "goal": Q}
    assert "<answer>json.dumps</answer>" in (c.step(p).content or "")

    c = Convo("search", "open", "find")
    c.step(p, {"p-search": SEARCH_OUT})
    assert c.step(p, {"p-open": "1: Docid: json\n5: json (module)"}).tool_calls[0].arguments == {"url": "json"}
    t = c.step(p, {"p-find": "16:   json.dumps: Serialize obj to a JSON formatted str."})
    assert t.tool_calls[0].name == "find"
    assert "<answer>json.dumps</answer>" in (c.step(p).content or "")
