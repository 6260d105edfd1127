"""The root of the TOML file: one table per model."""

from __future__ import annotations

from pydantic import Field

from .agent import AgentConfig
from .base import StrictModel
from .benchmark import BenchmarkOptions
from .budget import BudgetConfig
from .judge import JudgeOptions
from .model import ModelConfig
from .sandbox import SandboxConfig
from .search import SearchConfig, SnapshotConfig


class RunConfig(StrictModel):
    """Everything one run needs; the root of the TOML file."""

    model: ModelConfig = Field(default_factory=ModelConfig)
    """The agent's model endpoint."""

    agent: AgentConfig = Field(default_factory=AgentConfig)
    """The loop and profile."""

    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    """The container (shell profile) and the fetch policy (every profile)."""

    search: SearchConfig = Field(default_factory=SearchConfig)
    """The search backend."""

    snapshot: SnapshotConfig = Field(default_factory=SnapshotConfig)
    """Record/replay every page and search as WARC (off unless ``dir`` is set)."""

    judge: JudgeOptions = Field(default_factory=JudgeOptions)
    """How runs are graded (``fte-shell judge``; not part of a run's config digest)."""

    benchmark: BenchmarkOptions = Field(default_factory=BenchmarkOptions)
    """Options of the dataset plugins (``fte-shell bench``: GAIA's text-only subset, FRAMES's closed world)."""

    budget: BudgetConfig = Field(default_factory=BudgetConfig)
    """What a ``bench`` sweep may spend in all (``--max-cost``, ``--max-tokens-total``)."""
