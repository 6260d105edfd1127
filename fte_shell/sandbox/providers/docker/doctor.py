"""``fte-shell sandbox doctor``: the daemon, the images and the hardening of a real test container, each
check with its fix."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from ....config import SandboxConfig
from ....errors import SandboxUnavailable
from ...base import Check
from ...hardening import PROBE_SCRIPT, probe_checks
from . import container as _container
from .api import FIX_DAEMON, client, exec_text
from .image import IMAGES


def doctor(cfg: SandboxConfig | None = None) -> list[Check]:
    """Check the daemon, the image and the hardening of a real test container; each check names its fix."""
    cfg = cfg or SandboxConfig()
    checks: list[Check] = []
    try:
        info = client().info()
        checks.append(Check("daemon", True, f"Docker {info.get('ServerVersion')} answers"))
        if cfg.runtime != "runc":
            ok = cfg.runtime in (info.get("Runtimes") or {})
            checks.append(Check(f"runtime {cfg.runtime}", ok, f"registered with dockerd: {'yes' if ok else 'no'}",
                                f"bash sandbox/setup-host.sh --runtime {cfg.runtime}"))
            if not ok:
                return checks
    except SandboxUnavailable as e:
        checks.append(Check("daemon", False, str(e), FIX_DAEMON))
        return checks
    try:
        client().images.get(cfg.base_image)
        checks.append(Check("base image", True, f"{cfg.base_image} exists"))
    except Exception:  # noqa: BLE001
        checks.append(
            Check("base image", False, f"{cfg.base_image} is missing", "bash sandbox/bootstrap-base.sh")
        )
    try:
        ok, reason = IMAGES.status(cfg)
    except Exception as e:  # noqa: BLE001
        ok, reason = False, str(e)
    checks.append(Check("sandbox image", ok, reason, "" if ok else "fte-shell sandbox build"))
    if not ok:
        return checks
    with tempfile.TemporaryDirectory(prefix="fte-doctor-") as tmp:
        ws, gw = Path(tmp, "work"), Path(tmp, "gw")
        ws.mkdir(mode=0o755)
        gw.mkdir(mode=0o755)
        os.chmod(ws, 0o755)
        os.chmod(gw, 0o755)
        h = _container.create(cfg, ws, gw, "doctor", ttl_s=120)
        try:
            checks.extend(_hardening_checks(h.id, cfg))
        finally:
            _container.remove(h.id)
    return checks


def _hardening_checks(cid: str, cfg: SandboxConfig) -> list[Check]:
    _, out = exec_text(cid, ["bash", "-c", PROBE_SCRIPT], cfg.user)
    attrs = client().api.inspect_container(cid)["HostConfig"]
    return [
        *probe_checks(out),
        Check(
            "limits",
            bool(attrs.get("PidsLimit"))
            and attrs.get("Memory") == attrs.get("MemorySwap")
            and bool(attrs.get("NanoCpus")),
            f"pids {attrs.get('PidsLimit')}, memory {attrs.get('Memory')}, "
            f"memswap {attrs.get('MemorySwap')}, nano_cpus {attrs.get('NanoCpus')}",
            "check sandbox.pids_limit / memory / cpus",
        ),
    ]
