"""What a run's context strategy did (definitions: ``docs/metrics.md`` "Context arms"): its edits
(``context_edit`` events), the prompt tokens the server's cache served, and the FtE behaviour split at
the first edit — re-fetches of documents the workspace held, whole-cache greps, and greps/reads of
documents whose observation an edit cleared (the workspace lets an agent get them back without fetching).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..config import ContextConfig
from ..model.prices import billed_tokens, reports_cached
from ..record.events import ContextEditEvent, Event, ModelCallEvent, StartEvent, ToolCallEvent
from .actions import _M, Action

RECALL_OPS = frozenset({"grep", "read"})
"""The extractions that count as getting a cleared document back from the workspace."""


class EditMetrics(_M):
    """Numbers of one run about its context strategy (all 0 / None for a run without edits)."""

    edits: int = 0
    """Edits: ``context_edit`` events that took something out — cleared or dropped a tool call, or sent
    fewer messages than the conversation kept (an event that only added a note is not counted)."""

    first_edit_turn: int | None = None
    """The turn of the first edit (the request it was made for); None without edits."""

    tokens_cleared_max: int = 0
    """The most estimated prompt tokens an edit took out of one request: max of ``tokens_before −
    tokens_after`` over the edits (each edit compares the request with the whole kept conversation)."""

    fetch_repeat_after: int = 0
    """Fetches of a document the workspace already held (``fetch_repeat``) at or after the first edit's
    turn; the ones before are the run's ``n_fetch_repeat`` minus these."""

    whole_cache_grep_after: int = 0
    """Greps over every cached document at or after the first edit's turn."""

    cleared_recalls: int = 0
    """grep/read actions (no error) touching a document whose observation an earlier edit cleared: a
    document named by a tool call (any op) that an edit at or before this action's turn listed in
    ``cleared`` and that happened before that edit's turn."""

    cached_prompt_tokens: int = 0
    """Prompt tokens the model server said its prompt cache served (``prompt_tokens_details.cached_tokens``,
    ``input_tokens_details.cached_tokens`` or ``prompt_cache_hit_tokens``), summed over the model calls."""

    cache_known_prompt_tokens: int = 0
    """Prompt tokens of the model calls whose usage says how many were cached (0 included): the share's
    denominator (a server that never says leaves it 0)."""

    cached_prompt_tokens_after: int = 0
    """``cached_prompt_tokens`` of the model calls at or after the first edit's turn."""

    cache_known_prompt_tokens_after: int = 0
    """``cache_known_prompt_tokens`` of the model calls at or after the first edit's turn."""


def context_label(events: Sequence[Event]) -> str:
    """The run's context strategy as its command-line spelling (``keep_recent:5``), from the start event's
    configuration; ``keep_all`` for runs written before ``[agent.context]`` existed."""
    start = next((e for e in events if isinstance(e, StartEvent)), None)
    raw = ((start.config if start else {}).get("agent") or {}).get("context")
    if not isinstance(raw, dict):
        return "keep_all"
    try:
        return ContextConfig.model_validate(raw).label
    except ValueError:  # a newer version's settings: the strategy's name
        return str(raw.get("strategy") or "keep_all")


def is_edit(e: ContextEditEvent) -> bool:
    """Whether a ``context_edit`` event took something out (see :attr:`EditMetrics.edits`)."""
    return bool(e.cleared) or e.messages_after < e.messages_before


def _cleared_docs(edit: ContextEditEvent, ids: list[str | None], actions: Sequence[Action]) -> set[str]:
    """The documents named by the tool calls ``edit`` cleared (calls made before its turn)."""
    cleared = set(edit.cleared)
    return {d for a in actions if a.turn < edit.turn and ids[a.call] in cleared for d in a.docs}


def edit_metrics(events: Sequence[Event], actions: Sequence[Action]) -> EditMetrics:
    """:class:`EditMetrics` of one run from its events and its actions
    (:func:`fte_shell.metrics.actions.actions_from_events` of the same events)."""
    edits = sorted((e for e in events if isinstance(e, ContextEditEvent) and is_edit(e)), key=lambda e: e.turn)
    ids = [e.id for e in events if isinstance(e, ToolCallEvent)]
    first = edits[0].turn if edits else None
    cache = [0, 0, 0, 0]  # cached, known; the same at or after the first edit
    for c in (e for e in events if isinstance(e, ModelCallEvent)):
        usage = c.usage_details or c.usage
        if reports_cached(usage):
            fresh, hit, _ = billed_tokens(usage)
            late = first is not None and c.turn >= first
            cache = [cache[0] + hit, cache[1] + fresh + hit, cache[2] + hit * late, cache[3] + (fresh + hit) * late]
    after = [a for a in actions if first is not None and a.turn >= first]
    gone: set[str] = set()
    applied = 0
    recalls = 0
    for a in actions:
        while applied < len(edits) and edits[applied].turn <= a.turn:
            gone |= _cleared_docs(edits[applied], ids, actions)
            applied += 1
        if a.op in RECALL_OPS and not a.error and gone & set(a.docs):
            recalls += 1
    return EditMetrics(
        edits=len(edits),
        first_edit_turn=first,
        tokens_cleared_max=max((max(0, e.tokens_before - e.tokens_after) for e in edits), default=0),
        fetch_repeat_after=sum(1 for a in after if a.op == "fetch" and a.new is False),
        whole_cache_grep_after=sum(1 for a in after if a.op == "grep" and a.whole_cache),
        cleared_recalls=recalls,
        cached_prompt_tokens=cache[0],
        cache_known_prompt_tokens=cache[1],
        cached_prompt_tokens_after=cache[2],
        cache_known_prompt_tokens_after=cache[3],
    )
