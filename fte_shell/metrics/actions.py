"""Actions: the tool calls of a run in one vocabulary for every interface, and the revisit rule
(definitions: ``docs/metrics.md``).

A structured tool call is one :class:`Action`; a shell ``bash`` call is one action per classified simple
command (``bash -c '…'`` scripts are looked into). Fetches and search results come from the tool call's
structured facts (``meta.fetches`` / ``meta.searches``, :mod:`fte_shell.record.events`); only for a run
written before they were recorded (schema 0) are they parsed from the observation text (the record lines
the ``fetch`` helper printed, the result list ``search`` printed). For the transient profiles a page is materialized when it is opened (``open``) or visited
(``visit``); ``open``, ``visit`` and a ``find`` on the open page are extractions from it.
"""

from __future__ import annotations

import posixpath
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..record.events import Event, StartEvent, ToolCallEvent
from ..search.base import result_refs
from .shellparse import parse_command

Op = Literal["search", "fetch", "visit", "open", "grep", "read", "find", "list", "other"]
Category = Literal["search", "select", "extract", "other"]
CATEGORY: dict[str, Category] = {
    "search": "search",
    "fetch": "select",
    "visit": "select",
    "open": "select",
    "grep": "extract",
    "read": "extract",
    "find": "extract",
    "list": "other",
    "other": "other",
}
EXTRACTING_OPS = frozenset({"grep", "read", "find", "open", "visit"})
"""Ops that extract text from the documents they touch (for the revisit rule): grep/read/find, and the
transient profiles' ``open``/``visit``, which show page text as they select it."""
MATERIALIZING_OPS = frozenset({"open", "visit"})
"""Ops whose successful call materializes the page they name (the workspace does it for ``fetch``)."""
STRUCTURED_OPS: dict[str, Op] = {
    "search": "search",
    "fetch": "fetch",
    "visit": "visit",
    "open": "open",
    "get_document": "open",  # the standard profile's: a whole document shown, named by docid (meta.source)
    "grep": "grep",
    "read": "read",
    "find": "find",
    "list_fetched": "list",
}
SHELL_TOOL = "bash"
MOUNT = "/work"
RECORD_RE = re.compile(r'^(?P<path>/\S+\.txt)  (?P<chars>[\d,]+) chars  (?P<state>new|held)  (?P<source>\S+)', re.MULTILINE)
DOC_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\.txt")
UNKNOWN_TOOL = "Error: unknown tool"

Scope = Literal["one", "all", "some"]


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class Action(_M):
    """One classified agent action."""

    turn: int
    """Model turn of the tool call it belongs to."""

    call: int
    """Index of the tool call in the run (0-based)."""

    op: Op
    """What it does (shared vocabulary of both interfaces)."""

    tool: str
    """Tool name (structured) or program name (shell)."""

    docs: list[str] = Field(default_factory=list)
    """Documents it touches: workspace file names (fetch/grep/read), page sources (open/visit/find)."""

    whole_cache: bool = False
    """A grep over every cached document."""

    new: bool | None = None
    """For fetch: True = newly materialized, False = already held (a repeat), None = failed/unknown."""

    error: bool = False
    """The tool call returned an error (structured tools; a shell command's exit status is not used)."""

    refused: bool = False
    """The profile refused the call (a tool it does not offer, or fte-single-grep's grep without one
    fetched file): the call counts as its op and touches nothing."""

    source: str | None = None
    """fetch/open/visit: the URL or docid it materialized (the record's SOURCE, or the page source)."""

    scope: Scope | None = None
    """grep: ``one`` named file, ``all`` cached files (whole cache), or ``some`` (a glob/recursive subset)."""

    pattern: str | None = None
    """grep/find: the pattern."""

    offset: int | None = None
    """read: the explicit first line (structured ``offset``; ``sed -n 'A,Bp'``; ``tail -n +K``)."""

    limit: int | None = None
    """read: the explicit number of lines (structured ``limit``; ``sed -n 'A,Bp'``; ``head -n N``)."""

    search_refs: list[str] = Field(default_factory=list)
    """search: the result references (URL or docid) shown, in rank order."""


