"""The workspaces an MCP server holds: each one an :class:`~fte_shell.episode.Episode` (its box, its run
directory), named by a handle the server mints.

stdio serves one workspace for the life of the process (opened before serving, closed when the client
goes); Streamable HTTP opens and closes them on the client's word (``open_workspace``,
``close_workspace``), closes the idle ones after ``idle_ttl_s`` and refuses more than ``max_workspaces``
at once; with ``warm`` > 0 (the shell profile) a :class:`~fte_shell.sandbox.SandboxPool` keeps that many
boxes started ahead, and a workspace opens with one of them (its run directory keeps the box's /work:
:mod:`fte_shell.profiles.shell`) and gives it back when it closes (reset: docs/sandbox.md "Reset"). Every box call runs in a worker thread (a limiter as wide as the workspaces allowed), so the
event loop never waits on a box.
"""

from __future__ import annotations

import contextlib
import functools
import secrets
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from ..config import RunConfig
from ..episode import Episode, RunResult, new_run_id
from ..episode.host import EpisodeHost
from ..errors import FteError
from ..profiles import QuestionContext, ToolResult, make_profile
from ..sandbox import SandboxPool
from ..world import World


class WorkspaceError(FteError):
    """A client's request about workspaces that cannot be served (unknown handle, too many open…):
    its message goes back to the client as an error result."""


@dataclass
class OpenWorkspace:
    """One open MCP workspace: the handle a client holds and its episode (not the workspace store,
    :class:`fte_shell.workspace.Workspace`)."""

    handle: str
    """What the client passes back (a random, unguessable name)."""

    episode: Episode
    """Its run: the profile (and box), the run directory."""

    last_used: float = field(default_factory=time.monotonic)
    """Monotonic time of the last call that started or ended (the idle reaper's clock)."""

    busy: int = 0
    """Calls running now (never reaped while > 0)."""

    @property
    def workspace_dir(self) -> Path:
        return self.episode.workspace_dir


def probe_tools(config: RunConfig, world: World,
                boxes: SandboxPool | None = None) -> tuple[list[dict[str, Any]], str]:
    """The profile's tool schemas and system addendum, from a profile made (and closed at once) in a
    temporary directory: what every workspace will offer. For ``shell`` this needs a box, so a server
    that cannot start boxes says so before it serves anyone: one of the warm ``boxes`` when there are
    (given back fresh, no box started for the probe alone), else one of its own."""
    if boxes is not None:
        boxes.wait_ready(1, or_failure=True)  # a warm one, not one started for the probe
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="fte-mcp-probe-"))
        run_world = stack.enter_context(world.bind(None, None))
        ws = Path(tmp) / "workspace"
        ws.mkdir()
        lend = (lambda **kw: stack.enter_context(boxes.lend(**kw))) if boxes else None
        ctx = QuestionContext(config=config, workspace_dir=ws, world=run_world, run_id="mcp-probe",
                              sandbox_source=lend,  # the loan's end gives the box back
                              sandbox_release=(lambda sb: None) if boxes else None)
        profile = make_profile(config.agent.profile, ctx)
        try:
            return profile.tools(), profile.system_addendum()
        finally:
            profile.close()


