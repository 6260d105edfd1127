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

import contextlib
import os
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
"""Container id -> name of every container this process created and has not removed (single dict
operations are atomic: no lock)."""


def _forget_in_child() -> None:
    """A forked child (e.g. a process-pool worker) owns none of its parent's containers: it must not
    remove them at its exit or on a signal."""
    _live.clear()


os.register_at_fork(after_in_child=_forget_in_child)


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


# --- creation ----------------------------------------------------------------------------------------
def container_kwargs(
    cfg: SandboxConfig, workspace: Path, gateway_dir: Path, run_id: str, *, ttl_s: int | None = None,
    corpus: Path | None = None,
) -> dict[str, Any]:
    """The keyword arguments of ``containers.create`` for a hardened sandbox (exposed for tests): the
    shared layout (:func:`fte_shell.sandbox.hardening.box_layout`) in the SDK's terms."""
    lay = box_layout(cfg, workspace, gateway_dir, run_id, ttl_s=ttl_s, corpus=corpus)
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
    cfg: SandboxConfig, workspace: Path, gateway_dir: Path, run_id: str, *, ttl_s: int | None = None,
    corpus: Path | None = None,
) -> Handle:
    """Start a hardened sandbox container, registered for removal at exit (``sandbox.base.install_cleanup``)."""
    import docker.errors

    if cfg.user.split(":")[0] in ("0", "root"):
        raise SandboxError("sandbox.user must not be root (uid 0)")
    image_id = ensure_image(cfg)
    _startup_sweep()
    kwargs = container_kwargs(cfg, workspace, gateway_dir, run_id, ttl_s=ttl_s, corpus=corpus)
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


def main_pid(container_id: str) -> int | None:
    """The container's main process (the warden) on the daemon's host; None when it does not run."""
    pid = client().api.inspect_container(container_id)["State"].get("Pid")
    return pid if isinstance(pid, int) and pid > 0 else None


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

