"""The profile's tools as a verifiers (v1) tool server: one MCP server per rollout, launched by verifiers
(``python -m fte_shell.rl.verifiers.toolset`` in the toolset's runtime, the host by default), holding one
fte-shell :class:`~fte_shell.episode.Episode` — the question's box, workspace and world — for the
rollout's life. Its tools are the profile's, under their own names (``bash`` for the shell profile), with
the profile's schemas; each call is recorded in the episode's run directory (``runs_dir``) and its
observation returned as the tool's text (a failed call an ``isError`` result): fte-shell's one MCP
adapter (:mod:`fte_shell.episode.as_mcp`), the one ``fte-shell mcp`` serves through.

The episode (and its box) closes when verifiers stops the server; a server whose launcher dies is killed
by the kernel (verifiers sets PR_SET_PDEATHSIG) and the sandbox's reaper removes its box.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import verifiers.v1 as vf

from ...config import load_config
from ...episode import Episode
from ...episode.as_mcp import serve_episode
from ...episode.host import EpisodeHost
from ...sandbox.ownership import write_owner_file

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

class FteShellToolsConfig(vf.ToolsetConfig):
    """How the tool server opens its episode: fte-shell's configuration (``--env.taskset.task.tools.*``)."""

    config_file: str | None = None
    """An fte-shell TOML configuration (``fte-shell run --config``); None: the defaults."""
    overrides: dict[str, Any] = {}  # noqa: RUF012 - a pydantic field: copied for each instance
    """``RunConfig`` keys over the file, as nested tables (``{"agent": {"profile": "fte"}}``)."""
    runs_dir: str | None = None
    """Keep each rollout's episode as a run directory here (``<qid>/<rollout>``); None: a temporary one."""


def run_config(tools: FteShellToolsConfig) -> Any:
    """The fte-shell ``RunConfig`` of ``tools``."""
    return load_config(Path(tools.config_file) if tools.config_file else None, dict(tools.overrides))


class FteShellToolset(vf.Toolset[FteShellToolsConfig]):
    """One rollout's fte-shell episode, its profile's tools served over MCP."""

    TOOL_PREFIX = None  # the profile's own tool names: the system prompt speaks of `bash`

    def __init__(self, config: FteShellToolsConfig) -> None:
        super().__init__(config)
        self.episode: Episode | None = None

    async def setup_task(self, task: Any) -> None:
        """Open the rollout's episode on the task's question (closed with the server)."""
        cfg = run_config(self.config)
        qid = str(getattr(task, "id", None) or uuid.uuid4().hex[:12])
        if self.config.runs_dir:
            out = Path(self.config.runs_dir) / qid / uuid.uuid4().hex[:8]
        else:
            tmp = Path(tempfile.mkdtemp(prefix="fte-vf-"))
            tmp.chmod(0o755)  # the box's user walks through it to the workspace (bwrap)
            # verifiers ends a rollout's server without its teardown: marked as this process's, the
            # directory goes with the sandbox gc of a dead owner's (the reaper's, or the next process's)
            write_owner_file(tmp, keep=False)
            self._exit_stack.callback(shutil.rmtree, tmp, True)
            out = tmp / "run"
        question = str(getattr(task, "question", None) or task.prompt_text)
        self.episode = await EpisodeHost(cfg).aopen(question, out, meta={"qid": qid, "source": "verifiers"})
        self._exit_stack.push_async_callback(self.episode.aclose)

    def register(self, mcp: MCPServer) -> None:
        """The episode's tools on verifiers' server, through fte-shell's one MCP adapter (as ``fte-shell mcp``
        serves them: the profile's schemas unchanged, a failed call an ``isError`` result)."""
        if self.episode is not None:
            serve_episode(mcp, self.episode)

if __name__ == "__main__":
    # verifiers points TMPDIR into its runtime's directory: too deep for the gateway's socket path (and
    # the boxes remove their own temporary directories)
    os.environ.pop("TMPDIR", None)
    tempfile.tempdir = None
    FteShellToolset.run()
