"""The podman CLI and what this host allows it: rootless or not, cgroup limits or only rlimits, and
ulimits inside the host's hard limits (podman's defaults exceed them on some hosts and then fail with
"error setting rlimits … operation not permitted")."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
from functools import cache
from pathlib import Path

from ....errors import SandboxError
from ...host_signals import signal_defaults

FIX_INSTALL = "install podman: apt-get install podman uidmap (or: bash sandbox/setup-host.sh --tests)"
ENV_KEYS = ("PATH", "HOME", "USER", "LOGNAME", "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "XDG_DATA_HOME",
            "CONTAINERS_CONF", "CONTAINERS_STORAGE_CONF", "CONTAINERS_REGISTRIES_CONF", "TMPDIR")
"""The host variables the podman client gets (nothing else of the host's environment; none enters a box)."""


def binary() -> str:
    path = shutil.which("podman")
    if path is None:
        raise SandboxError(f"podman is not installed; {FIX_INSTALL}")
    return path


def client_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k in ENV_KEYS}


def rootless() -> bool:
    """Podman runs rootless when this process is not root (its boxes live in the user's namespace)."""
    return os.geteuid() != 0


@cache
def cgroup_v2() -> bool:
    """The host has the unified cgroup hierarchy only (rootless podman can then set limits, if delegated)."""
    return Path("/sys/fs/cgroup/cgroup.controllers").exists()


def cgroup_limits() -> bool:
    """Whether podman can put this host's boxes under memory/pids/CPU cgroup limits: rootful always;
    rootless only on cgroup v2 (on v1 podman ignores the limits: "not supported … on cgroups V1 rootless")."""
    return not rootless() or cgroup_v2()


PODMAN_NPROC_MAX = 32768
"""Podman lowers its own (and conmon's) nproc hard limit to this; a box may not ask for more."""


def ulimits(pids_limit: int) -> list[str]:
    """``--ulimit`` flags within this process's hard limits. nproc counts every process of the box's uid
    on the host user namespace (shared by all boxes), so with cgroup limits it is left at the hard limit
    (the pids cgroup caps each box); without them it is the only process cap: ``pids_limit``."""
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    nproc = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    n_files = 65536 if nofile == resource.RLIM_INFINITY else min(nofile, 65536)
    n_proc = pids_limit if not cgroup_limits() else PODMAN_NPROC_MAX
    if nproc != resource.RLIM_INFINITY:
        n_proc = min(n_proc, nproc)
    return ["--ulimit", f"nofile={n_files}:{n_files}", "--ulimit", f"nproc={n_proc}:{n_proc}"]


def run(args: list[str], *, timeout: float = 120, stdin: bytes | None = None, check: bool = True,
        doing: str = "", cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    """``podman --log-level=error ARGS`` (in ``cwd``: a box's own temporary directory for ``run``, whose
    conmon writes an empty file ``oom`` into its working directory when the box's memory runs out); a
    failure (when ``check``) raises SandboxError with its stderr."""
    try:
        res = subprocess.run([binary(), "--log-level=error", *args], check=False, input=stdin, capture_output=True,
                             timeout=timeout, env=client_env(), cwd=cwd, **signal_defaults())
    except subprocess.TimeoutExpired as e:
        raise SandboxError(f"podman {args[0]} did not answer in {timeout:.0f} s while {doing or args[0]}") from e
    if check and res.returncode != 0:
        err = res.stderr.decode("utf-8", "replace").strip()[-600:]
        raise SandboxError(f"podman {args[0]} failed while {doing or args[0]} (exit {res.returncode}): {err}")
    return res


def version() -> str:
    return run(["version", "--format", "{{.Client.Version}}"], timeout=30, doing="asking its version").stdout.decode().strip()
