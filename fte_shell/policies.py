"""Deterministic research policies: scripted "models" that make REAL tool calls and answer from what
they read. They drive the demo (over the pydoc corpus) and the tests and benchmarks of sweeps (over
HotpotQA); on hard questions they are often wrong — they are deterministic and honest, not clever.

A policy is a callable ``request_json -> ScriptTurn`` for :class:`fte_shell.scripted.ScriptedServer`. It
is stateless: every turn it re-reads the conversation in the request (the question, its own earlier tool
calls — recognised by their ``p-…`` ids — and their observations) and picks the next step. It detects the
profile from the tools offered:

- ``bash`` (shell): ``search "Q"`` -> ``fetch REF`` for the top results -> ``grep -H -i -n -E 'TERMS'
  /work/*.txt`` -> ``sed -n 'A,Bp' FILE`` around the best match -> answer;
- ``fetch``/``grep``/``read`` (fte): the same steps as structured calls (``grep`` over the whole cache);
  the ablation arms: without ``grep`` it reads the top page's beginning, without ``read`` it answers
  from ``grep`` with context; when a whole-cache ``grep`` is refused (fte-single-grep) it greps each
  fetched file by path;
- ``visit`` (visit-snippet, visit-summary): search -> visit(top result, goal=question) -> answer;
- ``open``/``find`` (open-find): search -> open(top result) -> find(TERMS) -> answer;
- only ``search`` (snippet-only): search -> answer from the snippets.

The answer is a span of the best-matching line (most distinct question terms): a dotted name defined on
that line (``json.dumps: Serialize…``), a year or number when the question asks for one, ``yes`` for
yes/no questions, else the first capitalised phrase that is not part of the question (several words
preferred over one). Lines are split into sentences first. A WideSearch table task is answered with a
one-row Markdown table of its required columns, the span in the first column.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any

from .benchmarks.registry import scripted_task
from .scripted import ScriptToolCall, ScriptTurn

_STOPWORD_TEXT = """
    a an the of in on at to for from by with and or nor but that this these those as it its be been
    being is are was were am do does did has have had which what who whom whose when where why how into
    than then also both either neither not no yes there their they them he she his her him i you your we
    our us me my can could would should will shall may might must one ones any some all each every other
    such only own same so too very s t just about over after before between under again further once
    here more most many much few
"""

STOPWORDS = frozenset(_STOPWORD_TEXT.split())
"""Function words never used as search terms."""

FRAME_WORDS = frozenset(("function", "class", "module", "method", "attribute", "called", "named"))
"""Words naming the KIND of answer asked for ("which function…"): they match everywhere, so they are
not search terms."""

PREFIX_CHARS = 5
"""Question words longer than this match by their first ``PREFIX_CHARS`` letters (a crude stemmer:
``serializes`` matches ``Serialize``); shorter ones match as whole words."""

MAX_TERMS = 8
FETCH_TOP = 2
GREP_LIMIT = 60

_WORD = re.compile(r"[A-Za-z0-9]+")
_REF_LINE = re.compile(r"^\[(\d+)\] .*\n {4}(\S+)", re.MULTILINE)
_WORK_PATH = re.compile(r"(/work/[^\s:]+\.txt)")
_DOTTED_DEF = re.compile(r"^\W*([A-Za-z_]\w*(?:\.\w+)+)\s*[:(]")
_SENTENCE_END = re.compile(r"(?<=[a-z0-9)][.!?])\s+(?=[A-Z])")
_YEAR = re.compile(r"\b(1[0-9]{3}|20[0-9]{2})\b")
_NUMBER = re.compile(r"\b\d[\d,.]*\b")
_CAPS = re.compile(r"[A-Z][\w'’\-]*(?:\s+(?:of|the|de|du|la|von|van|and|&)?\s*[A-Z][\w'’\-]*)*")
_YES_NO = re.compile(r"^(are|is|was|were|do|does|did|can|could|has|have|had)\b", re.IGNORECASE)


def question_terms(question: str) -> list[str]:
    """Distinct content words of the question, lower-cased, in order (at most ``MAX_TERMS``, longest
    kept when there are more)."""
    seen: list[str] = []
    for w in _WORD.findall(question.lower()):
        if w in STOPWORDS or w in FRAME_WORDS or len(w) < 2 or w in seen:
            continue
        seen.append(w)
    if len(seen) > MAX_TERMS:
        keep = set(sorted(seen, key=lambda w: (-len(w), seen.index(w)))[:MAX_TERMS])
        seen = [w for w in seen if w in keep]
    return seen


def term_pattern(terms: list[str]) -> str:
    """One regex matching any term (``\\bprefix`` for long words, ``\\bword\\b`` for short ones); valid
    for GNU ``grep -E`` and Python's ``re`` alike."""
    parts = [rf"\b{t[:PREFIX_CHARS]}" if len(t) > PREFIX_CHARS else rf"\b{t}\b" for t in terms]
    return "|".join(parts)


def score(line: str, terms: list[str]) -> int:
    """How many distinct terms ``line`` contains (same matching as :func:`term_pattern`)."""
    low = line.lower()
    n = 0
    for t in terms:
        pat = rf"\b{re.escape(t[:PREFIX_CHARS])}" if len(t) > PREFIX_CHARS else rf"\b{re.escape(t)}\b"
        if re.search(pat, low):
            n += 1
    return n


