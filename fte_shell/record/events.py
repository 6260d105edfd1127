"""The typed events of ``trajectory.jsonl`` (format: docs/ARCHITECTURE.md, "Run directory").

Every event has ``type`` and ``t`` (seconds since the run writer was opened). The ``start`` event carries
``schema_version``: :data:`SCHEMA_VERSION` for runs written now, ``0`` for runs written before the field
existed (read by the same reader, converted on read by :func:`convert`). Keys a model does not name are
kept (``extra="allow"``) and ignored by readers, so a newer writer's extra fields never break a reader.

Fetch and search results are structured fields of their ``tool_call`` event's ``meta``: ``fetches``
(:class:`FetchFact`) and ``searches`` (:class:`SearchFact`), written from what the gateway / fetch service /
search backend returned (schema 1). Runs of schema 0 have them only as observation text; readers that
need them for such runs parse the text (the metrics do, as their fallback).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from .event_base import EventBase as _Event
from .replay_events import ForkEvent, ResumeEvent

SCHEMA_VERSION = 1
"""The trajectory schema written by this version (the ``start`` event's ``schema_version``)."""


class FetchFact(BaseModel):
    """One reference a fetch asked for, as the fetch service answered it."""

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True)

    url: str
    """The reference as asked (URL or docid)."""
    ok: bool
    """The document is in the workspace (new or already held)."""
    path: str | None = None
    """Agent path of the workspace file (``/work/….txt``), when ok."""
    source: str | None = None
    """Canonical URL or docid of the document, when ok."""
    chars: int | None = None
    """Body characters of the document, when ok."""
    new: bool | None = None
    """True = this fetch wrote the file, False = the workspace already held it; None when not ok."""
    retrieved_at: str | None = None
    """The written file's ``Retrieved:`` time (ISO-8601), when new (a resume from the trajectory alone writes
    the same file again); None otherwise and before it was recorded."""
    error: str | None = None
    """The one-line refusal or failure, when not ok."""


class SearchFact(BaseModel):
    """One search request, as the search backend answered it."""

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True)

    query: str
    """The query."""
    n: int | None = None
    """Results asked for."""
    backend: str | None = None
    """The backend's name (``serper``, ``local:…``)."""
    urls: list[str] = Field(default_factory=list)
    """The result references (URL or docid), in rank order."""
    cache_hit: bool | None = None
    """True: the result cache (or a replayed snapshot) answered; False: the backend was asked; None: no
    cache in between (or a run written before the field was filled)."""
    error: str | None = None
    """The one-line error, when the search failed."""


class StartEvent(_Event):
    """The run began."""

    type: Literal["start"] = "start"
    schema_version: int = 0
    """Trajectory schema of this run (0 = written before versioning)."""
    question: str = ""
    """The question as given to the model."""
    profile: str | None = None
    """Profile name."""
    model: str | None = None
    """Model name."""
    config: dict[str, Any] = Field(default_factory=dict)
    """The run's whole configuration (secrets masked)."""
    system_prompt: str | None = None
    """The system prompt."""
    tools: list[dict[str, Any]] = Field(default_factory=list)
    """The OpenAI tool schemas offered."""
    run_id: str | None = None
    """The run's id."""
    reasoning_passback: str | None = None
    """``model.reasoning_passback``."""
    server: dict[str, Any] | None = None
    """What the model server said about itself (context window, kind), if probed."""


class WarningEvent(_Event):
    """Something the user should know that did not stop the run (e.g. a server discovery warning)."""

    type: Literal["warning"] = "warning"
    turn: int = 0
    """Turn it happened in (0 = before the first model call)."""
    message: str = ""
    """The warning."""


class ModelCallEvent(_Event):
    """One model call (after the client's retries)."""

    type: Literal["model_call"] = "model_call"
    turn: int = 0
    """Turn number (1-based)."""
    latency_s: float | None = None
    """Seconds the call took."""
    usage: dict[str, Any] = Field(default_factory=dict)
    """Token usage as reported."""
    usage_details: dict[str, Any] | None = None
    """The server's detailed usage, if any."""
    message: dict[str, Any] = Field(default_factory=dict)
    """The assistant message as the server sent it."""
    finish_reason: str | None = None
    """``stop``, ``tool_calls``, ``length``…"""
    attempts: int | None = None
    """Attempts the client made."""
    request: dict[str, Any] | None = None
    """The request parameters sent (messages excluded)."""
    response: dict[str, Any] | None = None
    """The response's metadata."""
    reasoning: str | None = None
    """The reasoning text, when the server sent one."""
    reasoning_fields: list[str] | None = None
    """The message fields the reasoning came from."""
    kept_changes: list[str] | None = None
    """How the kept copy of the message differs from the one sent."""
    cost_usd: float | None = None
    """What this call cost in USD at the run's price (``fte_shell.model.prices.usage_cost``); absent
    when the price is unknown."""
    replayed: bool | None = None
    """True: no model was called — a fork re-applied its parent's recorded reply (``fte_shell.episode.fork``;
    its usage and cost are the parent's), or a resumed run its own (``fte_shell.episode.resume``). Absent
    for a real call."""


