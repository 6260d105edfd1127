"""bubblewrap as a sandbox provider: a box per sandbox with no daemon and no root (:mod:`.box`), over a
root file system exported once from the sandbox image (:mod:`.rootfs`), limited by a cgroup when the
user may make one and else by rlimits (:mod:`.limits`)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from ....config import SandboxConfig
from ....errors import SandboxError
from ...base import GATEWAY_MOUNT, BoxSpec, Check, GcResult, Log
from ...ownership import LABEL, _owner_alive, gc_dirs, owner_gone
from . import box as B
from . import launch
from . import limits as L
from . import rootfs as R

FIX_USERNS = ("unprivileged user namespaces are off: sysctl kernel.unprivileged_userns_clone=1 "
              "(Debian/Ubuntu) or sysctl user.max_user_namespaces=15000 (RHEL); on Ubuntu 24.04 also "
              "kernel.apparmor_restrict_unprivileged_userns=0")


def _userns_problem(timeout_s: float = 10.0) -> str | None:
    """None when an unprivileged ``bwrap --unshare-all`` runs here, else why not."""
    exe = shutil.which("bwrap")
    if exe is None:
        return "bwrap is not installed (apt-get install bubblewrap)"
    argv = [exe, "--unshare-all", "--ro-bind", "/", "/", "--dev", "/dev",
            "--proc", "/proc", "--", "/bin/true"]
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False,
                           **launch.as_box_user(SandboxConfig()))
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"bwrap did not run: {e}"
    if r.returncode != 0:
        return f"bwrap --unshare-all failed: {r.stderr.strip()[:300]}"
    return None


RUNTIME_REFUSED = ("bwrap boxes have no OCI runtime: [sandbox] runtime = {runtime!r} is for docker (runsc: "
                   "gVisor, registered by bash sandbox/setup-host.sh --runtime runsc); use runtime runc with bwrap")


class BwrapProvider:
    """Boxes are bubblewrap sandboxes (see :mod:`.box`)."""

    name = "bwrap"

    def __init__(self) -> None:
        self._swept = False

    def start(self, spec: BoxSpec) -> B.BwrapBox:
        if spec.config.runtime != "runc":
            raise SandboxError(RUNTIME_REFUSED.format(runtime=spec.config.runtime))
        rootfs = R.ensure(spec.config)
        if not self._swept:
            self._swept = True
            with contextlib.suppress(Exception):
                self.gc(cfg=spec.config)
        return B.start(spec, rootfs)

    def prepare(self, cfg: SandboxConfig, *, force: bool = False, log: Log | None = None) -> str:
        rf = R.ensure(cfg, force=force, log=log)
        return f"{rf.key} ({rf.path})"

    def status(self, cfg: SandboxConfig) -> tuple[bool, str]:
        try:
            rf = R.find(cfg)
        except Exception as e:  # noqa: BLE001
            return False, str(e)
        if rf is None:
            src = cfg.bwrap.rootfs or f"the image {cfg.image}"
            return False, f"no bwrap root file system for {src} in {R.cache_dir(cfg)} yet ({R.MAKE_AS_ROOT})"
        return True, f"root file system {rf.key} at {rf.path}"

    def gc(self, *, log: Log | None = None, images: bool = False, cfg: SandboxConfig | None = None) -> GcResult:
        """Boxes die with their owner (``--die-with-parent``) and at their TTL (the warden); what a dead
        owner can leave is its boxes' cgroups, its temporary directories, and a box whose owner died while
        bwrap started (``--die-with-parent`` then misses it: containers/bubblewrap#633) — killed here."""

        def alive(pid: str, start: str) -> bool:
            return _owner_alive({f"{LABEL}.owner-pid": pid, f"{LABEL}.owner-start": "" if start == "0" else start})

        orphans = kill_orphaned_boxes()
        n = L.gc_cgroups(cfg or SandboxConfig(), alive)
        removed = [(f"bwrap box process {pid}", "its owner process is gone") for pid in orphans]
        removed += [(f"cgroup of a box of a dead process #{i + 1}", "its owner process is gone") for i in range(n)]
        dirs = gc_dirs()
        if log and (orphans or n or dirs):
            log(f"removed {len(orphans)} orphaned box process(es), {n} box cgroup(s) and {dirs} temporary sandbox "
                "director(ies) of dead processes")
        return GcResult(removed=removed, kept=len(B._live), dirs=dirs)

    def doctor(self, cfg: SandboxConfig) -> list[Check]:
        checks: list[Check] = []
        problem = _userns_problem()
        checks.append(Check("unprivileged user namespaces (bwrap --unshare-all)", problem is None,
                            problem or f"{shutil.which('bwrap')} runs", "" if problem is None else
                            ("apt-get install bubblewrap" if "not installed" in problem else FIX_USERNS)))
        if problem is not None:
            return checks
        ok, reason = self.status(cfg)
        checks.append(Check("root file system", ok, reason, "" if ok else
                            f"{R.MAKE_AS_ROOT} (makes it without Docker, for every user), or fte-shell "
                            "sandbox build where Docker or podman has the image, or set sandbox.bwrap.rootfs to a tar "
                            "of it (docker export)"))
        if not ok:
            return checks
        lim = L.make(cfg)
        lim.remove()
        cg = any(v.startswith("cgroup") for v in lim.enforced.values())
        checks.append(Check("limits", cg, "; ".join(f"{k}: {v}" for k, v in lim.enforced.items()),
                            "" if cg else "for whole-box memory/CPU limits, ask the admin for a delegated "
                            "cgroup and set sandbox.bwrap.cgroup_parent (see docs/hpc.md)", advisory=True))
        checks.extend(self._box_checks(cfg))
        return checks

    def _box_checks(self, cfg: SandboxConfig) -> list[Check]:
        from ...facade import Sandbox

        with tempfile.TemporaryDirectory(prefix="fte-doctor-"):
            try:
                sb = Sandbox(cfg.model_copy(update={"provider": "bwrap"}))
            except SandboxError as e:
                return [Check("a test box", False, str(e), "report a bug")]
            with sb:
                script = ("id -u; (touch /probe 2>/dev/null && echo rootfs=rw) || echo rootfs=ro; "
                          "(touch /work/probe 2>/dev/null && echo work=rw) || echo work=ro; "
                          "ls /sys/class/net 2>/dev/null | tr '\\n' ' '; echo; "
                          "grep -E '^(CapEff|NoNewPrivs)' /proc/self/status | tr -s '\\t ' ' ' | tr '\\n' ' '; "
                          "echo; echo pid1=$(cat /proc/1/comm)")
                lines = sb.run(script).output.splitlines() + [""] * 6
        return [
            Check("non-root user", lines[0].strip() not in ("0", ""), f"uid {lines[0].strip()}", "set sandbox.user"),
            Check("read-only root", lines[1].strip() == "rootfs=ro", lines[1].strip(), "report a bug"),
            Check("read-only /work", lines[2].strip() == "work=ro", lines[2].strip(), "report a bug"),
            Check("no network", lines[3].strip() == "", f"interfaces: {lines[3].strip() or 'none (no /sys)'}",
                  "report a bug"),
            Check("no capabilities, no-new-privileges",
                  "CapEff: 0000000000000000" in lines[4] and "NoNewPrivs: 1" in lines[4], lines[4].strip(),
                  "report a bug"),
            Check("the warden is PID 1", lines[5].strip() == "pid1=bash", lines[5].strip(),
                  "sandbox.protect_warden"),
        ]

    @property
    def backend(self) -> str:
        return f"bubblewrap ({shutil.which('bwrap') or 'bwrap not on PATH'})"

    def probe(self, timeout_s: float = 10.0) -> str | None:
        return _userns_problem(timeout_s)

    def stop_all(self) -> None:
        B.stop_all()


PROVIDER = BwrapProvider()


def kill_orphaned_boxes(proc: Path = Path("/proc")) -> list[int]:
    """SIGKILL every bwrap box (and what runs under it) whose owner is gone, and return their bwrap PIDs.
    A box is a ``bwrap`` process binding a sandbox directory's ``gw`` at the gateway mount
    (``--ro-bind TMP/gw /run/fte``, :func:`.launch.bwrap_argv`); its owner is TMP's owner file."""
    children: dict[int, list[int]] = {}
    boxes: list[int] = []
    for p in proc.iterdir():
        if not p.name.isdigit():
            continue
        try:
            ppid = int((p / "stat").read_text().rsplit(")", 1)[1].split()[1])
            argv = (p / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(p.name))
        if Path(argv[0]).name == "bwrap":
            gw = next((argv[i + 1] for i in range(len(argv) - 2)
                       if argv[i] == "--ro-bind" and argv[i + 2] == GATEWAY_MOUNT), None)
            if gw and owner_gone(Path(gw).parent):
                boxes.append(int(p.name))
    for pid in boxes:
        tree, i = [pid], 0
        while i < len(tree):
            tree += children.get(tree[i], [])
            i += 1
        for p_ in tree:
            with contextlib.suppress(OSError):
                os.kill(p_, signal.SIGKILL)
    return boxes
