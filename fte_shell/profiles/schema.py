"""A tool's declared arguments: :class:`ToolArgs` (a pydantic model whose fields become the tool's JSON
schema: :func:`json_type`), and what the model is told when a call's arguments do not fit
(:func:`validation_problem`). How a call's raw arguments are read: :func:`.base.parse_arguments`."""

from __future__ import annotations

import types
import typing
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError


class ToolArgs(BaseModel):
    """Base of every tool's argument model: unknown arguments are refused."""

    model_config = ConfigDict(extra="forbid")


def json_type(annotation: Any) -> dict[str, Any]:
    """JSON-schema fragment of a field annotation (str, int, float, bool, Literal[...], X | None)."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(members) == 1:
            return json_type(members[0])
        raise TypeError(f"unsupported union in tool arguments: {annotation!r}")
    if origin is Literal:
        values = list(typing.get_args(annotation))
        return {"type": "string", "enum": values}
    simple = {str: "string", int: "integer", float: "number", bool: "boolean"}
    if annotation in simple:
        return {"type": simple[annotation]}
    raise TypeError(f"unsupported tool argument type: {annotation!r}")


def _type_name(annotation: Any) -> str:
    frag = json_type(annotation)
    if "enum" in frag:
        return " | ".join(repr(v) for v in frag["enum"])
    return str(frag["type"])


def describe_args(model: type[ToolArgs]) -> str:
    """The arguments a tool expects, for an error message (``query (string, required), n (integer)``)."""
    parts = []
    for name, field in model.model_fields.items():
        req = ", required" if field.is_required() else ""
        parts.append(f"{name} ({_type_name(field.annotation)}{req})")
    return ", ".join(parts) if parts else "no arguments"


def validation_problem(tool: str, args: type[ToolArgs], err: ValidationError) -> str:
    """One line the model can act on: what was wrong and what the tool expects."""
    problems = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "arguments"
        if e["type"] == "missing":
            problems.append(f"missing required argument '{loc}'")
        elif e["type"] == "extra_forbidden":
            problems.append(f"unexpected argument '{loc}'")
        else:
            problems.append(f"'{loc}': {e['msg']}")
    return f"invalid arguments for {tool}: {'; '.join(problems)}. Expected: {describe_args(args)}."