class RetryEvent(_Event):
    """The model client retries a failed call."""

    type: Literal["retry"] = "retry"
    turn: int = 0
    """Turn number."""
    attempt: int | None = None
    """The attempt that failed (0-based)."""
    error: str | None = None
    """What failed."""
    delay_s: float | None = None
    """Seconds waited before the next attempt."""
    endpoint: str | None = None
    """The endpoint called."""


class TextToolCallEvent(_Event):
    """Tool calls found as text in a reply without a native tool call."""

    type: Literal["text_tool_call"] = "text_tool_call"
    turn: int = 0
    """Turn number."""
    source: str | None = None
    """``content`` or ``reasoning``."""
    calls: list[dict[str, Any]] = Field(default_factory=list)
    """The calls found."""
    executed: bool = False
    """Whether they were executed (``model.parse_text_tool_calls``)."""


class ToolMeta(BaseModel):
    """A tool result's ``meta``: the profile's structured facts (any keys; the fetch and search facts
    typed)."""

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True)

    fetches: list[FetchFact] | None = None
    """The fetches the call made (None: not recorded, e.g. a schema-0 run or a tool that fetches nothing)."""
    searches: list[SearchFact] | None = None
    """The searches the call made (None: not recorded)."""
    path: str | None = None
    """Structured ``fetch``: agent path of the workspace file it wrote or found (the schema-0 runs' only
    record of the fetch besides the observation)."""
    new: bool | None = None
    """Structured ``fetch``: True = it wrote the file, False = the workspace already held it."""
    source: str | None = None
    """The page a call materialized or read: structured ``fetch``'s canonical URL or docid, the transient
    profiles' ``open``/``visit``/``find`` page."""
    refused: bool | None = None
    """True when the profile refused the call (fte-single-grep's grep without one fetched file)."""
    summary_usage: dict[str, Any] | None = None
    """Token usage of a model the tool called itself (visit-summary's reader model), summed into the
    run's ``summary_usage``."""
    timed_out: bool | None = None
    """``bash``: the command was stopped at the sandbox's time limit."""


class ToolCallEvent(_Event):
    """One tool call and its observation."""

    type: Literal["tool_call"] = "tool_call"
    turn: int = 0
    """Turn number."""
    id: str | None = None
    """The call's id."""
    name: str = ""
    """Tool name."""
    arguments: dict[str, Any] | None = None
    """Parsed arguments (None when they were not a JSON object)."""
    raw_arguments: str | None = None
    """The arguments as the model sent them."""
    observation: str = ""
    """What the model was shown."""
    error: bool = False
    """The call failed (a tool error; a shell command's exit status is not one)."""
    duration_s: float | None = None
    """Seconds the call took."""
    meta: ToolMeta = Field(default_factory=ToolMeta)
    """The profile's facts about the call."""
    salvaged: bool | None = None
    """True for a call taken from text (``text_tool_call``)."""


class NudgeEvent(_Event):
    """The loop told the model something (no tool call; a reply cut at max_tokens; a stuck loop)."""

    type: Literal["nudge"] = "nudge"
    turn: int = 0
    """Turn number."""
    kind: str | None = None
    """``no_tool_call``, ``reply_cut`` or ``stuck`` (the stuck detector's notice, ``agent.stuck_repeats``)."""
    message: str = ""
    """The text sent."""
    tool: str | None = None
    """``stuck``: the tool of the repeated call (else absent)."""
    repeats: int | None = None
    """``stuck``: how many times in a row the same call gave the same observation (else absent)."""


class FinalAnswerRequestEvent(_Event):
    """The loop asked for the final answer (context or turns exhausted)."""

    type: Literal["final_answer_request"] = "final_answer_request"
    turn: int = 0
    """Turn number."""
    message: str = ""
    """The text sent."""


class ErrorEvent(_Event):
    """Why a run stopped early, or a model call failed."""

    type: Literal["error"] = "error"
    turn: int = 0
    """Turn number."""
    message: str = ""
    """The error."""
    error_class: str | None = None
    """The exception's class, for model errors."""
    status: int | None = None
    """HTTP status of a failed model call."""
    body: str | None = None
    """The server's answer to a failed model call."""


