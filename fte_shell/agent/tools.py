"""One tool call of a reply: checked (known tool? a JSON object as arguments?), run through the profile,
and recorded as a ``tool_call`` event — also when the profile crashed on it or an interrupt stopped it,
before the exception goes on, so the trajectory and ``result.json``'s tool-call counts always agree."""

from __future__ import annotations

import json
import time
from typing import Any

from ..errors import ToolError
from ..profiles import Profile, ToolResult
from ..record.rundir import RunWriter
from .replies import parse_arguments


def execute_call(
    profile: Profile, names: set[str], call: dict[str, Any], turn: int, rec: RunWriter, *, salvaged: bool = False
) -> tuple[str, ToolResult]:
    """Run one tool call (``{id, function: {name, arguments}}``, arguments raw) and record it; returns
    ``(call id, result)``. Unknown tools and bad arguments are error results the model can correct."""
    fn = call.get("function") or {}
    name = str(fn.get("name") or "")
    raw = fn.get("arguments")
    raw_s = raw if isinstance(raw, str) else json.dumps(raw)
    call_id = call.get("id") or f"call_{turn}"
    args: dict[str, Any] | None = None
    t = time.monotonic()

    def record(res: ToolResult) -> None:
        rec.event("tool_call", turn=turn, id=call_id, name=name, arguments=args, raw_arguments=raw_s,
                  observation=res.output, error=bool(res.error), duration_s=round(time.monotonic() - t, 4),
                  meta=res.meta, **({"salvaged": True} if salvaged else {}))

    if name not in names:
        avail = ", ".join(sorted(names)) or "none"
        res = ToolResult(output=f"Error: unknown tool '{name}'. Available tools: {avail}.", error=True)
    else:
        args, problem = parse_arguments(raw)
        if args is None:
            shown = raw_s if len(raw_s) <= 200 else raw_s[:200] + "…"
            res = ToolResult(output=f"Error: the arguments of '{name}' {problem}; they were: {shown}\n"
                             "Call it again with a JSON object as its arguments.", error=True)
        else:
            try:
                res = _run(profile, name, args)
            except BaseException as e:
                what = ("call was interrupted" if isinstance(e, KeyboardInterrupt)
                        else f"crashed: {e.__class__.__name__}: {e}")
                record(ToolResult(output=f"(the tool {what})", error=True))
                raise
    record(res)
    return call_id, res


def _run(profile: Profile, name: str, args: dict[str, Any]) -> ToolResult:
    try:
        return profile.execute(name, args)
    except ToolError as e:
        return ToolResult(output=f"Error: {e}", error=True)
    except (TypeError, KeyError, ValueError) as e:  # the model's arguments did not fit the tool
        return ToolResult(output=f"Error: bad arguments for '{name}': {e.__class__.__name__}: {e}", error=True)