class Workspaces:
    """The open workspaces of one server, each a run directory under ``out``."""

    def __init__(self, config: RunConfig, world: World, out: Path, *, max_workspaces: int, idle_ttl_s: float,
                 default_question: str, warm: int = 0):
        self.config, self.world, self.out = config, world, Path(out)
        self.host = EpisodeHost(config, world, warm=min(warm, max_workspaces))
        """Opens the workspaces' episodes, with boxes started ahead (``warm`` > 0 and the shell profile),
        closed by :meth:`close_all`."""
        self.max_workspaces, self.idle_ttl_s, self.default_question = max_workspaces, idle_ttl_s, default_question
        self._open: dict[str, OpenWorkspace] = {}
        self._opening = 0
        self._lock = threading.Lock()
        self.limiter = anyio.CapacityLimiter(max_workspaces + 2)
        """Worker threads for box calls (one per workspace, two for opening and closing)."""

    @property
    def boxes(self) -> SandboxPool | None:
        """The warm boxes (:attr:`EpisodeHost.boxes`)."""
        return self.host.boxes

    def __len__(self) -> int:
        return len(self._open)

    # --- opening ---------------------------------------------------------------------------------------
    def open_sync(self, question: str | None = None) -> OpenWorkspace:
        """Open a workspace (its episode, its box) in this thread; refused beyond ``max_workspaces``."""
        with self._lock:
            if len(self._open) + self._opening >= self.max_workspaces:
                raise WorkspaceError(f"{self.max_workspaces} workspace(s) are open, the most this server allows "
                                     "(--max-workspaces): close one with close_workspace first")
            self._opening += 1
        try:
            q = question if question is not None and question.strip() else self.default_question
            run_id = new_run_id(q)
            ep = self.host.open(q, self.out / run_id, run_id=run_id, meta={"mcp": True})
        finally:
            with self._lock:
                self._opening -= 1
        ws = OpenWorkspace(secrets.token_urlsafe(18), ep)
        with self._lock:
            self._open[ws.handle] = ws
        return ws

    async def open(self, question: str | None = None) -> OpenWorkspace:
        return await anyio.to_thread.run_sync(self.open_sync, question, limiter=self.limiter)

    # --- using ------------------------------------------------------------------------------------------
    def get(self, handle: Any) -> OpenWorkspace:
        """The open workspace ``handle`` names; a :class:`WorkspaceError` for anything else."""
        ws = self._open.get(handle) if isinstance(handle, str) else None
        if ws is None:
            raise WorkspaceError("unknown or closed workspace handle: call open_workspace for a new one")
        return ws

    async def call(self, ws: OpenWorkspace, name: str, args: dict[str, Any]) -> ToolResult:
        """Run tool ``name`` in ``ws``'s episode (a turn of its own), in a worker thread."""
        ws.busy += 1
        ws.last_used = time.monotonic()
        try:
            return await anyio.to_thread.run_sync(functools.partial(ws.episode.call, name, args), limiter=self.limiter,
                                                  abandon_on_cancel=True)  # a client gone mid-call: the box closes under it
        finally:
            ws.busy -= 1
            ws.last_used = time.monotonic()

    # --- closing ----------------------------------------------------------------------------------------
    def _take(self, handle: Any) -> OpenWorkspace:
        with self._lock:
            ws = self.get(handle)
            del self._open[ws.handle]
        return ws

    async def close(self, handle: Any, answer: str | None = None) -> RunResult:
        """Close workspace ``handle``: finished with ``answer`` when given (else ``abandoned``), its box
        removed. The handle is unknown from here on."""
        ws = self._take(handle)
        return await anyio.to_thread.run_sync(ws.episode.end, answer, limiter=self.limiter)

    async def reap_idle(self) -> list[str]:
        """Close every workspace idle for ``idle_ttl_s`` (none with a call running); their handles."""
        now = time.monotonic()
        idle = [h for h, ws in list(self._open.items()) if not ws.busy and now - ws.last_used >= self.idle_ttl_s]
        for handle in idle:
            with contextlib.suppress(WorkspaceError):  # closed meanwhile by its client
                await self.close(handle)
        return idle

    async def reap_forever(self) -> None:
        """:meth:`reap_idle` every few seconds, until cancelled."""
        while True:
            await anyio.sleep(min(5.0, self.idle_ttl_s / 4))
            await self.reap_idle()

    def close_all(self, why: BaseException | None = None) -> None:
        """Close every open workspace in this thread, boxes in parallel: the server's end. ``why``: the
        exception that ends the server (an interrupt: ``interrupted``); None: ``abandoned``."""
        with self._lock:
            left, self._open = list(self._open.values()), {}
        threads = [threading.Thread(target=functools.partial(ws.episode.end, why=why)) for ws in left]
        threads.append(threading.Thread(target=self.host.close))
        for t in threads:
            t.start()
        for t in threads:
            t.join()

