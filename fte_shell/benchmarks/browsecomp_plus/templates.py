"""BrowseComp-Plus's prompt and answer format: the query templates and the grader template, read at run time
from the benchmark's own ``search_agent/prompts.py`` (the user's clone of texttron/BrowseComp-Plus; the
file is parsed with :mod:`ast`, never executed), and the parser of the answer format they ask for::

    Explanation: ... [docid] citations ...
    Exact Answer: ...
    Confidence: NN%

fte-shell carries no copy of the benchmark's wording (its repository has no licence). Without the file,
:func:`load_templates` returns fte-shell's own wording of the same format, marked ``official=False``: a run
with it is not in the leaderboard's format, and says so (``result.json`` ``answer_format.official``).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import ConfigError

PROMPTS_FILE = "search_agent/prompts.py"
"""Where the templates live in a clone of the benchmark (the dataset directory ``DIR`` of
``browsecomp-plus:DIR`` when it is that clone)."""

QUERY = "QUERY_TEMPLATE"
QUERY_NO_GET_DOCUMENT = "QUERY_TEMPLATE_NO_GET_DOCUMENT"
QUERY_NO_CITATION = "QUERY_TEMPLATE_NO_GET_DOCUMENT_NO_CITATION"
GRADER = "GRADER_TEMPLATE"
NAMES = (QUERY, QUERY_NO_GET_DOCUMENT, QUERY_NO_CITATION, GRADER)
"""The variables of ``prompts.py`` fte-shell reads (the benchmark's names)."""

def _format(cite: str) -> str:
    return ("Your reply must end in this form:\n"
            "Explanation: {{the reasoning behind your answer" + cite + "}}\n"
            "Exact Answer: {{the answer alone, as short as possible}}\n"
            "Confidence: {{a percentage from 0% to 100%: how likely your answer is right}}")


_CITE = (", citing each document you rely on by its docid in square brackets at the end of the sentence "
         "that uses it, e.g. [1234]")


def _own_query(tools: str) -> str:
    return (f"Research the question below with the {tools} you have, as many times as you need, thinking between "
            "calls, then answer.\n\nQuestion: {Question}\n\n")


OWN_WORDING = {
    QUERY: _own_query("search and get_document tools") + _format(_CITE),
    QUERY_NO_GET_DOCUMENT: _own_query("search tool") + _format(_CITE),
    QUERY_NO_CITATION: _own_query("search tool") + _format(""),
    GRADER: ("Grade a response to a question against the known correct answer.\n\n[question]: {question}\n\n"
             "[response]: {response}\n\n[correct_answer]: {correct_answer}\n\n"
             "Reply with four lines:\n"
             "extracted_final_answer: the response's final exact answer, or None if it gives none\n"
             "reasoning: whether that answer means the same as [correct_answer] (small numeric differences are "
             "fine); do not solve the question yourself\n"
             "correct: yes or no\n"
             "confidence: the response's confidence as a number from 0 to 100 (100 if it states none)"),
}
"""fte-shell's own wording of the same format and placeholders (``{Question}``; the grader's ``{question}``,
``{response}``, ``{correct_answer}``), used when the benchmark's file is not there."""


@dataclass(frozen=True)
class Templates:
    """The query and grader templates of a run, and where they came from."""

    texts: dict[str, str]
    """Template name (:data:`NAMES`) -> text with the benchmark's placeholders."""

    source: str
    """The ``prompts.py`` they were read from, or ``fte-shell`` for the own wording."""

    official: bool
    """True when read from the benchmark's file (the leaderboard's format)."""

    def query_name(self, get_document: bool, citations: bool = True) -> str:
        """The template the benchmark uses for a tool set: with ``get_document``, without it, or without
        it and without citations (the benchmark has no get_document variant without citations)."""
        if get_document:
            return QUERY
        return QUERY_NO_GET_DOCUMENT if citations else QUERY_NO_CITATION

    def pose(self, question: str, *, get_document: bool, citations: bool = True) -> str:
        """The user message of a question: the query template filled with it."""
        name = self.query_name(get_document, citations)
        return _fill(self.texts[name], name, self.source, Question=question)

    def grader_prompt(self, question: str, response: str, correct_answer: str) -> str:
        """The judge's prompt for one response (the grader template filled in)."""
        return _fill(self.texts[GRADER], GRADER, self.source, question=question, response=response,
                     correct_answer=correct_answer)


def _fill(template: str, name: str, source: str, **values: str) -> str:
    try:
        return template.format(**values)
    except (KeyError, IndexError, ValueError) as e:
        raise ConfigError(f"{source}: {name} has a placeholder other than {', '.join('{' + k + '}' for k in values)} "
                          f"({e.__class__.__name__}: {e}); use the benchmark's own prompts.py") from None


def _string_value(node: ast.expr) -> str | None:
    """The value of a string literal, or of ``"...".strip()`` (how the benchmark writes its templates)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if (isinstance(node, ast.Call) and not node.args and not node.keywords and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("strip", "rstrip", "lstrip") and isinstance(node.func.value, ast.Constant)
            and isinstance(node.func.value.value, str)):
        return getattr(node.func.value.value, node.func.attr)()
    return None


def read_prompts_file(path: Path) -> dict[str, str]:
    """The string constants of :data:`NAMES` assigned at the top level of ``path`` (parsed, not run).
    Raises :class:`ConfigError` naming the file when it cannot be read or parsed, or lacks one of them."""
    try:
        source = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the BrowseComp-Plus prompts file ({e.strerror or e}); "
                          "point agent.standard.prompts_file at the clone's search_agent/prompts.py") from None
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as e:
        raise ConfigError(f"{path}:{e.lineno}: not valid Python ({e.msg}); is it the benchmark's prompts.py?") from None
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name in NAMES and (value := _string_value(node.value)) is not None:
                found[name] = value
    missing = [n for n in NAMES if n not in found]
    if missing:
        raise ConfigError(f"{path}: no string {', '.join(missing)} at the top level (the benchmark's "
                          "search_agent/prompts.py defines them); use a current clone of texttron/BrowseComp-Plus")
    return found


def find_prompts_file(dataset_dir: Path | None) -> Path | None:
    """The clone's ``search_agent/prompts.py`` when ``dataset_dir`` is a clone of the benchmark, else None."""
    if dataset_dir is None:
        return None
    path = Path(dataset_dir) / PROMPTS_FILE
    return path if path.is_file() else None


def load_templates(prompts_file: Path | None) -> Templates:
    """The templates of ``prompts_file`` (the benchmark's, ``official``), or fte-shell's own wording when
    None. A named file that is missing or malformed is an error, never a silent fallback."""
    if prompts_file is None:
        return Templates(texts=dict(OWN_WORDING), source="fte-shell", official=False)
    path = Path(prompts_file).expanduser()
    return Templates(texts=read_prompts_file(path), source=str(path), official=True)


# --- the answer format ----------------------------------------------------------------------------------
_LABEL = r"^[ \t>#*_]*{label}[ \t*_]*:[ \t*_]*"
_EXACT_RE = re.compile(_LABEL.format(label="exact[ \t]+answer") + r"(.*?)[ \t*_]*$", re.IGNORECASE | re.MULTILINE)
_CONF_RE = re.compile(_LABEL.format(label="confidence") + r"(.*?)[ \t*_]*$", re.IGNORECASE | re.MULTILINE)
_EXPL_RE = re.compile(_LABEL.format(label="explanation") + r"(.*?)(?=" + _LABEL.format(label="exact[ \t]+answer") + ")",
                      re.IGNORECASE | re.MULTILINE | re.DOTALL)
_PERCENT_RE = re.compile(r"^(\d+(?:\.\d+)?)\s*%?$")
_UNIT_RE = re.compile(r"^(0?\.\d+|1(?:\.0+)?|0)$")


@dataclass(frozen=True)
class FormattedAnswer:
    """A final reply parsed from the benchmark's answer format."""

    response: str
    """The whole reply (what the grader template's ``{response}`` receives)."""

    exact_answer: str
    """The text after the last ``Exact Answer:`` label (markdown emphasis stripped)."""

    confidence: float | None
    """The ``Confidence:`` value in percent (0–100), or None when it is missing or not a number."""

    confidence_text: str | None
    """The ``Confidence:`` line's text as written (None when there is no such line)."""

    explanation: str | None
    """The text between ``Explanation:`` and ``Exact Answer:`` (None when there is no such label)."""


def parse_confidence(text: str) -> float | None:
    """``85%``/``85``/``85.5 %`` -> percent; a bare fraction ``0.85`` -> 85.0; else None (unparsable or out of
    0–100: a confidence that is not one is left out, never guessed)."""
    t = text.strip().rstrip(".")
    if (m := _PERCENT_RE.match(t)) is not None:
        value = float(m.group(1))
        if "%" not in t and _UNIT_RE.match(t) and value <= 1 and "." in t:
            value *= 100
        return value if 0 <= value <= 100 else None
    return None


def parse_answer(text: str | None) -> FormattedAnswer | None:
    """The reply in the benchmark's format, or None when it has no non-empty ``Exact Answer:`` line (then it
    is not a final answer: the run goes on, or ends unanswered)."""
    if not text:
        return None
    exact = [m.group(1).strip() for m in _EXACT_RE.finditer(text)]
    if not exact or not exact[-1]:
        return None
    conf = [m.group(1).strip() for m in _CONF_RE.finditer(text)]
    expl = [m.group(1).strip() for m in _EXPL_RE.finditer(text)]
    return FormattedAnswer(response=text.strip(), exact_answer=exact[-1],
                           confidence=parse_confidence(conf[-1]) if conf else None,
                           confidence_text=conf[-1] if conf else None, explanation=expl[-1] if expl else None)


# --- the answer-format plugin of the ``standard`` profile -----------------------------------------------
_ASK = ("give your final answer in the requested form: an 'Explanation:' line, an 'Exact Answer:' line and a "
        "'Confidence:' line")


class BrowseCompPlusFormat:
    """The benchmark's format as an :class:`~fte_shell.profiles.answer_format.AnswerFormat`: the query
    template of the profile's tool set, :func:`parse_answer`, and no system prompt (as the benchmark's
    clients run without one unless given)."""

    system_prompt = ""
    nudge = f"Your reply had no tool call and no final answer. Either call a tool to keep researching, or {_ASK}."
    final_request = ("The conversation has reached the model's context window: no more tool calls are possible. "
                     f"Based on what you have found, {_ASK}.")

    def __init__(self, templates: Templates, *, get_document: bool, citations: bool):
        self.templates, self.get_document, self.citations = templates, get_document, citations

    def pose(self, question: str) -> str:
        return self.templates.pose(question, get_document=self.get_document, citations=self.citations)

    def parse(self, text: str) -> Any:
        from ...profiles.answer_format import FinalAnswer

        a = parse_answer(text)
        if a is None:
            return None
        return FinalAnswer(answer=a.exact_answer, detail={
            "response": a.response, "exact_answer": a.exact_answer, "confidence": a.confidence,
            "confidence_text": a.confidence_text, "explanation": a.explanation})

    def record(self) -> dict[str, Any]:
        return {"name": "bcplus", "official": self.templates.official, "templates": self.templates.source,
                "query_template": self.templates.query_name(self.get_document, self.citations)}


def answer_format(options: Any) -> BrowseCompPlusFormat:
    """The ``bcplus`` answer format (BrowseComp-Plus's) of a ``standard`` profile's options
    (:class:`~fte_shell.config.standard.StandardOptions`)."""
    return BrowseCompPlusFormat(load_templates(options.prompts_file), get_document=options.get_document,
                                citations=options.citations)


# --- the scripted policy's view (tests and demos without a model) ---------------------------------------
_QUESTION_LINE = re.compile(r"^Question:[ \t]*(.+)$", re.MULTILINE)
_ANSWER_TAGS = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def scripted_query(text: str) -> str | None:
    """The question inside a user message posed with a query template (``Question: …`` and an ``Exact
    Answer:`` instruction), else None."""
    m = _QUESTION_LINE.search(text)
    return m.group(1).strip() if m is not None and "Exact Answer:" in text else None


def scripted_finish(turn: Any) -> Any:
    """A scripted policy's final turn (``why\\n<answer>SPAN</answer>``) rewritten in the benchmark's format,
    with the policy's ``why`` (which cites the docids it read) as the explanation; other turns unchanged."""
    m = _ANSWER_TAGS.search(turn.content or "")
    if m is None or turn.tool_calls:
        return turn
    why = " ".join((turn.content or "")[: m.start()].split()) or "No explanation."
    span = " ".join(m.group(1).split())
    return turn.model_copy(update={"content": f"Explanation: {why}\nExact Answer: {span}\nConfidence: 80%"})
