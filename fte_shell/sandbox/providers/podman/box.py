"""Podman boxes: hardened creation with the CLI (the shared layout of :mod:`fte_shell.sandbox.hardening`
as ``podman run`` flags), the shell as ``podman exec -it`` driven by pexpect, removal, cleanup, gc.

Every box runs with the ``runc`` runtime (podman's ``crun`` fails on hybrid cgroup hosts; ``runsc`` is
refused: :data:`RUNSC_REFUSED`), explicit ulimits within the host's hard
limits (:func:`.cli.ulimits`) and ``--rm``: when its warden ends (TTL) podman removes it.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from dataclasses import dataclass
from typing import Any

import pexpect

from ....config import SandboxConfig
from ....errors import SandboxError
from ...base import BoxFields, BoxSpec, GcResult, Log
from ...hardening import BoxLayout, box_layout
from ...host_signals import signal_defaults
from ...ownership import LABEL, remove_stale
from . import cli
from .image import ensure_image, forget

RUNSC_REFUSED = (
    "podman cannot run the sandbox with runtime runsc here: podman 4.3 starts the shell with `exec --tty`, "
    "which Debian's runsc (2022) refuses (\"flag provided but not defined: -tty\"); use provider docker "
    "with runtime runsc (bash sandbox/setup-host.sh --runtime runsc), or podman with runtime runc")
"""Measured here: `podman --runtime runsc --runtime-flag network=none run` starts, a plain exec works,
a terminal exec does not."""

_live: dict[str, str] = {}
"""Box id -> name of every box this process started and has not removed (read by signal handlers: no lock)."""
os.register_at_fork(after_in_child=_live.clear)  # a forked child owns none of its parent's boxes


def run_flags(lay: BoxLayout, cfg: SandboxConfig) -> list[str]:
    """``podman run`` flags for the layout (exposed for tests and the doctor)."""
    flags = ["--runtime", lay.runtime, "run", "-d", "--rm", "--name", lay.name, "--user", lay.user, "--workdir", lay.working_dir,
              "--hostname", lay.hostname, "--network", cfg.network_mode, "--ipc", "private",
              "--shm-size", lay.shm_size, "--stop-signal", "SIGTERM", "--pull", "never"]
    if lay.read_only:
        flags += ["--read-only", "--read-only-tmpfs=false"]
    for mount, opts in lay.tmpfs.items():
        flags += ["--tmpfs", f"{mount}:{opts}"]
    for host, box in lay.binds:
        flags += ["-v", f"{host}:{box}:ro"]
    for k, v in lay.env.items():
        flags += ["-e", f"{k}={v}"]
    for k, v in lay.labels.items():
        flags += ["--label", f"{k}={v}"]
    if cli.cgroup_limits():
        flags += ["--pids-limit", str(lay.pids_limit), "--memory", lay.memory, "--memory-swap", lay.memory,
                  "--cpus", str(lay.cpus)]
    flags += cli.ulimits(lay.pids_limit)
    if lay.init:
        flags.append("--init")
    if lay.cap_drop_all:
        flags += ["--cap-drop", "all"]
    if lay.no_new_privileges:
        flags += ["--security-opt", "no-new-privileges"]
    return flags


@dataclass
class CliSpawn:
    """The shell as a ``podman exec -it`` process whose terminal pexpect drives."""

    child: pexpect.spawn

    def exit_code(self, wait_s: float = 5.0) -> int | None:
        deadline = time.monotonic() + wait_s
        while self.child.isalive():
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.01)
        if self.child.exitstatus is not None:
            return int(self.child.exitstatus)
        return 128 + int(self.child.signalstatus) if self.child.signalstatus else None


class _ExecChild(pexpect.spawn):
    """A ``podman exec`` client: closing it after the shell ended first lets it exit with the shell's
    status (a forced close would kill the client and lose that status)."""

    def close(self, force: bool = True) -> None:
        if self.flag_eof:
            deadline = time.monotonic() + 2.0
            while self.isalive() and time.monotonic() < deadline:
                time.sleep(0.005)
        super().close(force=force)


@dataclass
class PodmanBox(BoxFields):
    user: str
    image: str
    runtime: str
    _root_pid: int | None = None

    @property
    def direct_channel(self) -> bool:
        """Always runc here (runsc is refused), which passes the gateway directory's FIFOs through."""
        return self.runtime == "runc"

    def root_pid(self) -> int | None:
        """The box's main process on this host (a rootful podman's; a rootless one's is not reachable)."""
        if self._root_pid is None and not cli.rootless():
            res = cli.run(["inspect", "--type", "container", "--format", "{{.State.Pid}}", self.id],
                          check=False, timeout=60)
            pid = res.stdout.strip()
            self._root_pid = int(pid) if res.returncode == 0 and pid.isdigit() and int(pid) > 0 else None
        return self._root_pid

    def spawn(self, argv: list[str], *, timeout: float) -> CliSpawn:
        try:
            # cwd: the box's own temporary directory (conmon writes an empty file "oom" into its working
            # directory when the box's memory runs out; it was the caller's, e.g. a checkout)
            child = _ExecChild(cli.binary(), ["--log-level=error", "exec", "-it", "-u", self.user, self.id, *argv],
                               env=cli.client_env(), timeout=timeout, maxread=1 << 20, dimensions=(50, 200),
                               encoding=None, cwd=str(self.gateway_dir.parent), use_poll=True,
                               **signal_defaults())
        except pexpect.ExceptionPexpect as e:
            raise SandboxError(f"could not start a shell in podman box {self.id[:12]}: {e}") from e
        child.delaybeforesend = None
        return CliSpawn(child)

    def is_running(self) -> bool:
        res = cli.run(["inspect", "--type", "container", "--format", "{{.State.Running}}", self.id],
                      check=False, timeout=60)
        return res.returncode == 0 and res.stdout.strip() == b"true"

    def exec(self, argv: list[str]) -> tuple[int, str]:
        res = cli.run(["exec", "-u", self.user, self.id, *argv], check=False, timeout=120)
        return res.returncode, (res.stdout + res.stderr).decode("utf-8", "replace")

    def signal_warden(self) -> None:
        cli.run(["kill", "--signal", "USR1", self.id], timeout=60, doing="signalling the warden")

    def terminal_argv(self, env: dict[str, str]) -> list[str]:
        flags = [f for k, v in env.items() for f in ("-e", f"{k}={v}")]
        return [cli.binary(), "exec", "-it" if sys.stdin.isatty() else "-i", "-u", self.user, *flags, self.id,
                "bash", "--norc", "-i"]

    def stop(self) -> None:
        remove(self.id)

    def describe(self) -> dict[str, Any]:
        return {"provider": "podman", "id": self.id, "name": self.name, "run_id": self.run_id,
                "image": self.image, "runtime": self.runtime, "rootless": cli.rootless(),
                "cgroup_limits": cli.cgroup_limits()}


