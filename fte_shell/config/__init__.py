"""Configuration: pydantic models with ``extra="forbid"``, one docstring per field.

A TOML file mirrors these models table for table::

    [model]                 # ModelConfig       (config/model.py)
    [agent]                 # AgentConfig       (config/agent.py)
    [sandbox]               # SandboxConfig     (config/sandbox.py)
    [sandbox.docker]        # DockerConfig      (config/sandbox.py; also .podman, .bwrap)
    [sandbox.fetch_policy]  # FetchPolicy       (config/sandbox.py)
    [search]                # SearchConfig      (config/search.py)
    [snapshot]              # SnapshotConfig    (config/search.py)
    [judge]                 # JudgeOptions      (config/judge.py)
    [benchmark]             # BenchmarkOptions  (config/benchmark.py)
    [model.price]           # ModelPrice        (config/budget.py)
    [budget]                # BudgetConfig      (config/budget.py)

Unknown keys are an error that names the key. Flags and environment variables override the file
(see :func:`load_config`, config/load.py); :func:`reference_toml` (config/reference.py) prints every option.
"""

from __future__ import annotations

from .agent import AgentConfig
from .benchmark import BenchmarkOptions
from .budget import BudgetConfig, ModelPrice
from .context import STRATEGIES, ContextConfig
from .judge import JudgeOptions
from .load import ENV_VARS, deep_merge, env_overrides, load_config
from .model import ModelConfig
from .reference import reference_toml
from .run import RunConfig
from .sandbox import (
    BwrapConfig,
    DockerConfig,
    EngineBoxConfig,
    FetchPolicy,
    PodmanConfig,
    SandboxConfig,
    SandboxProviderName,
)
from .search import EmbeddingsConfig, SearchConfig, SnapshotConfig
from .secrets import SECRETS, ConfigSecret, secret_variable

__all__ = [
    "ENV_VARS",
    "SECRETS",
    "STRATEGIES",
    "AgentConfig",
    "BenchmarkOptions",
    "BudgetConfig",
    "BwrapConfig",
    "ConfigSecret",
    "ContextConfig",
    "DockerConfig",
    "EmbeddingsConfig",
    "EngineBoxConfig",
    "FetchPolicy",
    "JudgeOptions",
    "ModelConfig",
    "ModelPrice",
    "PodmanConfig",
    "RunConfig",
    "SandboxConfig",
    "SandboxProviderName",
    "SearchConfig",
    "SnapshotConfig",
    "deep_merge",
    "env_overrides",
    "load_config",
    "reference_toml",
    "secret_variable",
]