class EndEvent(_Event):
    """The run ended (written before ``result.json``)."""

    type: Literal["end"] = "end"
    stop_reason: str = ""
    """The stop reason (:mod:`fte_shell.stops`)."""
    answer: str | None = None
    """The final answer, if any."""
    turns: int = 0
    """Model turns."""
    wall_s: float | None = None
    """Wall-clock seconds."""
    answer_unclosed: bool | None = None
    """True when the answer tag was not closed (only then present)."""
    cost_usd: float | None = None
    """What the run's model calls cost in USD (only when the price is known)."""
    answer_unescaped: bool | None = None
    """True when the answer tags were written HTML-escaped and the answer unescaped (only then present)."""


class ContextEditEvent(_Event):
    """The context policy changed earlier messages of what is sent (docs/run.md "Context strategies")."""

    type: Literal["context_edit"] = "context_edit"
    turn: int = 0
    """Turn number (the request the edit was made for)."""
    strategy: str = ""
    """The policy's label (``keep_recent:5``, ``discard_all`` …)."""
    messages_before: int = 0
    """Messages of the kept conversation."""
    messages_after: int = 0
    """Messages sent."""
    tokens_before: int = 0
    """Estimated prompt tokens of the kept conversation."""
    tokens_after: int = 0
    """Estimated prompt tokens of what was sent."""
    cleared: list[str] = Field(default_factory=list)
    """Ids of the tool calls whose results were cleared or dropped by this edit (not by earlier ones)."""
    note: str | None = None
    """What the policy says it did, if anything."""
    escalated: bool = False
    """The strategy's own edit still left the prompt over the window, so the oldest steps were dropped too."""
    usage: dict[str, int] | None = None
    """Usage of the edit's model call (``summary``; in ``result.json``'s ``summary_usage``)."""
    state: dict[str, Any] | None = None
    """The strategy's whole state after the edit (``cut``, ``note``, ``cleared``, ``summary``): what a resumed
    run restores, so it sends what the model would have seen (``fte_shell.episode.resume``). Absent in runs
    written before resume existed."""
    replayed: bool | None = None
    """True: re-recorded by a resumed run from its own trajectory (no model call; the summary re-used)."""


class OtherEvent(_Event):
    """An event of a type this version does not know (kept as it is)."""

    type: str


KnownEvent = Annotated[
    StartEvent | WarningEvent | ModelCallEvent | RetryEvent | TextToolCallEvent | ToolCallEvent | NudgeEvent
    | FinalAnswerRequestEvent | ErrorEvent | EndEvent | ContextEditEvent | ForkEvent | ResumeEvent,
    Field(discriminator="type"),
]
Event = KnownEvent | OtherEvent
EVENT_TYPES: dict[str, type[_Event]] = {
    m.model_fields["type"].default: m
    for m in (StartEvent, WarningEvent, ModelCallEvent, RetryEvent, TextToolCallEvent, ToolCallEvent,
              NudgeEvent, FinalAnswerRequestEvent, ErrorEvent, EndEvent, ContextEditEvent, ForkEvent, ResumeEvent)
}
"""The known event types and their models."""

_KNOWN: TypeAdapter[Any] = TypeAdapter(KnownEvent)


def schema_version(raw_events: list[dict[str, Any]]) -> int:
    """The schema of a run from its raw events (the start event's ``schema_version``; 0 when absent)."""
    for ev in raw_events:
        if ev.get("type") == "start":
            v = ev.get("schema_version")
            return v if isinstance(v, int) and not isinstance(v, bool) else 0
    return 0


def convert(raw: dict[str, Any], version: int) -> dict[str, Any]:
    """One raw event of a run of schema ``version`` in the current schema's shape (a copy).

    Schema 0 → 1: the start event gets ``schema_version`` 0 (so readers can tell); the fetch and search
    facts stay absent (they were not recorded; ``meta.fetches``/``searches`` read None)."""
    ev = dict(raw)
    if ev.get("type") == "start" and "schema_version" not in ev:
        ev["schema_version"] = version
    if ev.get("type") == "tool_call" and not isinstance(ev.get("meta"), dict):
        ev["meta"] = {}
    return ev


def parse_event(raw: dict[str, Any]) -> Event:
    """The typed model of one (converted) event; a known type whose fields do not fit, or an unknown type,
    becomes an :class:`OtherEvent` holding every key (nothing is lost)."""
    if raw.get("type") in EVENT_TYPES:
        try:
            return _KNOWN.validate_python(raw)  # type: ignore[no-any-return]
        except ValidationError:
            pass
    return OtherEvent.model_validate({**raw, "type": str(raw.get("type") or "")})


def typed_events(raw_events: list[dict[str, Any]]) -> list[Event]:
    """Typed, converted events of one run's raw events."""
    version = schema_version(raw_events)
    return [parse_event(convert(ev, version)) for ev in raw_events]


def event_dict(ev: Event) -> dict[str, Any]:
    """An event as the JSON object the writer writes (fields left unset are left out)."""
    return ev.model_dump(mode="json", exclude_unset=True)

