"""Why a run ended: THE table of stop reasons (each name once, with its class and the resource it blames).

A run's ``stop_reason`` (in ``result.json`` and the trajectory's ``end`` event) is one of the names below.
*Result* stops are outcomes of the agent under study: they are scored (an unanswered run is wrong).
*Infrastructure* stops say the harness, the model endpoint, the sandbox, the search backend or the disk
failed: such a run is not a result. A sweep writes it to ``failures.jsonl``, leaves it out of every score
and mean, and redoes it on resume. ``blames`` names the resource a sweep pauses and probes when a run
ends with that stop (None: nothing to probe; the run is left for the next resume).

Everything else is derived from :data:`STOPS`: :data:`StopReason` (the Literal type of the field),
:data:`RESULT_STOP_REASONS`, :data:`INFRA_STOP_REASONS`, :data:`RESOURCE_OF`. An exception carries its
stop reason as a ``stop_reason`` class attribute (:mod:`fte_shell.errors`); :func:`stop_of_exception`
reads it along the exception's cause chain.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass
from typing import Literal, get_args

Resource = Literal["endpoint", "sandbox", "search", "disk", "snapshot", "harness"]


@dataclass(frozen=True)
class Stop:
    """One stop reason."""

    name: str
    infra: bool
    """True: a failure of the infrastructure (never scored); False: a result of the agent."""
    blames: Resource | None
    """The resource the sweep pauses and probes when a run ends so (None: nothing to probe)."""
    meaning: str


STOPS: tuple[Stop, ...] = (
    # --- results --------------------------------------------------------------------------------------
    Stop("answer", False, None, "the model gave an <answer>"),
    Stop("max_turns", False, None, "agent.max_turns reached"),
    Stop("time_budget", False, None, "agent.time_budget_s reached"),
    Stop("errors", False, None, "agent.max_consecutive_errors turns in a row whose tool calls all failed"),
    Stop("context_overflow", False, None, "the conversation no longer fits the model's context window"),
    Stop("too_many_nudges", False, None, "agent.max_nudges replies in a row with neither a tool call nor an answer"),
    Stop("repeated_reply", False, None, "the same reply several times in a row (a degenerate loop)"),
    Stop("reply_cut", False, None, "two replies in a row cut at max_tokens (finish_reason length); a "
         "call written as text that was whole before the cut makes its reply no cut one"),
    Stop("stuck", False, None, "the same tool call with the same observation once more after the stuck notice "
                               "(agent.stuck_repeats in a row get the notice; fte_shell.agent.stuck)"),
    Stop("token_budget", False, None, "agent.max_total_tokens spent (the run's prompt + completion tokens)"),
    Stop("abandoned", False, None, "the driver closed the episode without finish: no answer, scored as unanswered "
                                   "(an MCP client or trainer that walks away; fte_shell.episode.Episode)"),
    # --- infrastructure ---------------------------------------------------------------------------------
    Stop("endpoint_unavailable", True, "endpoint", "connection errors, timeouts, 429/5xx after the retries"),
    Stop("auth", True, None, "HTTP 401/403 from the model endpoint"),
    Stop("bad_request", True, None, "another 4xx the server refused (its message is recorded)"),
    Stop("model_error", True, "endpoint", "older runs: any model error after retries (before the classes above)"),
    Stop("sandbox_unavailable", True, "sandbox", "the sandbox provider could not start or keep the sandbox"),
    Stop("search_unavailable", True, "search", "the search backend failed"),
    Stop("snapshot_miss", True, None, "replay with snapshot.on_miss = fail-run: a page or search not in the snapshot"),
    Stop("fork_mismatch", True, None, "a fork's replayed prefix differs from its parent's (an observation, a workspace "
                                      "file, the shell's cwd): not a paired continuation (fte_shell.episode.fork)"),
    Stop("disk_full", True, "disk", "no space left on the device of the run or sweep directory"),
    Stop("interrupted", True, None, "Ctrl-C / SIGTERM"),
    Stop("crashed", True, None, "an unexpected exception in a profile or the loop (a harness bug)"),
    Stop("failed", True, None, "the harness raised outside the loop, or the run wrote no result (the sweep's record)"),
)

BY_NAME: dict[str, Stop] = {s.name: s for s in STOPS}

StopReason = Literal[
    "answer", "max_turns", "time_budget", "errors", "context_overflow", "too_many_nudges", "repeated_reply",
    "reply_cut", "stuck", "token_budget", "endpoint_unavailable", "auth", "bad_request", "model_error",
    "sandbox_unavailable", "search_unavailable", "snapshot_miss", "fork_mismatch", "disk_full", "interrupted", "abandoned",
    "crashed", "failed",
]
"""Every name of :data:`STOPS` (checked against the table on import)."""

if set(get_args(StopReason)) != set(BY_NAME) or len(BY_NAME) != len(STOPS):  # pragma: no cover - a typo here
    raise AssertionError("fte_shell.stops: StopReason and STOPS disagree")

RESULT_STOP_REASONS: frozenset[str] = frozenset(s.name for s in STOPS if not s.infra)
INFRA_STOP_REASONS: frozenset[str] = frozenset(s.name for s in STOPS if s.infra)
RESOURCE_OF: dict[str, str] = {s.name: s.blames for s in STOPS if s.blames is not None}
"""Stop reasons that mean a piece of infrastructure stopped answering: the sweep pauses and probes it."""


NO_RESULT = "incomplete"
"""Not a stop reason: what the metrics and the report show as the stop of a run without ``result.json``
(it never ended; like an infrastructure failure, not a result)."""

GAVE_UP: dict[str, str] = {}
"""``{resource: the sweep's status}`` when a sweep gives up waiting for a resource: the first stop reason
of :data:`STOPS` that blames it (``endpoint_unavailable``, ``sandbox_unavailable``, ``search_unavailable``)."""
for _s in STOPS:
    if _s.blames is not None:
        GAVE_UP.setdefault(_s.blames, _s.name)

SweepStatus = Literal["running", "finished", "interrupted", "budget_reached", "endpoint_unavailable",
                      "sandbox_unavailable", "search_unavailable", "disk_full"]
"""A sweep's ``status`` (``sweep.json``): ``running``, ``finished``, ``interrupted`` (the stop reason of
that name: SIGINT/SIGTERM), ``budget_reached``, or the :data:`GAVE_UP` status of the resource it gave up on."""

if set(get_args(SweepStatus)) != {"running", "finished", "budget_reached", "interrupted", *GAVE_UP.values()} \
        or "interrupted" not in BY_NAME:  # pragma: no cover - a typo here
    raise AssertionError("fte_shell.stops: SweepStatus and STOPS disagree")

RunState = Literal["done", "failed", "partial", "new"]
"""A run directory as a sweep finds it: ``done`` (a result: its stop reason is a result), ``failed`` (it
ended for an infrastructure reason), ``partial`` (no readable ``result.json``), ``new`` (no directory)."""

RunStatus = Literal["correct", "wrong", "unjudged", "failed"]
"""A run as the report and the viewer count it: ``failed`` when it is not a result (an infrastructure
stop, or no result at all), else its primary verdict (``unjudged`` without one)."""


def is_infra_failure(stop_reason: str | None) -> bool:
    """True when a run that ended with ``stop_reason`` is a failure of the infrastructure, not a result.
    A missing or unknown stop reason (no result) counts as a failure too."""
    return stop_reason is None or stop_reason not in RESULT_STOP_REASONS


FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
"""``OSError`` numbers that mean the device (or the user's quota) is full: stop reason ``disk_full``."""


def exception_chain(e: BaseException, limit: int = 10) -> list[BaseException]:
    """``e`` and the exceptions that caused it (``__cause__``, else ``__context__``), at most ``limit``."""
    seen: list[BaseException] = []
    x: BaseException | None = e
    while x is not None and x not in seen and len(seen) < limit:
        seen.append(x)
        x = x.__cause__ or x.__context__
    return seen


def stop_of_exception(e: BaseException, default: str = "failed") -> str:
    """The stop reason an exception (or one in its cause/context chain) names through its ``stop_reason``
    attribute; an ``OSError`` of a full device (:data:`FULL_ERRNOS`) is ``disk_full``; else ``default``."""
    for x in exception_chain(e):
        name = getattr(x, "stop_reason", None)
        if isinstance(name, str) and name in BY_NAME:
            return name
        if isinstance(x, OSError) and x.errno in FULL_ERRNOS:
            return "disk_full"
    return default