def remove(box_id: str) -> None:
    """Remove a box at once (``-t 0``: the warden, PID 1, ignores SIGTERM); a gone box is no error."""
    _live.pop(box_id, None)
    res = cli.run(["rm", "-f", "-t", "0", box_id], check=False, timeout=120)
    err = res.stderr.decode("utf-8", "replace")
    if res.returncode != 0 and "no such container" not in err.lower() and "no container with" not in err.lower():
        raise SandboxError(f"could not remove podman box {box_id[:12]}: {err.strip()[-300:]}")


def remove_all_live() -> None:
    ids = list(_live)
    if ids:
        with contextlib.suppress(Exception):  # best effort at exit
            cli.run(["rm", "-f", "-t", "0", *ids], check=False, timeout=120)
        for i in ids:
            _live.pop(i, None)


_swept = False


def start(spec: BoxSpec) -> PodmanBox:
    """A started hardened box, registered for removal at exit (``sandbox.base.install_cleanup``)."""
    global _swept
    cfg = spec.config
    if cfg.user.split(":")[0] in ("0", "root"):
        raise SandboxError("sandbox.user must not be root (uid 0)")
    if cfg.runtime == "runsc":
        raise SandboxError(RUNSC_REFUSED)
    image_id = ensure_image(cfg)
    if not _swept:
        _swept = True
        with contextlib.suppress(Exception):
            gc()
    lay = box_layout(cfg, spec.workspace, spec.gateway_dir, spec.run_id, ttl_s=spec.ttl_s, corpus=spec.corpus)
    flags = run_flags(lay, cfg)
    res = cli.run([*flags, image_id, *lay.command], check=False, timeout=300, cwd=spec.gateway_dir.parent)
    if res.returncode != 0 and b"image not known" in res.stderr:  # pruned since checked: check again
        forget(cfg)
        res = cli.run([*flags, ensure_image(cfg), *lay.command], check=False, timeout=300,
                      cwd=spec.gateway_dir.parent)
    if res.returncode != 0:
        with contextlib.suppress(Exception):
            cli.run(["rm", "-f", "-t", "0", lay.name], check=False, timeout=60)
        raise SandboxError(f"could not start the podman box: {res.stderr.decode('utf-8', 'replace').strip()[-600:]}")
    box_id = res.stdout.decode().strip().splitlines()[-1]
    _live[box_id] = lay.name
    return PodmanBox(box_id, lay.name, spec.run_id, spec.workspace, spec.gateway_dir, cfg.user, cfg.image,
                     cfg.runtime)


def gc(*, log: Log | None = None) -> GcResult:
    """Remove every fte-shell box of this user's podman whose owner is gone (same host) or TTL passed."""
    res = cli.run(["ps", "-a", "--filter", f"label={LABEL}=1", "--format", "json"], timeout=120, doing="listing boxes")

    def name(info: dict) -> str:
        names = info.get("Names") or ["?"]
        return names[0] if isinstance(names, list) else str(names)

    return remove_stale(((info["Id"], name(info), info.get("Labels") or {}, str(info.get("State", "")).lower())
                         for info in json.loads(res.stdout or b"[]") or []), remove, log)
