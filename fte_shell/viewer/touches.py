"""Which lines of which workspace document each tool call touched (the workspace view's highlights).

Documents come from the actions the metrics compute (``fte_shell.metrics.actions_from_events``: the
structured tools' arguments, and for the shell profile the command parser of ``fte_shell.metrics.shellparse``).
Lines come from the observation: a line the call printed is attributed to line N of a document only when the
document's line N really contains that text (explicit ``N:``/``path:N:`` prefixes are checked, other lines are
looked up by their text), so a highlight never points at a line the agent did not see.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from itertools import pairwise
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from fte_shell.metrics import actions_from_events
from fte_shell.record.events import Event, ToolCallEvent

# "/work/x.txt:12:text" (grep -H -n), "/work/x.txt-12-text" (its context), "12: text" / "12- text"
# (structured grep/read/find, grep -n on one file)
_PREFIXED = re.compile(r"^(?:(?P<path>/\S+?\.txt)(?P<s1>[:-]))?(?P<n>\d+)(?P<s2>[:-]) ?(?P<text>.*)$")
_PATH_ONLY = re.compile(r"^(?P<path>/\S+?\.txt)[:-](?P<text>.*)$")  # grep -H without -n
_MIN_TEXT = 12  # shorter unnumbered lines are too ambiguous to look up by text


class Touch(BaseModel):
    """One tool call's contact with one document."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    turn: int
    """Model turn of the call."""

    call: int
    """Index of the tool call in the run (0-based)."""

    op: str
    """fetch, grep, read (the metrics' ops; find counts as grep here)."""

    hits: list[int] = Field(default_factory=list)
    """1-based lines the call reported as matches (grep/find)."""

    lines: list[int] = Field(default_factory=list)
    """1-based lines the call returned otherwise (a read window, grep context)."""


def _clean(text: str) -> str:
    return text.strip().strip("…").strip()


def _attribute(obs: str, docs: Mapping[str, list[str]], op: str) -> dict[str, tuple[set[int], set[int]]]:
    """{doc: (hit lines, other lines)} for the lines of ``obs`` found in ``docs`` (name → its lines).

    A numbered line counts when the document's line N holds its text; an unnumbered one is looked up by its
    text (preferring the line that continues the previous match, so a window of duplicates stays in place).
    Between two matched lines whose distance in the output equals their distance in the document, the
    lines in between were returned too (blank and short lines of a read window)."""
    matched: dict[str, list[tuple[int, list[int], bool]]] = {d: [] for d in docs}  # (obs line, doc lines, hit)
    by_text: dict[str, dict[str, list[int]]] = {}
    current: str | None = None  # the structured grep's "/work/x.txt:" block header
    for o, line in enumerate(obs.splitlines()):
        if line.endswith(".txt:") and line.startswith("/"):
            name = line[:-1].rsplit("/", 1)[-1]
            current = name if name in docs else None
            continue
        m = _PREFIXED.match(line)
        hit = op == "grep"
        n: int | None = None
        if m:
            path = m["path"]
            cands = [path.rsplit("/", 1)[-1]] if path else ([current] if current else list(docs))
            n, text = int(m["n"]), m["text"]
            hit = op == "grep" and m["s2"] == ":"
        else:
            pm = _PATH_ONLY.match(line)
            if pm:
                cands, text = [pm["path"].rsplit("/", 1)[-1]], pm["text"]
            else:
                cands, text = ([current] if current else list(docs)), line
        core = _clean(text)
        for d in cands:
            if d not in docs:
                continue
            lines = docs[d]
            if n is not None:
                if 1 <= n <= len(lines) and core in lines[n - 1]:
                    matched[d].append((o, [n], hit))
                    break
                continue
            if len(core) < _MIN_TEXT:
                continue
            idx = by_text.get(d)
            if idx is None:
                idx = by_text[d] = {}
                for i, t in enumerate(lines, 1):
                    idx.setdefault(t.strip(), []).append(i)
            found = idx.get(core, [])
            if not found and text.strip() != core:  # a line cut short ("…"): look for it inside lines
                found = [i for i, t in enumerate(lines, 1) if core in t][:3]
            if 0 < len(found) <= 3:
                matched[d].append((o, found, hit))
                break
    out: dict[str, tuple[set[int], set[int]]] = {}
    for d, ms in matched.items():
        _place_duplicates(ms)
        hits = {n for _, ns, h in ms if h for n in ns}
        other = {n for _, ns, h in ms if not h for n in ns}
        for (o1, n1, _), (o2, n2, _) in pairwise(ms):
            if len(n1) == len(n2) == 1 and n2[0] - n1[0] == o2 - o1 > 1:
                other.update(range(n1[0] + 1, n2[0]))
        out[d] = (hits, other - hits)
    return out


def _place_duplicates(ms: list[tuple[int, list[int], bool]]) -> None:
    """A line found at several places is put where it continues its nearest placed neighbour's window."""
    for k, (o, ns, h) in enumerate(ms):
        if len(ns) < 2:
            continue
        for j in [*range(k - 1, -1, -1), *range(k + 1, len(ms))]:
            oj, nj, _ = ms[j]
            if len(nj) == 1:
                want = nj[0] + (o - oj)
                if want in ns:
                    ms[k] = (o, [want], h)
                break


def touches(events: Sequence[Event], docs: Mapping[str, list[str]]) -> dict[str, list[Touch]]:
    """{document name: touches in call order} for the documents in ``docs`` (name → its lines)."""
    calls = [ev for ev in events if isinstance(ev, ToolCallEvent)]
    out: dict[str, list[Touch]] = {d: [] for d in docs}
    by_call: dict[int, list[Any]] = {}
    for a in actions_from_events(events, final_docs=list(docs)):
        by_call.setdefault(a.call, []).append(a)
    for call, acts in sorted(by_call.items()):
        obs = calls[call].observation if call < len(calls) else ""
        turn = acts[0].turn
        fetched = [d for a in acts if a.op == "fetch" for d in a.docs if d in docs]
        for d in dict.fromkeys(fetched):
            out[d].append(Touch(turn=turn, call=call, op="fetch"))
        ext = [a for a in acts if a.op in ("grep", "read", "find")]
        names = list(dict.fromkeys(d for a in ext for d in a.docs if d in docs))
        if not names:
            continue
        op = "grep" if any(a.op in ("grep", "find") for a in ext) else "read"
        found = _attribute(obs, {d: docs[d] for d in names}, op)
        for d in names:
            hits, other = found[d]
            out[d].append(Touch(turn=turn, call=call, op=op, hits=sorted(hits), lines=sorted(other - hits)))
    return out
