"""The sandbox container's lifecycle: hardened creation, ownership labels, removal, cleanup, gc.

Everything goes through the docker SDK (the session's shell is an exec attached over the API socket,
:mod:`.api`). Every container this module creates is

* hardened from :class:`~fte_shell.config.SandboxConfig` (non-root, read-only root, size-capped tmpfs,
  /work read-only, no capabilities, no-new-privileges, pids/memory/CPU limits, no network, init);
* labelled ``fte-shell=1`` plus run id, owning process (pid, its start time, host), creation time and TTL
  (:mod:`fte_shell.sandbox.ownership`);
* running the warden (``sandbox/lib/warden.sh``, a bash script) as its main process: a dead-man timer,
  so the container exits within its TTL even if the harness is SIGKILLed (``auto_remove`` then deletes
  it), and the enforcer of timeouts;
* registered for removal at interpreter exit and on SIGINT/SIGTERM (handlers chain to the previous ones).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ....config import SandboxConfig
from ....errors import SandboxError
from ...base import GcResult, Log
from ...hardening import box_layout
from ...ownership import LABEL, remove_stale
from .api import client
from .image import ensure_image, forget

if TYPE_CHECKING:  # pragma: no cover
    import docker


# --- live registry and cleanup ------------------------------------------------------------------------
_live: dict[str, str] = {}
"""Container id -> name of every container this process created and has not removed. No lock: single
dict operations are atomic, and the signal handlers that read it must never wait for a lock that the
interrupted main thread holds."""


def _forget_in_child() -> None:
    """A forked child (e.g. a process-pool worker) owns none of its parent's containers: it must not
    remove them at its exit or on a signal."""
    _live.clear()


os.register_at_fork(after_in_child=_forget_in_child)
_handlers_installed = False
_atexit_installed = False


def remove(container_id: str, *, api: docker.APIClient | None = None) -> None:
    """Force-remove a container; a container that is already gone is not an error."""
    import docker.errors

    _live.pop(container_id, None)
    try:
        (api or client().api).remove_container(container_id, force=True, v=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as e:
        if e.status_code != 409:  # 409: removal already in progress (auto_remove)
            raise SandboxError(f"could not remove container {container_id[:12]}: {e}") from e


def remove_all_live(*, api: docker.APIClient | None = None) -> None:
    """Remove every container this process created and has not removed yet."""
    for cid in list(_live):
        with contextlib.suppress(Exception):  # best effort at exit
            remove(cid, api=api)


_signal_api: docker.APIClient | None = None
"""A client of its own for the signal handlers: the interrupted main thread may hold a lock of the
shared client's connection pool, which the handler would then wait on forever."""


def _signal_cleanup(signum: int, frame: Any) -> None:
    remove_all_live(api=_signal_api)
    prev = _previous.get(signum)
    if callable(prev):
        prev(signum, frame)
    elif prev == signal.SIG_IGN:
        return
    else:  # SIG_DFL (or unknown): exit, but through atexit and `finally` (temporary dirs, logs)
        raise SystemExit(128 + signum)


_previous: dict[int, Any] = {}


def install_cleanup_handlers() -> None:
    """atexit (once) + SIGINT/SIGTERM handlers chained to the previous ones. Signal handlers can only be
    set from the main thread: a call from another thread installs atexit only, and a later call from the
    main thread installs the signal handlers."""
    global _handlers_installed, _atexit_installed
    if not _atexit_installed:
        _atexit_installed = True
        atexit.register(remove_all_live)
    if _handlers_installed or threading.current_thread() is not threading.main_thread():
        return
    _handlers_installed = True
    global _signal_api
    with contextlib.suppress(Exception):  # without it the handlers use the shared client
        import docker

        _signal_api = docker.APIClient(**docker.utils.kwargs_from_env(), timeout=60)
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            prev = signal.getsignal(sig)
            if prev is _signal_cleanup:
                continue
            _previous[sig] = prev
            signal.signal(sig, _signal_cleanup)
        except (ValueError, OSError):  # not the main interpreter
            pass


