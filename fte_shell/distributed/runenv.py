"""What travels in the Ray runtime environment of a distributed sweep's tasks and actors: the secrets
(the model key, the search backends' keys), removed from the configuration shipped with each task and put back from
the environment on the node, and the option that gives a remote function that environment."""

from __future__ import annotations

import os
from typing import Any

from pydantic import SecretStr

from ..config import SECRETS, RunConfig


def secret_env(cfg: RunConfig) -> dict[str, tuple[str, ...] | None]:
    """Every secret of the configuration (:data:`fte_shell.config.SECRETS`) and the search backends'
    environment-only ones (:func:`fte_shell.search.registry.secrets`): variable -> its path of keys in the
    config (None: only the environment carries it)."""
    from ..search.registry import secrets

    out: dict[str, tuple[str, ...] | None] = {s.env: s.path for s in SECRETS}
    for s in secrets(cfg.search):
        out.setdefault(s.env, ("search", s.key) if s.key else None)
    return out


def _table(cfg: Any, path: tuple[str, ...]) -> Any:
    for name in path[:-1]:
        cfg = getattr(cfg, name)
    return cfg


def strip_secrets(cfg: RunConfig) -> tuple[RunConfig, dict[str, str]]:
    """``cfg`` without its secrets, and the secrets as runtime-environment variables (a variable-only one
    travels from the driver's environment)."""
    out = cfg.model_copy(deep=True)
    env: dict[str, str] = {}
    for var, path in secret_env(cfg).items():
        value = getattr(_table(out, path), path[-1]) if path else os.environ.get(var)
        if value is not None:
            env[var] = value.get_secret_value() if isinstance(value, SecretStr) else str(value)
            if path:
                setattr(_table(out, path), path[-1], None)
    return out, env


def restore_secrets(cfg: RunConfig) -> None:
    """Put the secrets from this process's environment (the runtime env) back into ``cfg``."""
    for var, path in secret_env(cfg).items():
        if path and os.environ.get(var) and getattr(_table(cfg, path), path[-1]) is None:
            setattr(_table(cfg, path), path[-1], SecretStr(os.environ[var]))


def with_env(runtime_env: dict[str, Any] | None) -> dict[str, Any]:
    """``ray.remote``/``.options`` keyword arguments giving a function ``runtime_env`` (none: nothing)."""
    return {"runtime_env": runtime_env} if runtime_env else {}
