"""How the research policies read: question terms, line matching, answer spans, and the tool outputs.

Terms: the distinct content words of the question (no function words, no words naming the kind of answer),
long words matched by their first :data:`PREFIX_CHARS` letters (a crude stemmer).

The answer is a span of the best-matching line (most distinct question terms): a dotted name defined on
that line (``json.dumps: Serialize…``), a year or number when the question asks for one, ``yes`` for
yes/no questions, else the first capitalised phrase that is not part of the question (several words
preferred over one). Lines are split into sentences first (:data:`SENTENCE_END`).

Observations are parsed back from the project's own renderings: search results (``[n] title`` then the
reference), workspace paths, ``grep -H -n`` lines, the structured ``grep``/``find`` output and numbered
``read``/``open`` windows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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
"""Search terms kept at most (the longest ones)."""

SENTENCE_END = re.compile(r"(?<=[a-z0-9)][.!?])\s+(?=[A-Z])")
"""Where a line splits into sentences (the answer is taken from one sentence)."""

_WORD = re.compile(r"[A-Za-z0-9]+")
_WORK_PATH = re.compile(r"(/work/[^\s:]+\.txt)")
_DOTTED_DEF = re.compile(r"^\W*([A-Za-z_]\w*(?:\.\w+)+)\s*[:(]")
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

