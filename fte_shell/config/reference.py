"""The reference: every option, its default and its docstring, as a commented TOML file."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from .load import ENV_VARS
from .run import RunConfig


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str | Path):
        return json.dumps(str(v))
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"no TOML form for {v!r}")


def _table_lines(model: type[BaseModel], table: str) -> list[str]:
    doc = " ".join((model.__doc__ or "").split())
    lines = [f"[{table}]", f"# {doc}"]
    nested: list[tuple[str, type[BaseModel]]] = []
    for name, field in model.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            nested.append((name, ann))
            continue
        lines.append("")
        for doc_line in (field.description or "").splitlines():
            lines.append(f"# {doc_line.strip()}".rstrip())
        default = field.get_default(call_default_factory=True)
        if default is None:
            lines.append(f"# {name} =  (unset by default)")
        elif isinstance(default, BaseModel):
            lines.append(f"# {name} =  (a table of the same keys as [model]; unset by default)")
        else:
            if hasattr(default, "get_secret_value"):
                default = default.get_secret_value()
            lines.append(f"{name} = {_toml_value(default)}")
    for name, sub in nested:
        lines += ["", *_table_lines(sub, f"{table}.{name}")]
    return lines


def reference_toml() -> str:
    """Every configuration option with its default and its docstring, as a commented TOML file that
    :func:`load_config` accepts unchanged (``fte-shell config``; also docs/config.md)."""
    out = [
        "# fte-shell configuration: every option with its default. Pass with --config FILE.",
        *textwrap.wrap(f"Precedence: defaults < this file < environment ({', '.join(ENV_VARS)}) < command-line "
                       "flags. Unknown keys are an error that names the key.", 104,
                       initial_indent="# ", subsequent_indent="# "),
    ]
    for name, field in RunConfig.model_fields.items():
        out += ["", *_table_lines(field.annotation, name)]  # type: ignore[arg-type]
    return "\n".join(out) + "\n"
