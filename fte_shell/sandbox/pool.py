"""Sandboxes started ahead of need: :class:`SandboxPool`."""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
import time
import uuid
import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING, Self

from ..config import SandboxConfig
from ..errors import SandboxError
from .base import install_cleanup
from .facade import Sandbox

if TYPE_CHECKING:  # pragma: no cover
    from ..world import RunWorld

__all__ = ["SandboxPool"]

_open_pools: weakref.WeakSet[SandboxPool] = weakref.WeakSet()
os.register_at_fork(after_in_child=_open_pools.clear)


@atexit.register  # (registered after the sandboxes' handler, so it runs before it)
def _close_open_pools() -> None:
    for pool in list(_open_pools):
        with contextlib.suppress(Exception):
            pool.close()


class SandboxPool:
    """Sandboxes started ahead of need: ``acquire()`` hands out a ready one (container and shell already
    up) at once and a background thread starts its replacement.

    ::

        with SandboxPool(SandboxConfig(), size=2) as pool:
            with pool.acquire(world=run_world, run_id="q1") as sb:
                sb.run("search 'some query'")

    Pooled sandboxes own temporary workspaces, so ``config.workspace_dir`` must be None; the gateway
    (the run's ``world``) is started when a sandbox is handed out. Its container
    keeps the pool's run id label (``pool-…``); ``Sandbox.run_id`` is the one given to ``acquire``.

    A handed-out sandbox is the caller's: it closes it, or gives it back with :meth:`release`, which
    resets it (:meth:`Sandbox.reset`: no process, file or shell state of its last user is left) and
    puts it among the ready ones, to be handed out before any other; a box that cannot be reset, is
    past half its dead-man TTL or comes back after the pool closed is closed instead. The pool then
    holds up to as many boxes as were in use at once (at least ``size``). Closing the pool closes the
    sandboxes not handed out.
    """

    def __init__(self, config: SandboxConfig | None = None, size: int = 2):
        self.config = config or SandboxConfig()
        if self.config.workspace_dir is not None:
            raise SandboxError("a SandboxPool makes its own workspaces: leave sandbox.workspace_dir unset")
        if size < 1:
            raise SandboxError(f"pool size must be at least 1, got {size}")
        self.size = size
        install_cleanup()  # from this thread: the filler cannot set signals
        _open_pools.add(self)
        self._ready: list[tuple[float, Sandbox]] = []
        self._cond = threading.Condition()
        self._closed = False
        self._error: BaseException | None = None
        self._loans = 0
        """Sandboxes out on :meth:`lend`: coming back, so the filler does not replace them."""
        self.reused = 0
        """Sandboxes handed out again after a :meth:`release` (reset, not started anew)."""
        self._filler = threading.Thread(target=self._fill, name="fte-sandbox-pool", daemon=True)
        self._filler.start()

    def _fill(self) -> None:
        while True:
            with self._cond:
                while not self._closed and len(self._ready) + self._loans >= self.size:
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

    def wait_ready(self, n: int | None = None, timeout: float = 120.0, *, or_failure: bool = False) -> bool:
        """Block until ``n`` (default: ``size``) sandboxes are ready; False on timeout (``or_failure``: also
        as soon as a start failed, which :meth:`acquire` then tries and reports itself)."""
        want = self.size if n is None else n
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self._ready) < want and not self._closed and not (or_failure and self._error is not None):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return len(self._ready) >= want

    def acquire(
        self,
        *,
        world: RunWorld | None = None,
        run_id: str | None = None,
    ) -> Sandbox:
        """A ready sandbox (started now if none is waiting), with its gateway attached."""
        if self._closed:
            raise SandboxError("the sandbox pool is closed")
        sb: Sandbox | None = None
        with self._cond:
            while self._ready and sb is None:
                # a box given back first (its replacement, started while it was out, may have come in after
                # it), the last one in among them; else the newest fresh one
                given_back = [i for i, (_, b) in enumerate(self._ready) if b.resets]
                _, cand = self._ready.pop(given_back[-1] if given_back else -1)
                if self._too_old(cand):
                    cand.close()
                    continue
                sb = cand
            self._cond.notify_all()
        if sb is not None and sb.resets:
            self.reused += 1
        if sb is None:  # nothing waiting: start one here rather than wait for the filler
            sb = Sandbox(self.config, run_id=run_id, _defer_gateway=True)
        try:
            sb.world = world
            if run_id is not None:
                sb.run_id = run_id
            sb._start_gateway()
        except BaseException:
            sb.close()
            raise
        return sb

    @contextlib.contextmanager
    def lend(self, *, world: RunWorld | None = None, run_id: str | None = None) -> Iterator[Sandbox]:
        """A sandbox of :meth:`acquire` for a short while, given back (:meth:`release`) at the end; the
        filler does not start another in its place meanwhile (what a server's tool probe borrows)."""
        with self._cond:
            self._loans += 1
        try:
            sb = self.acquire(world=world, run_id=run_id)
            try:
                yield sb
            finally:
                self.release(sb)
        finally:
            with self._cond:
                self._loans -= 1
                self._cond.notify_all()

    def release(self, sb: Sandbox) -> bool:
        """Take back a sandbox :meth:`acquire` handed out (its caller is done with it): reset it and put it
        among the ready ones (True), or close it (False) when it cannot be reset (:meth:`Sandbox.reset`
        raised), is past half its dead-man TTL or the pool is closed. Runs the reset in this thread."""
        if self._closed or self._too_old(sb):
            sb.close()
            return False
        try:
            sb.reset(gateway=False)
        except Exception:  # noqa: BLE001 - a box that cannot be made fresh is not handed out again
            sb.close()
            return False
        sb.world = None
        with self._cond:
            if not self._closed:
                self._ready.append((sb.born, sb))
                self._cond.notify_all()
                return True
        sb.close()
        return False

    def _too_old(self, sb: Sandbox) -> bool:
        """Too close to its dead-man TTL to hand out."""
        return time.monotonic() - sb.born > self.config.ttl_s / 2

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