# --- creation ----------------------------------------------------------------------------------------
def container_kwargs(
    cfg: SandboxConfig, workspace: Path, gateway_dir: Path, run_id: str, *, ttl_s: int | None = None
) -> dict[str, Any]:
    """The keyword arguments of ``containers.create`` for a hardened sandbox (exposed for tests): the
    shared layout (:func:`fte_shell.sandbox.hardening.box_layout`) in the SDK's terms."""
    lay = box_layout(cfg, workspace, gateway_dir, run_id, ttl_s=ttl_s)
    kwargs: dict[str, Any] = {
        "image": cfg.image,
        "command": lay.command,
        "name": lay.name,
        "auto_remove": True,
        "user": lay.user,
        "working_dir": lay.working_dir,
        "hostname": lay.hostname,
        "read_only": lay.read_only,
        "tmpfs": lay.tmpfs,
        "volumes": {host: {"bind": box, "mode": "ro"} for host, box in lay.binds},
        "network_mode": cfg.network_mode,
        "pids_limit": lay.pids_limit,
        "mem_limit": lay.memory,
        "memswap_limit": lay.memory,
        "nano_cpus": int(lay.cpus * 1e9),
        "init": lay.init,
        "environment": lay.env,
        "labels": lay.labels,
        "stop_signal": "SIGTERM",
        "shm_size": lay.shm_size,
        "ipc_mode": "private",
    }
    if lay.runtime != "runc":  # runc is the daemon's default; runsc must be registered (setup-host.sh)
        kwargs["runtime"] = lay.runtime
    if lay.cap_drop_all:
        kwargs["cap_drop"] = ["ALL"]
    if lay.no_new_privileges:
        kwargs["security_opt"] = ["no-new-privileges:true"]
    return kwargs


@dataclass
class Handle:
    """A started sandbox container."""

    id: str
    name: str
    run_id: str


def create(
    cfg: SandboxConfig, workspace: Path, gateway_dir: Path, run_id: str, *, ttl_s: int | None = None
) -> Handle:
    """Start a hardened sandbox container and register it for removal at exit/signals."""
    import docker.errors

    if cfg.user.split(":")[0] in ("0", "root"):
        raise SandboxError("sandbox.user must not be root (uid 0)")
    image_id = ensure_image(cfg)
    install_cleanup_handlers()
    _startup_sweep()
    kwargs = container_kwargs(cfg, workspace, gateway_dir, run_id, ttl_s=ttl_s)
    c = client()
    try:
        try:
            cont = c.containers.create(**dict(kwargs, image=image_id))
        except docker.errors.ImageNotFound:  # the checked image was pruned since: check (build) again
            forget(cfg)
            cont = c.containers.create(**dict(kwargs, image=ensure_image(cfg)))
    except docker.errors.APIError as e:
        raise SandboxError(f"could not create the sandbox container: {e}") from e
    _live[cont.id] = kwargs["name"]
    try:
        cont.start()
    except docker.errors.APIError as e:
        remove(cont.id)
        raise SandboxError(f"could not start the sandbox container: {e}") from e
    return Handle(id=cont.id, name=kwargs["name"], run_id=run_id)


_swept = False


def _startup_sweep() -> None:
    """Once per process, before the first container: gc what crashed harnesses left behind."""
    global _swept
    if _swept:
        return
    _swept = True  # (two threads may both get here: gc twice is harmless)
    with contextlib.suppress(Exception):  # a failed sweep must not stop the run; `sandbox gc` reports
        gc()


def is_running(container_id: str) -> bool:
    import docker.errors

    try:
        return client().api.inspect_container(container_id)["State"]["Running"] is True
    except docker.errors.NotFound:
        return False


def signal_warden(container_id: str) -> None:
    """Ask the warden to kill the running command's processes (no new process in the container); the
    caller wrote the sweep request first (:func:`fte_shell.sandbox.ownership.write_sweep_request`)."""
    import docker.errors

    try:
        client().api.kill(container_id, signal="SIGUSR1")
    except docker.errors.APIError as e:
        raise SandboxError(f"could not signal the sandbox container: {e}") from e


# --- gc ----------------------------------------------------------------------------------------------
def gc(*, log: Log | None = None) -> GcResult:
    """Remove every fte-shell container whose owner process is gone (same host) or whose TTL passed."""
    infos = client().api.containers(all=True, filters={"label": f"{LABEL}=1"})
    return remove_stale(((info["Id"], (info.get("Names") or ["?"])[0].lstrip("/"), info.get("Labels") or {},
                          info.get("State", "")) for info in infos), remove, log)

