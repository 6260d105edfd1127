"""The public sandbox API: one hardened container + one persistent bash session per question.

::

    from fte_shell import Sandbox, SandboxConfig
    with Sandbox(SandboxConfig(command_timeout_s=10)) as sb:
        obs = sb.run("cd /work && ls")      # Observation(output, exit_code, timed_out, truncated, ...)
        print(obs.render())                  # what the model sees

Many sandboxes may live at once in one process (threads or asyncio via ``to_thread``); each has its own
container, workspace (/work) and gateway directory. One sandbox runs one command at a time (a lock).
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

from . import container as _container
from .config import SandboxConfig
from .errors import SandboxError
from .session import Observation, ShellSession

if TYPE_CHECKING:  # pragma: no cover
    from .fetch import PageCache, PageSource
    from .search import SearchBackend

__all__ = ["Observation", "Sandbox", "SandboxPool"]

_open_sandboxes: weakref.WeakSet[Sandbox] = weakref.WeakSet()


os.register_at_fork(after_in_child=_open_sandboxes.clear)  # a forked child owns none of them


_open_pools: weakref.WeakSet[SandboxPool] = weakref.WeakSet()
os.register_at_fork(after_in_child=_open_pools.clear)


@atexit.register
def _close_open_sandboxes() -> None:
    """At interpreter exit (while the gateway threads still run), close what the program left open."""
    for pool in list(_open_pools):
        with contextlib.suppress(Exception):
            pool.close()
    for sb in list(_open_sandboxes):
        with contextlib.suppress(Exception):  # best effort at exit
            sb.close()


class Sandbox:
    """A per-question sandbox: context manager; ``run(command, timeout=None) -> Observation``."""

    def __init__(
        self,
        config: SandboxConfig | None = None,
        *,
        search: SearchBackend | None = None,
        page_source: PageSource | None = None,
        page_cache: PageCache | None = None,
        run_id: str | None = None,
        _defer_gateway: bool = False,
    ):
        self.config = config or SandboxConfig()
        self.search = search
        self.page_source = page_source
        self.page_cache = page_cache
        self.run_id = run_id or uuid.uuid4().hex[:12]
        self.gateway: Any = None
        self._fetch_service: Any = None
        self._tmp: Path | None = None
        self._lock = threading.Lock()
        self._handle: _container.Handle | None = None
        self._session: ShellSession | None = None
        self._closed = False
        self._spent_s = 0.0
        self._owner_pid = os.getpid()
        _open_sandboxes.add(self)
        try:
            self._setup_dirs()
            if not _defer_gateway:  # (a pooled sandbox gets its gateway when it is handed out)
                self._start_gateway()
            self._handle = _container.create(self.config, self.workspace, self.gateway_dir, self.run_id)
            self._session = ShellSession(self._handle.id, self.config, request_dir=self.gateway_dir)
            self._session.start()
        except BaseException:
            self.close()
            raise

    # --- directories -----------------------------------------------------------------------------------
    def _setup_dirs(self) -> None:
        self._tmp = Path(tempfile.mkdtemp(prefix=f"fte-{_container.name_part(self.run_id)}-"))
        os.chmod(self._tmp, 0o755)
        keep = self.config.keep_workspace and self.config.workspace_dir is None
        _container.write_owner_file(self._tmp, keep)
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

    # --- gateway hooks (filled in by the fetch gateway issue) -------------------------------------------
    def _start_gateway(self) -> None:
        """Start the host-side fetch/search gateway on ``self.gateway_dir / "gw.sock"``: this question's
        FetchService over this sandbox's workspace (policy ``config.fetch_policy``, local corpus
        ``page_source``, shared ``page_cache``) and ``search``. ``self.gateway.drain_events()`` lists the
        requests the container made (e.g. during one command)."""
        from .fetch import FetchService
        from .gateway import Gateway
        from .workspace import Workspace

        ws = Workspace(self.workspace, mount="/work")
        svc = FetchService(ws, self.config.fetch_policy, local=self.page_source, page_cache=self.page_cache)
        self._fetch_service = svc
        # the container sees this directory at GATEWAY_MOUNT, so the socket keeps GATEWAY_SOCKET's name
        self.gateway = Gateway(self.gateway_dir / Path(_container.GATEWAY_SOCKET).name, svc, self.search, ws)
        self.gateway.start()

    def _stop_gateway(self) -> None:
        """Stop the gateway and close its FetchService (idempotent; the service closes even if the
        gateway's close fails)."""
        gw, self.gateway = self.gateway, None
        svc, self._fetch_service = self._fetch_service, None
        try:
            if gw is not None:
                gw.close()
        finally:
            if svc is not None:
                svc.close()

    # --- public API ------------------------------------------------------------------------------------
    @property
    def container_id(self) -> str:
        if self._handle is None:
            raise SandboxError("the sandbox has no container")
        return self._handle.id

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
        return obs

    async def arun(self, command: str, timeout: float | None = None) -> Observation:
        """``run`` for asyncio code: runs in a worker thread, so many sandboxes proceed concurrently."""
        return await asyncio.to_thread(self.run, command, timeout)

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
        if self._handle is not None:
            try:
                _container.remove(self._handle.id)
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
                (self._tmp / _container.OWNER_FILE).unlink(missing_ok=True)
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
                if self._handle is not None:
                    _container.remove(self._handle.id)
            else:
                self.close()


class SandboxPool:
    """Sandboxes started ahead of need: ``acquire()`` hands out a ready one (container and shell already
    up) at once and a background thread starts its replacement.

    ::

        with SandboxPool(SandboxConfig(), size=2) as pool:
            with pool.acquire(search=backend, run_id="q1") as sb:
                sb.run("search 'some query'")

    Pooled sandboxes own temporary workspaces, so ``config.workspace_dir`` must be None; the gateway
    (``search``, ``page_source``, ``page_cache``) is started when a sandbox is handed out. Its container
    keeps the pool's run id label (``pool-…``); ``Sandbox.run_id`` is the one given to ``acquire``.
    Closing the pool closes the sandboxes not handed out; handed-out ones belong to the caller.
    """

    def __init__(self, config: SandboxConfig | None = None, size: int = 2):
        self.config = config or SandboxConfig()
        if self.config.workspace_dir is not None:
            raise SandboxError("a SandboxPool makes its own workspaces: leave sandbox.workspace_dir unset")
        if size < 1:
            raise SandboxError(f"pool size must be at least 1, got {size}")
        self.size = size
        _container.install_cleanup_handlers()  # from this thread; the filler thread cannot set signals
        _open_pools.add(self)
        self._ready: list[tuple[float, Sandbox]] = []
        self._cond = threading.Condition()
        self._closed = False
        self._error: BaseException | None = None
        self._filler = threading.Thread(target=self._fill, name="fte-sandbox-pool", daemon=True)
        self._filler.start()

    def _fill(self) -> None:
        while True:
            with self._cond:
                while not self._closed and len(self._ready) >= self.size:
                    self._cond.wait()
                if self._closed:
                    return
            try:
                sb = Sandbox(self.config, run_id=f"pool-{uuid.uuid4().hex[:8]}", _defer_gateway=True)
            except BaseException as e:  # noqa: BLE001 - reported by acquire(); retried after a pause
                with self._cond:
                    self._error = e
                    self._cond.notify_all()
                time.sleep(1.0)
                continue
            with self._cond:
                if self._closed:
                    sb.close()
                    return
                self._error = None
                self._ready.append((time.monotonic(), sb))
                self._cond.notify_all()

    @property
    def ready(self) -> int:
        """How many started sandboxes are waiting."""
        with self._cond:
            return len(self._ready)

    def wait_ready(self, n: int | None = None, timeout: float = 120.0) -> bool:
        """Block until ``n`` (default: ``size``) sandboxes are ready; False on timeout."""
        want = self.size if n is None else n
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self._ready) < want and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return len(self._ready) >= want

    def acquire(
        self,
        *,
        search: SearchBackend | None = None,
        page_source: PageSource | None = None,
        page_cache: PageCache | None = None,
        run_id: str | None = None,
    ) -> Sandbox:
        """A ready sandbox (started now if none is waiting), with its gateway attached."""
        if self._closed:
            raise SandboxError("the sandbox pool is closed")
        sb: Sandbox | None = None
        with self._cond:
            while self._ready and sb is None:
                born, cand = self._ready.pop(0)
                if time.monotonic() - born > self.config.ttl_s / 2:  # too close to its dead-man TTL
                    cand.close()
                    continue
                sb = cand
            self._cond.notify_all()
        if sb is None:  # nothing waiting: start one here rather than wait for the filler
            sb = Sandbox(self.config, run_id=run_id, _defer_gateway=True)
        try:
            sb.search, sb.page_source, sb.page_cache = search, page_source, page_cache
            if run_id is not None:
                sb.run_id = run_id
            sb._start_gateway()
        except BaseException:
            sb.close()
            raise
        return sb

    def close(self) -> None:
        """Stop refilling and close the sandboxes that were not handed out."""
        with self._cond:
            self._closed = True
            ready, self._ready = self._ready, []
            self._cond.notify_all()
        for _, sb in ready:
            with contextlib.suppress(Exception):
                sb.close()
        self._filler.join(timeout=120)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
