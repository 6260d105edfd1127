"""The public sandbox API: one hardened box (a container, with the Docker provider) + one persistent bash
session per question.

::

    from fte_shell import Sandbox, SandboxConfig
    with Sandbox(SandboxConfig(command_timeout_s=10)) as sb:
        obs = sb.run("cd /work && ls")      # Observation(output, exit_code, timed_out, truncated, ...)
        print(obs.render())                  # what the model sees

Many sandboxes may live at once in one process (threads or asyncio via ``to_thread``); each has its own
box, workspace (/work) and gateway directory. One sandbox runs one command at a time (a lock). The box
comes from the provider ``config.provider`` names (:mod:`.base`); this module never imports one.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from ..config import SandboxConfig
from ..errors import FteError, SandboxError
from .base import GATEWAY_SOCKET, BoxSpec, get_provider, install_cleanup
from .corpus_files import corpus_mount
from .output import Observation
from .ownership import OWNER_FILE, name_part, write_owner_file
from .reaper import watch_owner
from .reset import RESET_FETCH_WAIT_S, RESET_PRELUDE, empty_dir, refusal
from .session import ShellSession

if TYPE_CHECKING:  # pragma: no cover
    from ..world import RunWorld
    from .base import Box, SandboxProvider

__all__ = ["Sandbox"]

_open_sandboxes: weakref.WeakSet[Sandbox] = weakref.WeakSet()


os.register_at_fork(after_in_child=_open_sandboxes.clear)  # a forked child owns none of them


@atexit.register
def _close_open_sandboxes() -> None:
    """At interpreter exit (while the gateway threads still run), close what the program left open (the
    pools' own handler, registered later, runs first)."""
    for sb in list(_open_sandboxes):
        with contextlib.suppress(Exception):  # best effort at exit
            sb.close()


class Sandbox:
    """A per-question sandbox: context manager; ``run(command, timeout=None) -> Observation``."""

    def __init__(
        self,
        config: SandboxConfig | None = None,
        *,
        world: RunWorld | None = None,
        run_id: str | None = None,
        _defer_gateway: bool = False,
    ):
        self.config = config or SandboxConfig()
        self.world = world
        """The run's world (:class:`fte_shell.world.RunWorld`) its gateway serves; None: no search, web only."""
        self.run_id = run_id or uuid.uuid4().hex[:12]
        self.gateway: Any = None
        self._fetch_service: Any = None
        self._tmp: Path | None = None
        self._lock = threading.Lock()
        self.provider: SandboxProvider = get_provider(self.config.provider)
        self._box: Box | None = None
        self._session: ShellSession | None = None
        self._closed = False
        self._spent_s = 0.0
        self._owner_pid = os.getpid()
        self.born = time.monotonic()
        """When its box was started (monotonic; a reset keeps it: the box's dead-man TTL runs from here)."""
        self.resets = 0
        """How often :meth:`reset` made it fresh again."""
        _open_sandboxes.add(self)
        try:
            self._setup_dirs()
            if not _defer_gateway:  # (a pooled sandbox gets its gateway when it is handed out)
                self._start_gateway()
            install_cleanup()
            watch_owner(self.config.provider)  # removes the box even if this process is SIGKILLed
            self._box = self.provider.start(BoxSpec(self.config, self.workspace, self.gateway_dir, self.run_id,
                                                    corpus=corpus_mount(self.config)))
            self._session = ShellSession(self._box, self.config)
            self._session.start()
        except BaseException:
            self.close()
            raise

    # --- directories -----------------------------------------------------------------------------------
    def _setup_dirs(self) -> None:
        self._tmp = Path(tempfile.mkdtemp(prefix=f"fte-{name_part(self.run_id)}-"))
        os.chmod(self._tmp, 0o755)
        keep = self.config.keep_workspace and self.config.workspace_dir is None
        write_owner_file(self._tmp, keep)
        if self.config.workspace_dir is not None:
            ws = Path(self.config.workspace_dir).resolve()
            ws.mkdir(parents=True, exist_ok=True)
        else:
            ws = self._tmp / "work"
            ws.mkdir()
        os.chmod(ws, 0o755)  # uid 1000 in the container reads what the host writes
        gw = self._tmp / "gw"
        gw.mkdir()
        os.chmod(gw, 0o755)
        self.workspace: Path = ws
        """Host directory mounted read-only at /work."""
        self.gateway_dir: Path = gw
        """Host directory mounted at /run/fte; the gateway's socket is ``gateway_dir / "gw.sock"``."""

    # --- gateway ---------------------------------------------------------------------------------------
    def _start_gateway(self) -> None:
        """Start the host-side fetch/search gateway on ``self.gateway_dir / "gw.sock"``: this question's
        FetchService over this sandbox's workspace (policy ``config.fetch_policy``, the world's local corpus
        and page cache) and the world's search. ``self.gateway.drain_events()`` lists the
        requests the container made (e.g. during one command)."""
        from ..fetch import FetchService
        from ..workspace import Workspace
        from .gateway import Gateway

        ws = Workspace(self.workspace, mount="/work")
        w = self.world
        svc = FetchService(ws, self.config.fetch_policy, local=w.page_source if w else None,
                           page_cache=w.page_cache if w else None)
        self._fetch_service = svc
        # the box sees this directory at GATEWAY_MOUNT, so the socket keeps GATEWAY_SOCKET's name
        self.gateway = Gateway(self.gateway_dir / Path(GATEWAY_SOCKET).name, svc, w.search if w else None, ws)
        self.gateway.start()

    def _stop_gateway(self, wait_s: float = 0.0) -> None:
        """Stop the gateway and close its FetchService (idempotent; the service closes even if the
        gateway's close fails); ``wait_s``: for the fetches under way (``Gateway.close``)."""
        gw, self.gateway = self.gateway, None
        svc, self._fetch_service = self._fetch_service, None
        try:
            if gw is not None:
                gw.close(wait_s)
        finally:
            if svc is not None:
                svc.close()

    # --- public API ------------------------------------------------------------------------------------
    @property
    def box(self) -> Box:
        """The provider's started box."""
        if self._box is None:
            raise SandboxError("the sandbox has no container")
        return self._box

    @property
    def container_id(self) -> str:
        """The box's id (a container id with the Docker provider)."""
        return self.box.id

    def describe(self) -> dict[str, Any]:
        """What the provider says about the box (provider, id, name, run id, …)."""
        return self.box.describe()

    def run(self, command: str, timeout: float | None = None) -> Observation:
        """Run one command in the persistent shell and return its observation."""
        if self._closed or self._session is None:
            raise SandboxError("the sandbox is closed")
        limit = self.config.command_timeout_s if timeout is None else float(timeout)
        if limit <= 0:
            raise SandboxError(f"timeout must be positive, got {timeout}")
        budget = self.config.total_time_budget_s
        note = ""
        if budget is not None:
            left = budget - self._spent_s
            if left <= 0:
                return Observation(
                    output="",
                    exit_code=None,
                    note=f"the sandbox's total time budget of {budget:g} s is spent; the command was not run",
                )
            if left < limit:
                limit, note = left, f"the command was limited to the {left:.1f} s left of the time budget"
        with self._lock:
            t0 = time.monotonic()
            try:
                obs = self._session.run(command, limit)
            except Exception as e:
                if self._closed:  # close() from another thread pulled the terminal away
                    raise SandboxError("the sandbox was closed while the command ran") from e
                raise
            finally:
                self._spent_s += time.monotonic() - t0
        if note and obs.timed_out:
            obs.note = (obs.note + "; " if obs.note else "") + note
        obs.cwd = self._session.cwd if self._session is not None else None
        return obs

    async def arun(self, command: str, timeout: float | None = None) -> Observation:
        """``run`` for asyncio code: runs in a worker thread, so many sandboxes proceed concurrently."""
        return await asyncio.to_thread(self.run, command, timeout)

    def reset(self, *, gateway: bool = True) -> None:
        """Make this used sandbox as good as a fresh one, in the same box (:mod:`.reset`): stop the gateway,
        end the shell and every process of the agent's user in the box (background jobs and daemons
        too), empty the box's writable places (/tmp and the other tmpfs), its System V IPC objects, the
        workspace and the gateway directory, then start a new shell (fresh environment, /work, no
        functions or aliases) and, with ``gateway``, a new gateway for the same world (a pool passes
        False: the next ``acquire`` starts one for its own world). The time budget starts again; the
        box's TTL does not. Raises :class:`SandboxError` when the box cannot be reset (:func:`.reset.refusal`,
        a workspace of the caller's, ``sandbox.workspace_dir``, which it would empty) or the reset
        failed: the sandbox should then be closed."""
        if self._closed or self._box is None:
            raise SandboxError("the sandbox is closed")
        why = refusal(self.config) or ("the workspace is the caller's (sandbox.workspace_dir)"
                                       if self.config.workspace_dir is not None else None)
        if why:
            raise SandboxError(f"this sandbox cannot be reset: {why}")
        with self._lock:
            try:
                self._stop_gateway(RESET_FETCH_WAIT_S)
            except FteError as e:
                raise SandboxError(f"could not reset the sandbox: {e}") from e
            old, self._session = self._session, None
            try:
                empty_dir(self.workspace)
                empty_dir(self.gateway_dir)
                self._spent_s = 0.0
                session = ShellSession(self._box, self.config)
                # the warden ends every process of the box (the old shell too) and starts the wipe, which
                # becomes the new shell; where it cannot, the engine starts the wipe, which ends them
                session.start(RESET_PRELUDE, by_warden=True)
            finally:
                if old is not None:
                    old.close()
            self._session = session
            self.resets += 1
            if gateway:
                self._start_gateway()

    def close(self) -> None:
        """Remove the container, stop the gateway, delete the temporary workspace (unless kept)."""
        if self._closed:
            return
        self._closed = True
        if os.getpid() != self._owner_pid:  # a forked child: the container belongs to the parent
            return
        errors: list[str] = []
        if self._session is not None:
            self._session.close()
        if self._box is not None:
            try:
                self._box.stop()
            except SandboxError as e:
                errors.append(str(e))
        try:
            self._stop_gateway()
        except Exception as e:  # noqa: BLE001 - report, but finish cleaning up
            errors.append(f"gateway: {e}")
        if self._tmp is not None:
            keep_ws = self.config.keep_workspace and self.config.workspace_dir is None
            if keep_ws:
                shutil.rmtree(self._tmp / "gw", ignore_errors=True)
                (self._tmp / OWNER_FILE).unlink(missing_ok=True)
            else:
                shutil.rmtree(self._tmp, ignore_errors=True)
        if errors:
            raise SandboxError("; ".join(errors))

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # last resort; close() is the contract
        if getattr(self, "_closed", True) or os.getpid() != getattr(self, "_owner_pid", None):
            return
        with contextlib.suppress(Exception):
            if sys.is_finalizing():  # threads are gone: only the container can still be removed
                self._closed = True
                if self._box is not None:
                    self._box.stop()
            else:
                self.close()
