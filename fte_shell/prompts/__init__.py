"""Prompt text: the system prompt body, the per-profile addenda and the tool descriptions.

Everything the model reads about its tools lives in this package as data files, written in this project's
own words:

- ``system.md``: the fixed body of the system prompt (replaceable with ``agent.system_prompt_file``);
- ``addendum_<profile>.md``: the optional per-profile addendum (``-`` in a profile name becomes ``_``);
- ``tools.toml``: the default tool and parameter descriptions (overridable entry by entry with
  ``agent.tool_descriptions_file``; see the comment at the top of that file for its shape);
- ``summary_extractor.md``: the fixed instructions of the visit-summary reader model.
- ``corpus_in_box.md``: added to the shell profile's addendum when ``[sandbox] corpus`` puts the corpus in
  the box at /corpus.

The system prompt is ``body + "\\n\\n" + addendum (if any) + "\\n\\nCurrent date: YYYY-MM-DD"``.
"""

from __future__ import annotations

import copy
import datetime as _dt
import re
import tomllib
from collections.abc import Collection, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..errors import ConfigError

PROMPTS_DIR = Path(__file__).resolve().parent
"""Directory holding the prompt files of this package."""

_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_PLACEHOLDER_RE = re.compile(r"\{(\w+)\}")


def read_prompt(name: str) -> str:
    """Text of the packaged prompt file ``name`` (e.g. ``"system.md"``), trailing whitespace stripped."""
    return (PROMPTS_DIR / name).read_text(encoding="utf-8").rstrip()


def profile_addendum(profile: str) -> str:
    """The packaged addendum of ``profile`` (``""`` if that profile has none)."""
    path = PROMPTS_DIR / f"addendum_{profile.replace('-', '_')}.md"
    return path.read_text(encoding="utf-8").rstrip() if path.exists() else ""


def summary_instructions() -> str:
    """The fixed system prompt of the visit-summary reader model."""
    return read_prompt("summary_extractor.md")


def today() -> str:
    """Today's date (UTC) as ``YYYY-MM-DD``."""
    return _dt.datetime.now(_dt.UTC).date().isoformat()


def system_prompt(addendum: str = "", date: str | None = None, override_file: Path | None = None) -> str:
    """Build the system prompt: the fixed body (or ``override_file``'s text), the profile ``addendum`` when
    not empty, and ``Current date: YYYY-MM-DD`` (``date``, or today in UTC when None).

    Raises :class:`ConfigError` when ``override_file`` cannot be read or ``date`` is not ``YYYY-MM-DD``.
    """
    if override_file is not None:
        try:
            body = Path(override_file).read_text(encoding="utf-8").rstrip()
        except OSError as e:
            raise ConfigError(f"cannot read system prompt file {override_file}: {e.strerror or e}") from e
    else:
        body = read_prompt("system.md")
    if date is None:
        date = today()
    elif not _DATE_RE.match(date):
        raise ConfigError(f"agent.current_date must look like YYYY-MM-DD, got {date!r}")
    parts = [body]
    if addendum.strip():
        parts.append(addendum.strip())
    parts.append(f"Current date: {date}")
    return "\n\n".join(parts)


class ToolText(BaseModel):
    """The words the model reads about one tool."""

    model_config = ConfigDict(extra="forbid")

    description: str
    """What the tool does, its bounds and its output format."""

    parameters: dict[str, str] = Field(default_factory=dict)
    """Description of each parameter, by parameter name."""


def fill_placeholders(text: str, values: Mapping[str, object]) -> str:
    """Replace ``{name}`` by ``values[name]`` for the names present in ``values``; leave other braces."""

    def sub(m: re.Match[str]) -> str:
        key = m.group(1)
        return str(values[key]) if key in values else m.group(0)

    return _PLACEHOLDER_RE.sub(sub, text)


def _is_tool_table(value: Any) -> bool:
    return isinstance(value, dict) and ("description" in value or "parameters" in value)


def _check_tool_table(source: str, where: str, value: Any) -> None:
    if not isinstance(value, dict):
        raise ConfigError(f"{source}: [{where}] must be a table")
    for key, v in value.items():
        if key == "description":
            if not isinstance(v, str) or not v.strip():
                raise ConfigError(f"{source}: {where}.description must be a non-empty string")
        elif key == "parameters":
            if not isinstance(v, dict) or not all(isinstance(x, str) for x in v.values()):
                raise ConfigError(f"{source}: {where}.parameters must be a table of strings")
        else:
            raise ConfigError(f"{source}: unknown key '{where}.{key}' (expected description or parameters)")


