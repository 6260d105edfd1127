"""Sanity checks of a sweep's runs that point at the model set-up rather than the interface."""

from __future__ import annotations

from collections.abc import Sequence

from .metrics import RunMetrics


def tool_free_warnings(runs: Sequence[RunMetrics]) -> list[str]:
    """One warning per profile none of whose runs made a single tool call: the model's tool calls were
    probably never parsed (a misconfigured model looks like a bad interface)."""
    by_profile: dict[str, list[RunMetrics]] = {}
    for r in runs:
        by_profile.setdefault(r.profile, []).append(r)
    return [
        f"profile '{p}': none of its {len(rs)} run(s) made a tool call — check the model set-up (native tool "
        "calls parsed by the server? docs/run.md 'Server kinds': model.parse_text_tool_calls, "
        "agent.first_tool_choice) before reading its numbers as the interface's"
        for p, rs in sorted(by_profile.items())
        if rs and all(r.calls == 0 for r in rs)
    ]