# --- helpers ------------------------------------------------------------------------------------------
def records(observation: str) -> list[tuple[str, bool, str]]:
    """(file name, new, source) of every fetch record line in an observation."""
    return [(posixpath.basename(m["path"]), m["state"] == "new", m["source"])
            for m in RECORD_RE.finditer(observation)]


def fetched(ev: ToolCallEvent, facts: bool) -> list[tuple[str, bool, str]]:
    """(file name, new, source) of every document a tool call's fetches put in the workspace: from the
    event's ``meta.fetches`` when the run recorded facts (``facts``: schema 1), else parsed from the
    observation's record lines (a schema-0 run)."""
    if not facts:
        return records(ev.observation)
    out = []
    for f in ev.meta.fetches or []:
        doc = _doc_of(f.path) if f.ok else None
        if doc is not None:
            out.append((doc, bool(f.new), f.source or ""))
    return out


def searched(ev: ToolCallEvent, facts: bool) -> list[str]:
    """The result references of a tool call's searches, in order: from ``meta.searches`` when the run
    recorded facts, else parsed from the observation (a schema-0 run)."""
    if not facts:
        return result_refs(ev.observation)
    return [u for f in ev.meta.searches or [] for u in f.urls]


def has_facts(events: Sequence[Event]) -> bool:
    """True when the run recorded fetch and search facts (its start event's ``schema_version`` ≥ 1)."""
    start = next((e for e in events if isinstance(e, StartEvent)), None)
    return start is not None and start.schema_version >= 1


def _names_in(text: str, among: Iterable[str]) -> list[str]:
    found = set(DOC_NAME_RE.findall(text))
    return [d for d in among if d in found]


def _doc_of(path: Any) -> str | None:
    if not isinstance(path, str) or not path.strip():
        return None
    return posixpath.basename(path.strip())


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def is_refused(ev: ToolCallEvent) -> bool:
    """A refused call: an error whose ``meta.refused`` is set, or a call of a tool the profile lacks."""
    return ev.error and (bool(ev.meta.refused) or ev.observation.startswith(UNKNOWN_TOOL))


# --- shell --------------------------------------------------------------------------------------------
def _shell_actions(
    turn: int, call: int, command: str, ev: ToolCallEvent, known: list[str], cwd: str, facts: bool
) -> tuple[list[Action], str]:
    parsed = parse_command(command, known, mount=MOUNT, cwd=cwd)
    obs = ev.observation
    recs = fetched(ev, facts)
    refs = searched(ev, facts)
    rec_i = 0
    n_fetch_cmds = sum(1 for c in parsed.commands if c.kind == "fetch")
    extra = max(0, len(recs) - n_fetch_cmds)  # loops/multi-URL fetches
    out: list[Action] = []
    base = {"turn": turn, "call": call}
    for c in parsed.commands:
        if c.kind == "fetch":
            take = 1 + (extra if rec_i == 0 else 0)
            got = recs[rec_i : rec_i + take]
            rec_i += take
            if not got:
                out.append(Action(**base, op="fetch", tool=c.tool))
            for doc, new, src in got:
                out.append(Action(**base, op="fetch", tool=c.tool, docs=[doc], new=new, source=src))
                if doc not in known:
                    known.append(doc)
        elif c.kind == "grep":
            one = len(c.operands) == 1 and not c.recursive and "*" not in c.operands[0] and "?" not in c.operands[0]
            scope: Scope = "all" if c.whole_cache else "one" if one else "some"
            docs = _names_in(obs, c.docs) if len(c.docs) > 1 else c.docs
            out.append(Action(**base, op="grep", tool=c.tool, docs=docs, whole_cache=c.whole_cache,
                              scope=scope, pattern=c.pattern))
        elif c.kind == "read":
            out.append(Action(**base, op="read", tool=c.tool, docs=c.docs, offset=c.offset, limit=c.limit))
        elif c.kind == "search":
            out.append(Action(**base, op="search", tool=c.tool, search_refs=refs))
        else:
            out.append(Action(**base, op=c.kind, tool=c.tool, docs=c.docs))
    if not parsed.commands:
        out.append(Action(**base, op="other", tool=SHELL_TOOL))
    return out, parsed.cwd_after