def _stem(word: str) -> str:
    """Lower-cased ``word`` without a plural or verb ending (``removes`` and ``Remove`` -> ``remov``)."""
    w = word.lower()
    for suffix in ("ing", "es", "ed", "e", "s"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            return w[: -len(suffix)]
    return w


def extract_answer_span(question: str, line: str, fallback: str = "") -> str:
    """A short answer taken from ``line`` (see the module docstring for the rules)."""
    if _YES_NO.match(question.strip()):
        return "yes"
    m = _DOTTED_DEF.match(line)
    if m:
        return m.group(1)
    q = question.lower()
    if re.search(r"\b(when|what year|which year|in what year)\b", q):
        y = _YEAR.search(line)
        if y:
            return y.group(1)
    if re.search(r"\bhow (many|much|long|old)\b", q):
        num = _NUMBER.search(line)
        if num:
            return num.group(0).rstrip(".,")
    qstems = {_stem(w) for w in _WORD.findall(question)}
    fresh = []
    for cand in _CAPS.findall(line):
        words = [w.lower() for w in _WORD.findall(cand)]
        if words and not all(_stem(w) in qstems or w in STOPWORDS for w in words):
            fresh.append(cand.strip())
    multi = [c for c in fresh if " " in c]  # a full name beats a lone capitalised word
    if multi or fresh:
        return (multi or fresh)[0]
    return fallback or " ".join(line.split()[:6])


def grep_terms(terms: list[str], titles: list[str]) -> list[str]:
    """The terms worth grepping for inside documents already chosen: those not in the documents' titles
    (the title's entity is already located; its name would match nearly every line). All terms if that
    leaves none."""
    title_words = {w for t in titles for w in _WORD.findall(t.lower())}
    rest = [t for t in terms if t not in title_words]
    return rest or terms


def best_line(lines: list[str], terms: list[str]) -> tuple[int, str] | None:
    """Index and text of the highest-scoring line, or None if none scores. Ties go to the shorter line
    (the more focused one), then to the earlier one."""
    best: tuple[int, str] | None = None
    key: tuple[int, int] = (0, 0)
    for i, text in enumerate(lines):
        s = score(text, terms)
        if s > 0 and (s, -len(text.strip())) > key:
            best, key = (i, text), (s, -len(text.strip()))
    return best


@dataclass(frozen=True)
class Hit:
    """One matching line found by grep: file (agent path), 1-based line number, text."""

    path: str
    line: int
    text: str


def parse_refs(search_output: str) -> list[str]:
    """The fetchable references (URL or docid) of a :func:`fte_shell.search.format_results` text."""
    return [m.group(2) for m in _REF_LINE.finditer(search_output)]


def parse_paths(output: str) -> list[str]:
    """Workspace paths (``/work/….txt``) mentioned in an observation, first occurrence order."""
    out: list[str] = []
    for p in _WORK_PATH.findall(output):
        if p not in out:
            out.append(p)
    return out


def parse_grep_shell(output: str) -> list[Hit]:
    """Hits of ``grep -H -n`` output (``path:N:text``)."""
    hits = []
    for line in output.splitlines():
        m = re.match(r"^(/work/[^:\s]+):(\d+):(.*)$", line)
        if m:
            hits.append(Hit(m.group(1), int(m.group(2)), m.group(3)))
    return hits


def parse_grep_structured(output: str) -> list[Hit]:
    """Matching lines of the structured ``grep`` (``/work/x.txt:`` headers, ``N: text`` matches,
    ``N- text`` context) or ``find`` (``N: text``) output."""
    hits = []
    path = ""
    for line in output.splitlines():
        h = re.match(r"^(/work/\S+\.txt):\s*$", line)
        if h:
            path = h.group(1)
            continue
        m = re.match(r"^\s*(\d+): ?(.*)$", line)
        if m:
            hits.append(Hit(path, int(m.group(1)), m.group(2)))
    return hits


def numbered_text(output: str) -> list[str]:
    """Line texts of a ``N: text`` numbered window (``read``/``open``); other lines kept as they are."""
    out = []
    for line in output.splitlines():
        m = re.match(r"^\s*(\d+): ?(.*)$", line)
        out.append(m.group(2) if m else line)
    return out


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
            return self._shell(question, obs)
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
    def _shell(self, q: str, obs: dict[str, str]) -> ScriptTurn:
        terms = question_terms(q)
        if "p-search" not in obs:
            return _call("p-search", "bash", {"command": f"search {shlex.quote(q)}"})
        refs = parse_refs(obs["p-search"])[: self.fetch_top]
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
        refs = parse_refs(obs["p-search"])[: self.fetch_top]
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
        refs = parse_refs(obs["p-search"])
        if not refs:
            return _answer("unknown", "The search found nothing.")
        if "p-visit" not in obs:
            return _call("p-visit", "visit", {"url": refs[0], "goal": q})
        return self._answer_from(q, obs["p-visit"].splitlines(), question_terms(q), refs[0])

    def _open_find(self, q: str, obs: dict[str, str]) -> ScriptTurn:
        terms = question_terms(q)
        if "p-search" not in obs:
            return _call("p-search", "search", {"query": q})
        refs = parse_refs(obs["p-search"])
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
        refs = parse_refs(text)
        return self._answer_from(q, segments, question_terms(q), refs[0] if refs else "unknown")

    # --- answering ----------------------------------------------------------------------------------
    def _answer_from(self, q: str, lines: list[str], terms: list[str], fallback: str) -> ScriptTurn:
        lines = [s for line in lines for s in _SENTENCE_END.split(line) if s.strip()]  # one sentence each
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


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> ScriptTurn:
    return ScriptTurn(tool_calls=[ScriptToolCall(id=call_id, name=name, arguments=arguments)])


def _answer(span: str, why: str) -> ScriptTurn:
    return ScriptTurn(content=f"{why}\n<answer>{span}</answer>")