class ToolDescriptions:
    """Default tool descriptions merged with an optional user override file.

    Lookup order for ``(profile, tool)``: override ``[profile.tool]``, override ``[tool]``, default
    ``[profile.tool]``, default ``[tool]`` — for the description and for each parameter separately.
    """

    def __init__(self, defaults: dict[str, Any], override: dict[str, Any] | None = None):
        self._defaults = defaults
        self._override = override or {}

    @classmethod
    def load(cls, override_file: Path | None = None, profiles: Collection[str] = ()) -> ToolDescriptions:
        """Load the packaged defaults and, if given, the user's ``override_file``.

        Raises :class:`ConfigError` for an unreadable or invalid file, or one that names an unknown tool
        or profile (``profiles`` are the known profile names).
        """
        defaults = _packaged_defaults()
        if override_file is None:
            return cls(defaults)
        source = str(override_file)
        try:
            data = tomllib.loads(Path(override_file).read_text(encoding="utf-8"))
        except OSError as e:
            raise ConfigError(f"cannot read tool descriptions file {source}: {e.strerror or e}") from e
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"tool descriptions file {source} is not valid TOML: {e}") from e
        tools = {k for k, v in defaults.items() if _is_tool_table(v)}
        for key, value in data.items():
            if key in tools:
                _check_tool_table(source, key, value)
            elif key in profiles:
                if not isinstance(value, dict):
                    raise ConfigError(f"{source}: [{key}] must be a table of tool tables")
                for tool, tv in value.items():
                    if tool not in tools:
                        raise ConfigError(f"{source}: unknown tool '{key}.{tool}' (known: {', '.join(sorted(tools))})")
                    _check_tool_table(source, f"{key}.{tool}", tv)
            else:
                raise ConfigError(
                    f"{source}: unknown tool or profile '{key}' (tools: {', '.join(sorted(tools))}; "
                    f"profiles: {', '.join(profiles)})"
                )
        return cls(defaults, data)

    def _layers(self, profile: str, tool: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for data in (self._override, self._defaults):
            scoped = data.get(profile, {})
            if isinstance(scoped, dict) and _is_tool_table(scoped.get(tool)):
                out.append(scoped[tool])
            if _is_tool_table(data.get(tool)):
                out.append(data[tool])
        return out

    def overridden_parameters(self, profile: str, tool: str) -> set[str]:
        """Parameter names the user's file describes for ``tool`` (to check they exist)."""
        names: set[str] = set()
        for table in (self._override.get(profile, {}).get(tool, {}), self._override.get(tool, {})):
            if isinstance(table, dict):
                names.update(table.get("parameters", {}))
        return names

    def describe(self, profile: str, tool: str, values: Mapping[str, object] | None = None) -> ToolText:
        """The description of ``tool`` as offered by ``profile``, placeholders filled from ``values``.

        Raises :class:`ConfigError` when no description exists for the tool (a packaging bug).
        """
        layers = self._layers(profile, tool)
        description = next((t["description"] for t in layers if "description" in t), None)
        if description is None:
            raise ConfigError(f"no description for tool '{tool}' of profile '{profile}' in tools.toml")
        params: dict[str, str] = {}
        for table in reversed(layers):
            params.update(table.get("parameters", {}))
        vals = values or {}
        return ToolText(
            description=fill_placeholders(description.strip(), vals),
            parameters={k: fill_placeholders(v.strip(), vals) for k, v in params.items()},
        )


@lru_cache(maxsize=1)
def _packaged_defaults_cached() -> dict[str, Any]:
    return tomllib.loads((PROMPTS_DIR / "tools.toml").read_text(encoding="utf-8"))


def _packaged_defaults() -> dict[str, Any]:
    """The packaged tools.toml, parsed once per process (a parse took about 1 ms, under load 2, per episode), a copy per call."""
    return copy.deepcopy(_packaged_defaults_cached())


__all__ = [
    "PROMPTS_DIR",
    "ToolDescriptions",
    "ToolText",
    "fill_placeholders",
    "profile_addendum",
    "read_prompt",
    "summary_instructions",
    "system_prompt",
    "today",
]
