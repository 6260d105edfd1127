"""Why a run ended, and which endings are failures of the infrastructure rather than results.

A run's ``stop_reason`` (in ``result.json`` and the trajectory's ``end`` event) is one of the names below.
*Result* stops are outcomes of the agent under study: they are scored (an unanswered run is wrong).
*Infrastructure* stops say the harness, the model endpoint, the sandbox or the search backend failed: such a
run is not a result. A sweep writes it to ``failures.jsonl``, leaves it out of every score and mean, and
redoes it on resume. docs/ARCHITECTURE.md lists what each name means.
"""

from __future__ import annotations

RESULT_STOP_REASONS: frozenset[str] = frozenset({
    "answer",            # the model gave an <answer>
    "max_turns",         # agent.max_turns reached
    "time_budget",       # agent.time_budget_s reached
    "errors",            # agent.max_consecutive_errors turns in a row whose tool calls all failed
    "context_overflow",  # the conversation no longer fits the model's context window
    "too_many_nudges",   # agent.max_nudges replies in a row with neither a tool call nor an answer
    "repeated_reply",    # the same reply several times in a row (a degenerate loop)
    "reply_cut",         # two replies in a row cut at max_tokens (finish_reason "length")
})

INFRA_STOP_REASONS: frozenset[str] = frozenset({
    "endpoint_unavailable",  # connection errors, timeouts, 429/5xx after the retries
    "auth",                  # HTTP 401/403 from the model endpoint
    "bad_request",           # another 4xx the server refused (its message is recorded)
    "model_error",           # older runs: any model error after retries (before the classes above)
    "sandbox_unavailable",   # the container engine could not start or keep the sandbox
    "search_unavailable",    # the search backend failed
    "interrupted",           # Ctrl-C / SIGTERM
    "crashed",               # an unexpected exception in a profile (a harness bug)
    "failed",                # the harness raised outside the loop (written by the sweep)
})


def is_infra_failure(stop_reason: str | None) -> bool:
    """True when a run that ended with ``stop_reason`` is a failure of the infrastructure, not a result.
    A missing stop reason (no result) counts as a failure too."""
    return stop_reason is None or stop_reason in INFRA_STOP_REASONS
