"""One run as a BrowseComp-Plus run file: the JSON object the benchmark's evaluation reads per query
(``query_id``, ``tool_call_counts``, ``status``, ``retrieved_docids``, ``result``) plus what its own
clients write beside them that fte-shell knows (``metadata``, ``usage``); docs/metrics.md
"BrowseComp-Plus run files" says where each field comes from.

``fte-shell export browsecomp-plus`` writes these objects; the report's official figures
(:mod:`.official`) are computed from the same objects, so the two cannot disagree.

``retrieved_docids`` is every docid a retriever returned to the agent, read from the trajectory as every
profile records it: the result lists of its searches (``meta.searches``, the shell's ``search`` commands
included), the documents its fetches, opens and visits brought (``meta.fetches``, ``meta.source``), and
the corpus files a shell command listed when the corpus is mounted in the box (``/corpus/…``). URLs are
turned into docids through the corpus; a reference the corpus does not hold is left out.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ...metrics.actions import SHELL_TOOL, actions_from_events
from ...record.events import Event, ModelCallEvent, StartEvent, ToolCallEvent
from ...record.rundir import read_events, read_result
from ...stops import is_infra_failure
from ..grading import final_response

COMPLETED = "completed"
"""The ``status`` of a run that ended with a parsable final answer (anything else is not graded)."""
CORPUS_MOUNT = "/corpus"
"""Where the corpus lies in the box when it is mounted there (a shell command's listing of its files)."""
_CORPUS_PATH = re.compile(r"(?:^|[\s'\"(=])(/corpus/[^\s:'\"),]+)")
_TXT_NAME = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)\.txt\b")
_DOCID_IN_TEXT = re.compile(r'"docid"\s*:\s*"?([^",}\s]+)')

Resolve = Callable[[str], "str | None"]
"""A reference a tool showed (docid or URL) → the corpus docid, None when the corpus has no such document."""


class CorpusDocids:
    """:data:`Resolve` over the sweep's corpus index (``[search] corpus``), else over the question's own
    ``doc_urls`` (the evidence and gold documents' URLs) with any non-URL reference taken as a docid."""

    def __init__(self, corpus_dir: Path | None, doc_urls: dict[str, str] | None = None):
        from ...search.corpus import url_key

        self._key = url_key
        self._by_url = {url_key(u): d for d, u in (doc_urls or {}).items()}
        self._corpus: Any = None
        self._memo: dict[str, str | None] = {}
        if corpus_dir is not None and Path(corpus_dir).is_dir():
            from ...search.local import LocalCorpus

            self._corpus = LocalCorpus(Path(corpus_dir))

    @property
    def checked(self) -> bool:
        """Whether references are checked against the corpus itself."""
        return self._corpus is not None

    def __call__(self, ref: str) -> str | None:
        ref = ref.strip()
        if ref not in self._memo:
            if self._corpus is not None:
                doc = self._corpus.get(ref)
                self._memo[ref] = None if doc is None else str(doc.docid)
            else:
                self._memo[ref] = self._by_url.get(self._key(ref)) if "://" in ref else (ref or None)
        return self._memo[ref]

    def has(self, docid: str) -> bool:
        """Whether the corpus holds ``docid`` (True when there is no corpus to ask)."""
        return self._corpus is None or self._corpus.get(docid) is not None


def _corpus_refs(ev: ToolCallEvent) -> list[str]:
    """Docid candidates of a shell command over the mounted corpus: the file names it printed under
    ``/corpus`` (and, for a command run there, every ``NAME.txt`` it printed)."""
    command = str((ev.arguments or {}).get("command") or "")
    if CORPUS_MOUNT not in command and CORPUS_MOUNT not in ev.observation:
        return []
    out = [p.rstrip("/").rsplit("/", 1)[-1].removesuffix(".txt") for p in _CORPUS_PATH.findall(ev.observation)]
    if CORPUS_MOUNT in command:
        out += _TXT_NAME.findall(ev.observation)
    return out


def retrieved_docids(events: Sequence[Event], resolve: Resolve) -> list[str]:
    """Every docid the run's tools returned to the agent, in the order the calls were made (see the module
    docstring): the search results and the fetched/opened/visited sources of the run's actions (the same
    the evidence metrics read, :mod:`fte_shell.metrics.actions`), a search tool's JSON ``docid`` fields when
    it recorded no facts, any other call's ``meta.source`` (``get_document``), the mounted corpus's files."""
    by_call: dict[int, list[str]] = {}
    for a in actions_from_events(events):
        got = by_call.setdefault(a.call, [])
        got += a.search_refs
        if a.source and a.op in ("fetch", "open", "visit"):
            got.append(a.source)
    refs: list[str] = []
    calls = [ev for ev in events if isinstance(ev, ToolCallEvent)]
    for i, ev in enumerate(calls):
        refs += by_call.get(i, [])
        if ev.meta.searches is None and re.search("search|retriev", ev.name, re.IGNORECASE):
            refs += _DOCID_IN_TEXT.findall(ev.observation)  # a search tool that recorded no facts
        if ev.meta.source and not ev.error:
            refs.append(ev.meta.source)
        if ev.name == SHELL_TOOL:
            refs += _corpus_refs(ev)
    out: dict[str, None] = {}
    for r in refs:
        if (d := resolve(r)) is not None:
            out.setdefault(d, None)
    return list(out)