# --- every interface ----------------------------------------------------------------------------------
def actions_from_events(events: Sequence[Event], final_docs: Iterable[str] = ()) -> list[Action]:
    """Turn the tool-call events of a run into actions. ``final_docs`` (the end-of-run workspace listing)
    completes the listing known at each point for documents whose fetch record was not seen."""
    facts = has_facts(events)
    calls = [ev for ev in events if isinstance(ev, ToolCallEvent)]
    recorded: set[str] = set()
    for ev in calls:
        recorded.update(n for n, _, _ in fetched(ev, facts))
    known: list[str] = [d for d in final_docs if d not in recorded]  # documents present at this point
    cwd = MOUNT
    open_page: str | None = None
    out: list[Action] = []
    for call, ev in enumerate(calls):
        turn, name, args, obs, error, meta = ev.turn, ev.name, ev.arguments or {}, ev.observation, ev.error, ev.meta
        if name == SHELL_TOOL:
            command = args.get("command")
            if not isinstance(command, str):
                out.append(Action(turn=turn, call=call, op="other", tool=name, error=error))
                continue
            acts, cwd = _shell_actions(turn, call, command, ev, known, cwd, facts)
            out.extend(acts)
            continue
        op: Op = STRUCTURED_OPS.get(name, "other")
        a = Action(turn=turn, call=call, op=op, tool=name, error=error, refused=is_refused(ev))
        if op == "fetch" and not error:
            recs = fetched(ev, facts)
            if recs:
                a.docs, a.new, a.source = [recs[0][0]], recs[0][1], recs[0][2]
            elif not facts and (doc := _doc_of(meta.path)) is not None:
                a.docs, a.new, a.source = [doc], meta.new, meta.source
            known.extend(d for d in a.docs if d not in known)
        elif op == "grep":
            a.pattern = args.get("pattern") if isinstance(args.get("pattern"), str) else None
            raw = args.get("path")
            doc = _doc_of(raw)
            if isinstance(raw, str) and posixpath.normpath(posixpath.join(MOUNT, raw.strip() or ".")) == MOUNT:
                doc = None  # the mount itself = every cached file
            if not error:
                a.scope = "one" if doc is not None else "all"
                a.whole_cache = doc is None
                a.docs = ([doc] if doc in known else []) if doc is not None else _names_in(obs, known)
        elif op == "read":
            a.offset, a.limit = _int(args.get("offset")), _int(args.get("limit"))
            doc = _doc_of(args.get("path"))
            if not error and doc is not None:
                a.docs = [doc]
        elif op == "search":
            a.search_refs = [] if error else searched(ev, facts)
        elif op in ("open", "visit"):
            ref = meta.source if meta.source is not None else args.get("url")
            if not error and isinstance(ref, str) and ref.strip():
                a.docs, a.source = [ref.strip()], ref.strip()
                if op == "open":
                    open_page = ref.strip()
        elif op == "find":
            a.pattern = args.get("pattern") if isinstance(args.get("pattern"), str) else None
            page = meta.source if meta.source is not None else open_page
            if not error and page:
                a.docs = [page]
        out.append(a)
    return out


def materialized_pages(actions: Sequence[Action]) -> set[str]:
    """Pages materialized by successful ``open``/``visit`` calls (the transient profiles)."""
    return {d for a in actions if a.op in MATERIALIZING_OPS and not a.error for d in a.docs}


def revisited_docs(actions: Sequence[Action], materialized: Iterable[str]) -> set[str]:
    """Materialized documents extracted from (grep/read/find/open/visit) at least twice with an action
    touching a different document strictly in between."""
    mat = set(materialized)
    last_extract: set[str] = set()
    other_since: dict[str, bool] = {}
    revisited: set[str] = set()
    for a in actions:
        touched = set(a.docs)
        is_extract = a.op in EXTRACTING_OPS
        if is_extract:
            for d in touched:
                if d in last_extract and other_since.get(d):
                    revisited.add(d)
                last_extract.add(d)
                other_since[d] = False
        for d in last_extract:
            if d in touched and is_extract:
                continue
            if touched - {d}:
                other_since[d] = True
    return revisited & mat


def ngrams(seq: Sequence[str], n: int) -> Counter[tuple[str, ...]]:
    """Counts of consecutive n-grams of ``seq``."""
    return Counter(tuple(seq[i : i + n]) for i in range(len(seq) - n + 1))
