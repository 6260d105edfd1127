"""What every container provider's box is, whichever engine starts it: the hardened layout from
:class:`~fte_shell.config.SandboxConfig` (Docker maps it to SDK arguments, podman to CLI flags), and the
probe ``fte-shell sandbox doctor`` runs inside a real box to check it (provider-agnostic).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

from ..config import SandboxConfig
from .base import GATEWAY_MOUNT, GATEWAY_SOCKET, RUN_MOUNT, WARDEN, Check
from .corpus_files import CORPUS_MOUNT
from .ownership import name_part, owner_labels


@dataclass
class BoxLayout:
    """A hardened box: non-root, read-only root and /work, size-capped tmpfs, no network, no
    capabilities, no-new-privileges, pids/memory/CPU limits, the warden as main process, owner labels."""

    name: str
    command: list[str]
    user: str
    env: dict[str, str]
    tmpfs: dict[str, str]
    """Mount point -> mount options (size-capped, nosuid, nodev)."""
    binds: list[tuple[str, str]]
    """(host path, box path), all read-only."""
    labels: dict[str, str]
    read_only: bool
    pids_limit: int
    memory: str
    """Memory limit (docker/podman syntax, e.g. ``1g``); swap is the same (none beyond it)."""
    cpus: float
    init: bool
    """Add the engine's init (only when the warden is not protected as PID 1)."""
    cap_drop_all: bool
    no_new_privileges: bool
    runtime: str
    hostname: str = "sandbox"
    working_dir: str = "/work"
    shm_size: str = "16m"


RUNSC_PIDS_HEADROOM = 128
"""Added to the pids limit of a gVisor (runsc) box: the host cgroup holds gVisor's own Sentry and Gofer
with their threads too (measured here: with ``pids_limit = 128`` a runsc box died at its first timeout
sweep; with the headroom it holds)."""


GVISOR_PRELOAD = "/opt/fte/lib/gvisor_statx.so"
"""Preloaded in a gVisor (runsc) box: Debian 12's runsc refuses ``statx``/``newfstatat`` with
``AT_NO_AUTOMOUNT`` (EINVAL), which coreutils passes, so ``ls -l`` and ``stat`` fail there; this library
(``sandbox/lib/gvisor_statx.c``, built into the image) retries such a call without the flag."""


RUNSC_AS_SHARE = 0.75
"""A gVisor (runsc) box's shell and everything it starts get ``RLIMIT_AS`` = this share of the memory
limit: the Sentry (gVisor's kernel) holds the box's memory in the box's own memory cgroup, so a process
that fills it got the whole box killed by the host (the session lost); Debian 12's runsc has no
total-memory setting of its own. Under the rlimit the allocation fails inside the box (Python:
MemoryError) and the shell lives. It caps each process, not their sum: processes that together fill the
cgroup still end the box. The rest of the limit is the Sentry's own headroom."""


def shell_rlimit_as(cfg: SandboxConfig) -> int | None:
    """``RLIMIT_AS`` in bytes for the box's shell (set by its set-up, which it cannot raise); None but
    under gVisor (:data:`RUNSC_AS_SHARE`)."""
    if cfg.runtime != "runsc":
        return None
    from .output import size_bytes

    limit = size_bytes(cfg.memory)
    return int(limit * RUNSC_AS_SHARE) if limit else None


def _size(text: str) -> str:
    return text.strip().lower()


def box_layout(
    cfg: SandboxConfig, workspace: Path, gateway_dir: Path, run_id: str, *, ttl_s: int | None = None,
    corpus: Path | None = None,
) -> BoxLayout:
    """The hardened layout of one box for ``cfg`` (its name is fresh: ``fte-<run id>-<6 hex>``); ``corpus``:
    an exported corpus bound read-only at ``/corpus``."""
    ttl = int(cfg.ttl_s if ttl_s is None else ttl_s)
    env = dict(cfg.env)
    env["FTE_GATEWAY"] = GATEWAY_SOCKET
    if cfg.runtime == "runsc":
        env["LD_PRELOAD"] = GVISOR_PRELOAD
    return BoxLayout(
        name=f"fte-{name_part(run_id)}-{uuid.uuid4().hex[:6]}",
        command=["bash", WARDEN, str(ttl)],
        user=cfg.user,
        env=env,
        tmpfs={
            "/tmp": f"rw,exec,nosuid,nodev,size={_size(cfg.tmpfs_size)},mode=1777",
            RUN_MOUNT: f"rw,nosuid,nodev,noexec,size={_size(cfg.output_buffer_size)},mode=1777",
        },
        binds=[(str(workspace), "/work"), (str(gateway_dir), GATEWAY_MOUNT)]
        + ([(str(corpus), CORPUS_MOUNT)] if corpus is not None else []),
        labels=owner_labels(run_id, ttl),
        read_only=cfg.read_only_root,
        pids_limit=cfg.pids_limit + (RUNSC_PIDS_HEADROOM if cfg.runtime == "runsc" else 0),
        memory=cfg.memory,
        cpus=cfg.cpus,
        init=cfg.engine is not None and cfg.engine.init and not cfg.protect_warden,
        cap_drop_all=cfg.cap_drop_all,
        no_new_privileges=cfg.no_new_privileges,
        runtime=cfg.runtime,
    )


PROBE_SCRIPT = (
    "id -u; "
    "(touch /probe 2>/dev/null && echo rootfs=rw) || echo rootfs=ro; "
    "(touch /work/probe 2>/dev/null && echo work=rw) || echo work=ro; "
    "ls /sys/class/net 2>/dev/null | tr '\\n' ' '; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' "
    "| tr '\\n' ' '; echo; "
    "grep -E '^CapEff' /proc/self/status | tr -s '\\t ' ' ' | tr '\\n' ' '; "
    "python3 -c 'import ctypes; print(\"NoNewPrivs:\", ctypes.CDLL(None).prctl(39, 0, 0, 0, 0))'; "
    "(test -S /var/run/docker.sock || test -S /run/podman/podman.sock) && echo engine-sock || echo no-engine-sock"
)
"""Run inside a test box (as the sandbox user) by each provider's doctor; :func:`probe_checks` reads it."""


def probe_checks(out: str) -> list[Check]:
    """The hardening checks from the output of :data:`PROBE_SCRIPT`."""
    lines = out.splitlines() + [""] * 6
    interfaces = sorted(set(lines[3].split()))
    return [
        Check("non-root user", lines[0].strip() not in ("0", ""), f"uid {lines[0].strip()}", "set sandbox.user"),
        Check("read-only root", lines[1].strip() == "rootfs=ro", lines[1].strip(), "sandbox.read_only_root"),
        Check("read-only /work", lines[2].strip() == "work=ro", lines[2].strip(), "report a bug"),
        Check("no network", interfaces == ["lo"], f"interfaces: {' '.join(interfaces)}",
              "sandbox.network_mode must be none"),
        Check(
            "no capabilities, no-new-privileges",
            "CapEff: 0000000000000000" in lines[4] and "NoNewPrivs: 1" in lines[4],
            lines[4].strip(),
            "sandbox.cap_drop_all / sandbox.no_new_privileges",
        ),
        Check("no engine socket", lines[5].strip() == "no-engine-sock", lines[5].strip(), "report a bug"),
    ]
