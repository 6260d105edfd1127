"""fte-shell: a sandboxed shell-environment search agent (Fetch-then-Explore with one bash tool).

Public API (names other tools script against; keep them stable)::

    from fte_shell import Sandbox, SandboxConfig, FetchPolicy
    with Sandbox(SandboxConfig()) as sb:
        obs = sb.run("echo hi")          # -> Observation(output, exit_code, timed_out, truncated, duration_s)

    from fte_shell import Episode, load_config   # one question driven by hand (docs/library.md)
    with Episode.open(load_config(None, {"agent": {"profile": "shell"}}), "Which …?", Path("runs/e1")) as ep:
        ep.call("bash", {"command": "fetch https://…"}); ep.finish(answer="…")

Heavy modules (docker, openai, crawl4ai) are imported lazily on first use of a name.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .config import (
    AgentConfig,
    FetchPolicy,
    ModelConfig,
    RunConfig,
    SandboxConfig,
    SearchConfig,
    load_config,
)
from .errors import FteError
from .version import __version__

# name -> module that defines it (imported on first access)
_LAZY: dict[str, str] = {
    "Sandbox": "fte_shell.sandbox",
    "Observation": "fte_shell.sandbox",
    "Workspace": "fte_shell.workspace",
    "FetchRecord": "fte_shell.workspace",
    "FetchService": "fte_shell.fetch",
    "Agent": "fte_shell.agent",
    "RunResult": "fte_shell.episode",
    "Episode": "fte_shell.episode",
    "run_question": "fte_shell.runner",
    "ScriptedServer": "fte_shell.standins.server",
}

__all__ = [
    "Agent",
    "AgentConfig",
    "Episode",
    "FetchPolicy",
    "FetchRecord",
    "FetchService",
    "FteError",
    "ModelConfig",
    "Observation",
    "RunConfig",
    "RunResult",
    "Sandbox",
    "SandboxConfig",
    "ScriptedServer",
    "SearchConfig",
    "Workspace",
    "__version__",
    "load_config",
    "run_question",
]
"""The eager names above plus every name of :data:`_LAZY` (imported on first access)."""


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'fte_shell' has no attribute {name!r}")
    value = getattr(importlib.import_module(mod), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:  # pragma: no cover
    from .agent import Agent
    from .episode import Episode, RunResult
    from .fetch import FetchService
    from .runner import run_question
    from .sandbox import Observation, Sandbox
    from .standins.server import ScriptedServer
    from .workspace import FetchRecord, Workspace
