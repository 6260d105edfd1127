"""The deterministic research policy: a scripted "model" that makes REAL tool calls and answers from what
it read (how it reads: :mod:`fte_shell.standins.reading`).

It is stateless: every turn it re-reads the conversation in the request (the question, its own earlier
tool calls — recognised by their ``p-…`` ids — and their observations) and picks the next step. It detects
the profile from the tools offered:

- ``bash`` (shell): (``rg -l TERMS /corpus`` first when the system prompt says the corpus is in the box
  at /corpus) -> ``search "Q"`` -> ``fetch REF`` for the top results -> ``grep -H -i -n -E 'TERMS'
  /work/*.txt`` -> ``sed -n 'A,Bp' FILE`` around the best match -> answer;
- ``fetch``/``grep``/``read`` (fte): the same steps as structured calls (``grep`` over the whole cache);
  the ablation arms: without ``grep`` it reads the top page's beginning, without ``read`` it answers
  from ``grep`` with context; when a whole-cache ``grep`` is refused (fte-single-grep) it greps each
  fetched file by path;
- ``visit`` (visit-snippet, visit-summary): search -> visit(top result, goal=question) -> answer;
- ``open``/``find`` (open-find): search -> open(top result) -> find(TERMS) -> answer;
- only ``search`` (snippet-only): search -> answer from the snippets;
- ``search`` answering JSON, with or without ``get_document`` (standard): search -> get_document(top docid)
  -> answer citing it (the benchmark's scripted task puts it in its format).

A benchmark's scripted task (e.g. a WideSearch table task) researches its query and shapes the answer
(a one-row Markdown table of its required columns, the span in the first column).
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from ..benchmarks.registry import scripted_task
from ..search.base import result_refs
from .reading import (
    SENTENCE_END,
    best_line,
    extract_answer_span,
    grep_terms,
    numbered_text,
    parse_grep_shell,
    parse_grep_structured,
    parse_paths,
    question_terms,
    term_pattern,
)
from .server import ScriptToolCall, ScriptTurn

FETCH_TOP = 2
"""Search results fetched (the top ones)."""

GREP_LIMIT = 60
"""Lines of the shell ``grep`` kept (``| head -n``)."""


class ResearchPolicy:
    """The deterministic research policy (see the module docstring). ``policy(request_json) -> turn``."""

    def __init__(self, *, fetch_top: int = FETCH_TOP, read_before: int = 2, read_after: int = 6):
        self.fetch_top = fetch_top
        self.read_before = read_before
        self.read_after = read_after

    # --- conversation access ------------------------------------------------------------------------
    @staticmethod
    def _question(messages: list[dict[str, Any]]) -> str:
        for m in messages:
            if m.get("role") == "user":
                return str(m.get("content") or "")
        return ""

    @staticmethod
    def _observations(messages: list[dict[str, Any]]) -> dict[str, str]:
        return {
            str(m.get("tool_call_id")): str(m.get("content") or "")
            for m in messages
            if m.get("role") == "tool"
        }

    def __call__(self, request: dict[str, Any]) -> ScriptTurn:
        task = scripted_task(self._question(request.get("messages") or []))  # e.g. a table task answers with a table
        if task is None:
            return self._step(request)
        messages = [dict(m) for m in request.get("messages") or []]
        next(m for m in messages if m.get("role") == "user")["content"] = task.query  # research the query only
        return task.finish(self._step({**request, "messages": messages}))

    def _step(self, request: dict[str, Any]) -> ScriptTurn:
        messages = request.get("messages") or []
        tools = {t.get("function", {}).get("name") for t in request.get("tools") or []}
        question = self._question(messages)
        obs = self._observations(messages)
        if "bash" in tools:
            corpus = any(m.get("role") == "system" and "/corpus" in str(m.get("content") or "") for m in messages)
            return self._shell(question, obs, corpus)
        if tools == {"search", "get_document"} or (tools == {"search"} and _json_hits(obs.get("p-search")) is not None):
            return self._standard(question, obs, tools)  # the standard profile (its search answers JSON)
        if "fetch" in tools and tools & {"grep", "read"}:  # fte and its ablation arms
            return self._structured(question, obs, tools)
        if "visit" in tools:
            return self._visit(question, obs)
        if {"open", "find"} <= tools:
            return self._open_find(question, obs)
        if "search" in tools:
            return self._snippet_only(question, obs)
        return _answer("unknown", "No tools were offered, so I cannot look anything up.")

    # --- shell --------------------------------------------------------------------------------------
    def _shell(self, q: str, obs: dict[str, str], corpus: bool = False) -> ScriptTurn:
        terms = question_terms(q)
        if corpus and "p-corpus" not in obs:  # told the corpus is in the box: list the files naming the terms
            pattern = term_pattern(terms) or re.escape(q[:40])
            cmd = f"rg -l -i -e {shlex.quote(pattern)} /corpus | head -n {GREP_LIMIT}"
            return _call("p-corpus", "bash", {"command": cmd})
        if "p-search" not in obs:
            return _call("p-search", "bash", {"command": f"search {shlex.quote(q)}"})
        refs = result_refs(obs["p-search"])[: self.fetch_top]
        if not refs:
            return _answer("unknown", "The search found nothing.")
        if "p-fetch-0" not in obs:
            return ScriptTurn(
                content=f"Fetching the top {len(refs)} results.",
                tool_calls=[
                    ScriptToolCall(
                        id=f"p-fetch-{i}", name="bash", arguments={"command": f"fetch {shlex.quote(r)}"}
                    )
                    for i, r in enumerate(refs)
                ],
            )
        paths = [p for i in range(len(refs)) for p in parse_paths(obs.get(f"p-fetch-{i}", ""))]
        if not paths:
            return _answer("unknown", "None of the pages could be fetched.")
        if "p-grep" not in obs:
            pattern = term_pattern(grep_terms(terms, _titles(obs, len(refs)))) or re.escape(q[:40])
            cmd = f"grep -H -i -n -E {shlex.quote(pattern)} /work/*.txt | head -n {GREP_LIMIT}"
            return _call("p-grep", "bash", {"command": cmd})
        hits = [h for h in parse_grep_shell(obs["p-grep"]) if h.line > 3]  # skip the provenance header
        best = best_line([h.text for h in hits], terms)
        if best is None:
            if "p-head" not in obs:
                return _call("p-head", "bash", {"command": f"head -n 20 {shlex.quote(paths[0])}"})
            return self._answer_from(q, obs["p-head"].splitlines()[4:], terms, paths[0])
        hit = hits[best[0]]
        if "p-read" not in obs:
            a, b = max(1, hit.line - self.read_before), hit.line + self.read_after
            return _call("p-read", "bash", {"command": f"sed -n '{a},{b}p' {shlex.quote(hit.path)}"})
        return self._answer_from(q, obs["p-read"].splitlines(), terms, hit.text)

    # --- structured (fte) ---------------------------------------------------------------------------
    def _structured(self, q: str, obs: dict[str, str], tools: set[str]) -> ScriptTurn:
        terms = question_terms(q)
        if "p-search" not in obs:
            return _call("p-search", "search", {"query": q})
        refs = result_refs(obs["p-search"])[: self.fetch_top]
        if not refs:
            return _answer("unknown", "The search found nothing.")
        if "p-fetch-0" not in obs:
            calls = [ScriptToolCall(id=f"p-fetch-{i}", name="fetch", arguments={"url": r}) for i, r in enumerate(refs)]
            return ScriptTurn(content=f"Fetching the top {len(refs)} results.", tool_calls=calls)
        paths = [p for i in range(len(refs)) for p in parse_paths(obs.get(f"p-fetch-{i}", ""))]
        if not paths:
            return _answer("unknown", "None of the pages could be fetched.")
        if "p-list" not in obs:
            return _call("p-list", "list_fetched", {})
        pattern = term_pattern(grep_terms(terms, _titles(obs, len(refs)))) or re.escape(q[:40])
        if "grep" in tools and "p-grep" not in obs:
            context = 0 if "read" in tools else self.read_after  # fte-no-read: context instead of read
            return _call("p-grep", "grep", {"pattern": pattern, "context": context})
        if "grep" in tools and obs["p-grep"].startswith("Error:") and "p-grep-0" not in obs:
            # the whole-cache grep was refused (fte-single-grep): one grep per fetched file
            return ScriptTurn(tool_calls=[ScriptToolCall(id=f"p-grep-{i}", name="grep", arguments={
                "pattern": pattern, "path": p, "context": 0}) for i, p in enumerate(paths)])
        grep_out = "\n".join(obs.get(k, "") for k in ["p-grep", *[f"p-grep-{i}" for i in range(len(paths))]])
        hits = [h for h in parse_grep_structured(grep_out) if h.line > 3 and h.path]
        if "read" not in tools:  # fte-no-read: a second, broader grep (title words too) stands in for read
            if not hits and "p-grep2" not in obs:
                return _call("p-grep2", "grep", {"pattern": term_pattern(terms) or pattern, "context": self.read_after})
            hits += parse_grep_structured(obs.get("p-grep2", ""))
            return self._answer_from(q, [h.text for h in hits if h.line > 3], terms, paths[0])
        best = best_line([h.text for h in hits], terms)
        if best is None:
            if "p-head" not in obs:
                return _call("p-head", "read", {"path": paths[0], "offset": 5, "limit": 16})
            return self._answer_from(q, numbered_text(obs["p-head"]), terms, paths[0])
        hit = hits[best[0]]
        if "p-read" not in obs:
            a, n = max(1, hit.line - self.read_before), self.read_before + self.read_after + 1
            return _call("p-read", "read", {"path": hit.path, "offset": a, "limit": n})
        return self._answer_from(q, numbered_text(obs["p-read"]), terms, hit.text)

    # --- baselines ----------------------------------------------------------------------------------
    def _visit(self, q: str, obs: dict[str, str]) -> ScriptTurn:
        if "p-search" not in obs:
            return _call("p-search", "search", {"query": q})
        refs = result_refs(obs["p-search"])
        if not refs:
            return _answer("unknown", "The search found nothing.")
        if "p-visit" not in obs:
            return _call("p-visit", "visit", {"url": refs[0], "goal": q})
        return self._answer_from(q, obs["p-visit"].splitlines(), question_terms(q), refs[0])

    def _open_find(self, q: str, obs: dict[str, str]) -> ScriptTurn:
        terms = question_terms(q)
        if "p-search" not in obs:
            return _call("p-search", "search", {"query": q})
        refs = result_refs(obs["p-search"])
        if not refs:
            return _answer("unknown", "The search found nothing.")
        if "p-open" not in obs:
            return _call("p-open", "open", {"url": refs[0]})
        if "p-find" not in obs:
            titles = re.findall(r"^\[1\] (.*)$", obs["p-search"], re.MULTILINE) + refs[:1]
            pattern = term_pattern(grep_terms(terms, titles)) or re.escape(q[:40])
            return _call("p-find", "find", {"pattern": pattern})
        hits = [h.text for h in parse_grep_structured(obs["p-find"]) if h.line > 3]
        lines = hits or numbered_text(obs["p-open"])
        return self._answer_from(q, lines, terms, refs[0])

    def _snippet_only(self, q: str, obs: dict[str, str]) -> ScriptTurn:
        if "p-search" not in obs:
            return _call("p-search", "search", {"query": q})
        text = obs["p-search"]
        segments = [
            s
            for line in text.splitlines()[1:]
            for s in re.split(r"(?<=[.!?])\s+|\s+…\s*|^\s*…\s*", line.strip())
            if s
        ]
        refs = result_refs(text)
        return self._answer_from(q, segments, question_terms(q), refs[0] if refs else "unknown")

    def _standard(self, q: str, obs: dict[str, str], tools: set[str]) -> ScriptTurn:
        """BrowseComp-Plus's tools: search -> get_document(top docid) when offered -> answer citing it."""
        if "p-search" not in obs:
            return _call("p-search", "search", {"query": q})
        hits = _json_hits(obs["p-search"]) or []
        docids = [str(h.get("docid")) for h in hits]
        if "get_document" in tools and docids and "p-doc" not in obs:
            return _call("p-doc", "get_document", {"docid": docids[0]})
        try:
            text = str(json.loads(obs["p-doc"]).get("text", "")) if "p-doc" in obs else ""
        except (json.JSONDecodeError, AttributeError):
            text = ""
        lines = text.splitlines() or [str(h.get("snippet", "")) for h in hits]
        turn = self._answer_from(q, [s for s in lines if s.strip()], question_terms(q), "unknown")
        cite = f" [{docids[0]}]" if docids else ""
        return turn.model_copy(update={"content": (turn.content or "").replace("\n<answer>", f"{cite}\n<answer>", 1)})

    # --- answering ----------------------------------------------------------------------------------
    def _answer_from(self, q: str, lines: list[str], terms: list[str], fallback: str) -> ScriptTurn:
        lines = [s for line in lines for s in SENTENCE_END.split(line) if s.strip()]  # one sentence each
        best = best_line(lines, terms)
        line = best[1] if best else (lines[0] if lines else fallback)
        span = extract_answer_span(q, line, fallback)
        return _answer(span, f"The best-matching line I read: {' '.join(line.split())[:200]}")


def _titles(obs: dict[str, str], n: int) -> list[str]:
    """Titles and sources of the fetched documents (from the fetch records: ``path  N chars  new|held
    SOURCE  "TITLE"``)."""
    out = []
    for i in range(n):
        for line in obs.get(f"p-fetch-{i}", "").splitlines():
            m = re.search(r"chars\s+(?:new|held)\s+(\S+)\s+\"(.*)\"", line)
            if m:
                out.extend([m.group(1), m.group(2)])
    return out


def _json_hits(text: str | None) -> list[dict[str, Any]] | None:
    """The standard profile's search observation (a JSON list of hits), else None (another profile's text,
    or an observation a context strategy cleared)."""
    try:
        value = json.loads(text or "")
    except json.JSONDecodeError:
        return None
    return [h for h in value if isinstance(h, dict)] if isinstance(value, list) else None


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> ScriptTurn:
    return ScriptTurn(tool_calls=[ScriptToolCall(id=call_id, name=name, arguments=arguments)])


def _answer(span: str, why: str) -> ScriptTurn:
    return ScriptTurn(content=f"{why}\n<answer>{span}</answer>")
