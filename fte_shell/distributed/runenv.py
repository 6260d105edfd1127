"""What travels in the Ray runtime environment of a distributed sweep's tasks and actors: the secrets
(the model key, the search backends' keys), removed from the configuration shipped with each task and put back from
the environment on the node, and the option that gives a remote function that environment."""

from __future__ import annotations

import os
from typing import Any

from pydantic import SecretStr

from ..config import RunConfig

SECRET_ENV = {"OPENAI_API_KEY": ("model", "api_key")}
"""Secrets of a run and the environment variable (set in the task's Ray runtime environment) carrying
each to the node; the config shipped with the task has them removed. The search backends' come from their
plugins (:func:`secret_env`)."""


def secret_env(cfg: RunConfig) -> dict[str, tuple[str, str | None]]:
    """:data:`SECRET_ENV` and every search backend's secrets (:func:`fte_shell.search.registry.secrets`):
    variable -> (table, key); key None: the backend reads the variable only."""
    from ..search.registry import secrets

    return {**SECRET_ENV, **{s.env: ("search", s.key) for s in secrets(cfg.search)}}


def strip_secrets(cfg: RunConfig) -> tuple[RunConfig, dict[str, str]]:
    """``cfg`` without its secrets, and the secrets as runtime-environment variables (a variable-only one
    travels from the driver's environment)."""
    out = cfg.model_copy(deep=True)
    env: dict[str, str] = {}
    for var, (section, name) in secret_env(cfg).items():
        value = getattr(getattr(out, section), name) if name else os.environ.get(var)
        if value is not None:
            env[var] = value.get_secret_value() if isinstance(value, SecretStr) else str(value)
            if name:
                setattr(getattr(out, section), name, None)
    return out, env


def restore_secrets(cfg: RunConfig) -> None:
    """Put the secrets from this process's environment (the runtime env) back into ``cfg``."""
    for var, (section, name) in secret_env(cfg).items():
        if name and os.environ.get(var) and getattr(getattr(cfg, section), name) is None:
            setattr(getattr(cfg, section), name, SecretStr(os.environ[var]))


def with_env(runtime_env: dict[str, Any] | None) -> dict[str, Any]:
    """``ray.remote``/``.options`` keyword arguments giving a function ``runtime_env`` (none: nothing)."""
    return {"runtime_env": runtime_env} if runtime_env else {}
