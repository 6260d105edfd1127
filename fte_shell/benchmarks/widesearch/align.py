"""The judge model's three jobs in WideSearch scoring, in this project's own words: map misnamed columns
onto the required ones, map the response's key values onto the gold table's vocabulary, and grade an
``llm_judge`` column (one batched call per column, 0 or 1 per cell).

Each job asks for a JSON object inside a ```json fence and reads the LAST such block (a bare JSON object
is accepted too). A reply that cannot be read maps nothing / scores every cell 0, as in the public scorer.
A failed call (after the model client's retries) raises :class:`~fte_shell.errors.ModelError`: the run is then
not scored at all, never scored as wrong.
"""

from __future__ import annotations

import json
import re
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict

from ...config import ModelConfig
from ...model import ModelClient
from ..llmjudge import ask

MIN_MAX_TOKENS = 8192
"""Completion cap of a table-judge call at least (a column of many cells needs room for the reasoning the
prompt asks for; the public scorer allows 10240)."""
_JSON_BLOCK = re.compile(r"```json\s*(\{.*?\})\s*```", re.DOTALL)

COLUMN_PROMPT = """An agent was asked for a table with certain columns, but some of its column names differ
from the ones asked for. Match each of the agent's column names below to the required column name that
means the same thing (a spelling, language, abbreviation or formatting difference). Leave out an agent
column that means none of them; never use one required name twice.

Agent's column names that did not match:
{response}

Required column names still missing:
{reference}

Reply with one JSON object in a ```json block, mapping agent name to required name, e.g.
```json
{{"agent name": "required name"}}
```
"""

KEY_PROMPT = """Two lists of values name entities: list A comes from an agent's table, list B from a
reference table. For each value of list A, find the value of list B that names the same entity — the
same thing written differently (spelling, abbreviation, translation, punctuation, added Markdown or
extra qualifiers). Compare by meaning, not by position. Leave out a value of A that matches nothing in B.
Copy each A value exactly as written, and each B value exactly as written in B.

List A (agent):
{response}

List B (reference):
{reference}

Reply with one JSON object in a ```json block mapping A values to B values, e.g.
```json
{{"value from A": "value from B"}}
```
"""

CELL_PROMPT = """You grade cells of a table an agent produced against the reference cells, one column at
a time. Each item below has an id, the agent's cell ("response") and the reference cell ("target").

Grading criterion for this column:
{criterion}

Items:
{items}

Give each item 1 when the response is correct under the criterion and 0 otherwise (only the integers 0
or 1). Think about each item briefly, then reply with one JSON object in a ```json block holding a score
for every id, e.g.
```json
{{"idx_0": 1, "idx_1": 0}}
```
"""


class TableJudge(Protocol):
    """A model that completes one prompt; ``model`` and ``temperature`` are recorded with each verdict."""

    model: str
    temperature: float

    def complete(self, prompt: str) -> str: ...


class JudgeCall(BaseModel):
    """One judge call made while scoring a run."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    step: str
    """``columns``, ``keys`` or ``llm_judge``."""

    column: str | None = None
    """The column concerned (None for ``columns``)."""

    prompt: str
    """What was sent."""

    reply: str
    """What came back."""

    parsed: bool
    """Whether the reply held a readable JSON object."""


class ModelTableJudge:
    """A :class:`TableJudge` over :class:`fte_shell.model.ModelClient`, configured by a
    :class:`fte_shell.config.ModelConfig` (see ``fte_shell.benchmarks.llmjudge.judge_model_config``; its
    temperature is sent with every request, its completion cap raised to :data:`MIN_MAX_TOKENS`)."""

    def __init__(self, cfg: ModelConfig):
        self.cfg = cfg
        self.client = ModelClient(cfg)
        self.model: str = self.client.model
        self.temperature: float = cfg.temperature

    def complete(self, prompt: str) -> str:
        return ask(self.client, prompt, max_tokens=max(self.cfg.max_tokens, MIN_MAX_TOKENS)).text


def parse_json_object(reply: str) -> dict[str, Any] | None:
    """The last ```json {...}``` block of ``reply`` (else the whole reply) as an object, or None."""
    blocks = _JSON_BLOCK.findall(reply or "")
    text = blocks[-1] if blocks else (reply or "").strip()
    try:
        obj = json.loads(text)
    except (json.JSONDecodeError, ValueError):
        return None
    return obj if isinstance(obj, dict) else None


def _dump(values: list[str]) -> str:
    return json.dumps(values, ensure_ascii=False)


def map_values(judge: TableJudge, step: str, column: str | None, response: list[str], reference: list[str],
               calls: list[JudgeCall]) -> dict[str, str]:
    """Ask the judge to map ``response`` values onto ``reference`` values. Only pairs whose origin is one
    of ``response`` and whose target is one of ``reference`` are kept."""
    template = COLUMN_PROMPT if step == "columns" else KEY_PROMPT
    prompt = template.format(response=_dump(response), reference=_dump(reference))
    reply = judge.complete(prompt)
    obj = parse_json_object(reply)
    calls.append(JudgeCall(step=step, column=column, prompt=prompt, reply=reply, parsed=obj is not None))
    allowed_from, allowed_to = set(response), set(reference)
    return {str(k): str(v) for k, v in (obj or {}).items()
            if str(k) in allowed_from and isinstance(v, str) and v in allowed_to}


def judge_column(judge: TableJudge, column: str, pairs: list[tuple[str, str]], criterion: object,
                 calls: list[JudgeCall]) -> list[tuple[float, str]]:
    """Scores (0/1) and reasons of the ``(response, target)`` cells of one ``llm_judge`` column."""
    items = {f"idx_{i}": {"response": r, "target": t} for i, (r, t) in enumerate(pairs)}
    prompt = CELL_PROMPT.format(criterion=criterion if criterion is not None else "the response means the same as the target",
                                items=json.dumps(items, ensure_ascii=False, indent=1))
    reply = judge.complete(prompt)
    obj = parse_json_object(reply)
    calls.append(JudgeCall(step="llm_judge", column=column, prompt=prompt, reply=reply, parsed=obj is not None))
    if obj is None:
        return [(0.0, "judge reply unreadable")] * len(pairs)
    out = []
    for i in range(len(pairs)):
        v = obj.get(f"idx_{i}")
        if isinstance(v, bool) or v not in (0, 1):
            out.append((0.0, "judge gave no 0/1 score"))
        else:
            out.append((float(v), "judge: correct" if v == 1 else "judge: wrong"))
    return out
