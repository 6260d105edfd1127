"""``fte-shell sandbox doctor`` for podman: the CLI, rootless prerequisites, cgroup limits, the image,
and the hardening of a real test box (the shared probe), each failed check with its fix."""

from __future__ import annotations

import getpass
import os
import shutil
import tempfile
from pathlib import Path

from ....config import SandboxConfig
from ....errors import SandboxError
from ...base import BoxSpec, Check
from ...hardening import PROBE_SCRIPT, probe_checks
from . import box, cli
from .image import IMAGES


def _has_subids(user: str) -> bool:
    for path in ("/etc/subuid", "/etc/subgid"):
        try:
            if not any(line.split(":")[0] in (user, str(os.getuid())) for line in Path(path).read_text().splitlines()):
                return False
        except OSError:
            return False
    return True


def doctor(cfg: SandboxConfig) -> list[Check]:
    checks: list[Check] = []
    try:
        checks.append(Check("podman", True, f"podman {cli.version()} ({'rootless' if cli.rootless() else 'rootful'})"))
    except SandboxError as e:
        return [Check("podman", False, str(e), cli.FIX_INSTALL)]
    if cli.rootless():
        user = getpass.getuser()
        ok = shutil.which("newuidmap") is not None and _has_subids(user)
        checks.append(Check("rootless: uidmap and subuid/subgid", ok,
                            "newuidmap and ranges present" if ok else f"no newuidmap or no /etc/subuid+subgid range for {user}",
                            f"apt-get install uidmap; usermod --add-subuids 100000-165535 --add-subgids 100000-165535 {user}"))
        if not ok:
            return checks
    if cfg.runtime == "runsc":
        checks.append(Check("runtime runsc", False, box.RUNSC_REFUSED, "use runtime runc with podman"))
        return checks
    limits = cli.cgroup_limits()
    checks.append(Check("cgroup limits", limits,
                        "memory/pids/CPU limits by cgroup" if limits else
                        "rootless podman on cgroup v1: no memory/CPU limits; processes capped by the nproc rlimit only",
                        "boot with cgroup v2 (systemd.unified_cgroup_hierarchy=1) and delegate it, or run as root"))
    try:
        ok, reason = IMAGES.status(cfg)
    except SandboxError as e:
        ok, reason = False, str(e)
    checks.append(Check("sandbox image", ok, reason,
                        "" if ok else "fte-shell sandbox build --sandbox-provider podman (loads it from Docker or builds it)"))
    if not ok:
        return checks
    with tempfile.TemporaryDirectory(prefix="fte-doctor-") as tmp:
        ws, gw = Path(tmp, "work"), Path(tmp, "gw")
        for d in (Path(tmp), ws, gw):
            d.mkdir(exist_ok=True)
            os.chmod(d, 0o755)
        try:
            b = box.start(BoxSpec(cfg, ws, gw, "doctor", ttl_s=120))
        except SandboxError as e:
            checks.append(Check("test box", False, str(e), "see the message; podman info shows the host's set-up"))
            return checks
        try:
            _, out = b.exec(["bash", "-c", PROBE_SCRIPT])
            checks.extend(probe_checks(out))
        finally:
            box.remove(b.id)
    return checks
