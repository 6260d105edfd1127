"""Building a :class:`RunConfig`: defaults < the TOML file < the environment < flags."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..errors import ConfigError
from .run import RunConfig
from .secrets import SECRETS


def _format_validation_error(err: ValidationError, source: str) -> str:
    lines = [f"invalid configuration in {source}:"]
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"])
        if e["type"] == "extra_forbidden":
            lines.append(f"  unknown key '{loc}'")
        else:
            lines.append(f"  {loc}: {e['msg']}")
    return "\n".join(lines)


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Nested dicts merged: ``over`` wins, ``None`` values in ``over`` are skipped."""
    out = dict(base)
    for k, v in over.items():
        if v is None:
            continue
        if isinstance(v, dict):
            out[k] = deep_merge(out[k] if isinstance(out.get(k), dict) else {}, v)
        else:
            out[k] = v
    return out


ENV_VARS: dict[str, tuple[str, ...]] = {
    "OPENAI_BASE_URL": ("model", "base_url"),
    "OPENAI_MODEL": ("model", "model"),
    **{s.env: s.path for s in SECRETS},
}
"""Environment variables read by :func:`load_config` (they override the TOML file; flags override them):
two endpoint settings and every secret (:data:`~fte_shell.config.secrets.SECRETS`), as variable -> path of keys."""


def env_overrides(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The nested settings given by the environment (:data:`ENV_VARS`; empty variables are ignored)."""
    env = os.environ if environ is None else environ
    out: dict[str, Any] = {}
    for var, (*tables, key) in ENV_VARS.items():
        if env.get(var):
            table = out
            for name in tables:
                table = table.setdefault(name, {})
            table[key] = env[var]
    return out


def load_config(
    path: Path | None = None,
    overrides: dict[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> RunConfig:
    """Build a :class:`RunConfig`: defaults < the TOML file at ``path`` < the environment
    (:data:`ENV_VARS`, from ``environ`` or ``os.environ``) < ``overrides`` (nested dicts, e.g. from CLI
    flags; ``None`` values are ignored).

    Raises :class:`ConfigError` naming the offending key.
    """
    data: dict[str, Any] = {}
    source = "defaults"
    if path is not None:
        source = str(path)
        try:
            data = tomllib.loads(Path(path).read_text())
        except FileNotFoundError as e:
            raise ConfigError(f"config file not found: {path}") from e
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"config file {path} is not valid TOML: {e}") from e
    data = deep_merge(data, env_overrides(environ))
    if overrides:
        data = deep_merge(data, overrides)
    try:
        return RunConfig.model_validate(data)
    except ValidationError as e:
        raise ConfigError(_format_validation_error(e, source)) from e