def tool_call_counts(events: Sequence[Event]) -> dict[str, int]:
    """Tool calls per tool name; a shell profile's ``bash`` calls also count each command they ran under
    its kind (``search``, ``fetch``, ``grep``, ``read``, ``list``; docs/metrics.md "Actions"), so the
    ``search`` count means the same for every profile."""
    counts: Counter[str] = Counter(ev.name for ev in events if isinstance(ev, ToolCallEvent))
    if counts.get(SHELL_TOOL):
        counts.update(a.op for a in actions_from_events(events) if a.tool != SHELL_TOOL and a.op != "other")
    return dict(counts)


def _usage(events: Sequence[Event], result: dict[str, Any]) -> dict[str, int]:
    """The official clients' usage keys from the run's summed usage and its calls' details."""
    u = result.get("usage") or {}
    cached = reasoning = 0
    for ev in events:
        if isinstance(ev, ModelCallEvent):
            for src in (ev.usage_details or {}, ev.usage):
                c = (src.get("prompt_tokens_details") or {}).get("cached_tokens")
                r = (src.get("completion_tokens_details") or {}).get("reasoning_tokens")
                if isinstance(c, int) or isinstance(r, int):
                    cached += c if isinstance(c, int) else 0
                    reasoning += r if isinstance(r, int) else 0
                    break
    return {"input_tokens": int(u.get("prompt_tokens") or 0), "input_tokens_cached": cached,
            "output_tokens": int(u.get("completion_tokens") or 0), "included_reasoning_tokens": reasoning,
            "total_tokens": int(u.get("total_tokens") or 0)}


def _items(events: Sequence[Event], response: str, completed: bool) -> list[dict[str, Any]]:
    """``result``: per model call its reasoning, its text and its tool calls in order; the final
    response last (``output_text``) when the run completed."""
    out: list[dict[str, Any]] = []
    for ev in events:
        if isinstance(ev, ModelCallEvent):
            if ev.reasoning:
                out.append({"type": "reasoning", "tool_name": None, "arguments": None, "output": [ev.reasoning]})
            if text := str(ev.message.get("content") or "").strip():
                out.append({"type": "output_text", "tool_name": None, "arguments": None, "output": text})
        elif isinstance(ev, ToolCallEvent):
            args = ev.raw_arguments if ev.raw_arguments is not None else json.dumps(ev.arguments or {})
            out.append({"type": "tool_call", "tool_name": ev.name, "arguments": args, "output": ev.observation})
    if completed and not (out and out[-1]["type"] == "output_text" and out[-1]["output"] == response):
        out.append({"type": "output_text", "tool_name": None, "arguments": None, "output": response})
    return out


def run_file(run_dir: Path, query_id: str, resolve: Resolve, *, arm: str | None = None,
             rep: int = 0) -> dict[str, Any] | None:
    """The run file of one run directory (None for a run that is not a result: an infrastructure
    failure, or no ``result.json``). ``status`` is ``completed`` when the run ended with a final answer,
    else its stop reason (the evaluation then counts it, ungraded, as not correct)."""
    result = read_result(Path(run_dir))
    if result is None or is_infra_failure(result.get("stop_reason")):
        return None
    events = read_events(Path(run_dir))
    start = next((e for e in events if isinstance(e, StartEvent)), StartEvent())
    answered = result.get("answer") is not None
    response = (final_response(events) or str(result.get("answer") or "")) if answered else ""
    completed = answered and response != ""
    model_cfg = (start.config or {}).get("model") or {}
    search_cfg = (start.config or {}).get("search") or {}
    effort = model_cfg.get("reasoning_effort")
    return {
        "metadata": {
            "model": result.get("model") or start.model, "reasoning": {"effort": effort} if effort else None,
            "max_tokens": model_cfg.get("max_tokens"),
            "profile": result.get("profile") or start.profile, "arm": arm, "rep": rep,
            "retriever": search_cfg.get("retriever"), "stop_reason": result.get("stop_reason"),
            "run_dir": str(run_dir), "config_digest": result.get("config_digest"),
        },
        "query_id": str(query_id),
        "tool_call_counts": tool_call_counts(events),
        "usage": _usage(events, result),
        "status": COMPLETED if completed else str(result.get("stop_reason") or "unfinished"),
        "retrieved_docids": retrieved_docids(events, resolve),
        "result": _items(events, response, completed),
    }
