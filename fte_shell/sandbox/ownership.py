"""Who owns a sandbox box or directory, when gc may remove it, and the host's word to the warden
(provider-agnostic: no Docker needed here).

A box's labels and a temporary directory's owner file name the owning process (pid, its start time,
host); :func:`stale_reason` is gc's rule. :func:`write_sweep_request` is the host's request the warden
checks before it acts on a signal (with the command's start on the box's clock, :func:`box_clock_offset`).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple

from ..errors import SandboxError
from .base import SWEEP_REQUEST, GcResult, Log

LABEL = "fte-shell"


def _proc_start(pid: int) -> str:
    """Start time of ``pid`` in clock ticks since boot ('' when unknown): detects pid reuse."""
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
        return data[data.rfind(b")") + 2 :].split()[19].decode()
    except (OSError, IndexError):
        return ""


HOST = socket.gethostname()


def owner_labels(run_id: str, ttl_s: int) -> dict[str, str]:
    """The labels that tie a container to this process."""
    return {
        LABEL: "1",
        f"{LABEL}.run-id": run_id,
        f"{LABEL}.owner-pid": str(os.getpid()),
        f"{LABEL}.owner-start": _proc_start(os.getpid()),
        f"{LABEL}.owner-host": HOST,
        f"{LABEL}.created": f"{time.time():.3f}",
        f"{LABEL}.ttl": str(int(ttl_s)),
    }


def _owner_alive(labels: dict[str, str]) -> bool:
    try:
        pid = int(labels.get(f"{LABEL}.owner-pid", ""))
    except ValueError:
        return False
    if pid <= 0 or not Path(f"/proc/{pid}").exists():
        return False
    want = labels.get(f"{LABEL}.owner-start", "")
    return not want or _proc_start(pid) == want


START_GRACE_S = 300.0
"""How long gc gives a container to get from its ``created`` label to running: docker create + start
can take minutes on a loaded host. A container still ``created`` after this never started; a TTL counts
from its start, which gc cannot see, so gc adds this grace to the TTL (the warden itself stops the
container at its TTL)."""


def stale_reason(labels: dict[str, str], status: str, now: float | None = None) -> str | None:
    """Why a labelled container may be removed by gc (None = it is still owned and alive).

    A live owner's container is never removed while it may still be starting (``created``) or running
    within its TTL: only its owner removes it then."""
    now = time.time() if now is None else now
    try:
        created = float(labels.get(f"{LABEL}.created", "0"))
        ttl = float(labels.get(f"{LABEL}.ttl", "0"))
    except ValueError:
        return "unreadable labels"
    if labels.get(f"{LABEL}.owner-host") == HOST and not _owner_alive(labels):
        return f"its owner process {labels.get(f'{LABEL}.owner-pid')} is gone"
    if now - created > ttl + START_GRACE_S:
        return "its TTL has passed"
    if status in ("exited", "dead"):  # its warden ended (auto_remove deletes it too)
        return f"it is {status}"
    if status == "created" and now - created > START_GRACE_S:
        return "it was created but never started"
    return None


OWNER_FILE = ".fte-owner"
"""Written into each sandbox's temporary directory: ``PID START HOST KEEP`` (KEEP 1 = never gc it)."""


def write_owner_file(tmp_dir: Path, keep: bool) -> None:
    """Mark a sandbox's temporary directory as this process's (so gc can remove it if we die)."""
    (tmp_dir / OWNER_FILE).write_text(f"{os.getpid()} {_proc_start(os.getpid()) or '-'} {HOST} {int(keep)}\n")


LINKS_FILE = ".fte-links"
"""Beside :data:`OWNER_FILE`: the paths that were made links to the box's workspace (a run directory's
``workspace`` while a box started ahead serves it), one a line."""


def note_link(box_workspace: Path, link: Path) -> None:
    """Record that ``link`` points at ``box_workspace`` (a sandbox's own ``work`` directory), so a gc of
    that sandbox's directory after its owner died turns the link into a copy (:func:`gc_dirs`) instead of
    leaving it dangling. Nothing for a workspace that is no sandbox's own."""
    tmp = box_workspace.resolve().parent
    if (tmp / OWNER_FILE).exists():
        with (tmp / LINKS_FILE).open("a", encoding="utf-8") as f:
            f.write(f"{link}\n")


def _keep_links(tmp: Path) -> None:
    """Each link :func:`note_link` recorded into ``tmp`` that still points there becomes a copy of what
    it shows (the workspace of a run whose process died while its box served it)."""
    try:
        links = (tmp / LINKS_FILE).read_text(encoding="utf-8").splitlines()
    except OSError:
        return
    for line in links:
        link = Path(line)
        try:
            target = link.resolve()
            if not link.is_symlink() or not target.is_relative_to(tmp.resolve()) or not target.is_dir():
                continue
            copy = link.with_name(f".{link.name}-copy")
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(target, copy, symlinks=True)
            link.unlink()
            copy.rename(link)
        except OSError:  # best effort: a run directory removed meanwhile
            continue


def remove_stale(boxes: Iterable[tuple[str, str, dict[str, str], str]], remove: Callable[[str], None],
                 log: Log | None = None) -> GcResult:
    """gc's one rule over a provider's labelled boxes, each ``(id, name, labels, state)``: every stale box
    (:func:`stale_reason`) is removed with ``remove`` (a :class:`SandboxError` is logged and the box kept),
    then the temporary directories of dead processes (:func:`gc_dirs`)."""
    removed: list[tuple[str, str]] = []
    kept = 0
    for box_id, name, labels, state in boxes:
        reason = stale_reason(labels, state)
        if reason is None:
            kept += 1
            continue
        try:
            remove(box_id)
        except SandboxError as e:
            if log:
                log(str(e))
            continue
        removed.append((name, reason))
        if log:
            log(f"removed {name}: {reason}")
    dirs = gc_dirs()
    if log and dirs:
        log(f"removed {dirs} temporary sandbox director{'y' if dirs == 1 else 'ies'} of dead processes")
    return GcResult(removed=removed, kept=kept, dirs=dirs)


def gc_dirs(root: Path | None = None) -> int:
    """Remove temporary sandbox directories (``fte-*`` with an owner file) whose owner on this host is
    gone and that were not meant to be kept; returns how many."""
    base = Path(root or tempfile.gettempdir())
    removed = 0
    for d in base.glob("fte-*"):
        owner = _owner_state(d)
        if owner is None or owner.keep or not owner.gone:
            continue
        _keep_links(d)
        shutil.rmtree(d, ignore_errors=True)
        removed += 1
    return removed


class _Owner(NamedTuple):
    gone: bool
    """The process named by the owner file was on this host and is gone."""
    keep: bool
    """The directory is never to be removed by gc."""


def _owner_state(tmp: Path) -> _Owner | None:
    """What ``tmp``'s owner file says (:data:`OWNER_FILE`); None without a readable one."""
    try:
        pid, start, host, keep = (tmp / OWNER_FILE).read_text().split()
    except (OSError, ValueError):
        return None
    labels = {f"{LABEL}.owner-pid": pid, f"{LABEL}.owner-start": "" if start == "-" else start}
    return _Owner(gone=host == HOST and not _owner_alive(labels), keep=keep == "1")


def owner_gone(tmp: Path) -> bool:
    """Whether the process that made the sandbox directory ``tmp`` (its owner file) is gone from this host;
    also when ``tmp`` itself is gone (gc removed it: its owner was)."""
    owner = _owner_state(tmp)
    return not tmp.exists() if owner is None else owner.gone


def name_part(run_id: str) -> str:
    """A name-safe form of a run id for box and directory names (the label keeps the id as given)."""
    return re.sub(r"[^a-zA-Z0-9_.-]+", "-", run_id).strip("-.")[:48] or "run"


def write_sweep_request(request_dir: Path, start_cs: int, idle_stdout: str) -> None:
    """Ask the warden for a sweep of the running command: put ``TOKEN START_CS IDLE_STDOUT`` in the box's
    gateway directory (read-only inside; the warden ignores a signal without a new token).

    ``start_cs``: when the command was sent, in hundredths of a second of the box's clock
    (:func:`box_clock_offset`): the warden kills the processes started since. ``idle_stdout``: the
    shell's stdout between commands as the box names it (``-``: its terminal): while the shell's stdout
    is something else it is running the command, and the warden interrupts it too."""
    if not idle_stdout or any(c.isspace() for c in idle_stdout):
        raise SandboxError(f"the shell's stdout {idle_stdout!r} cannot go into a sweep request")
    tmp = Path(request_dir) / f".{SWEEP_REQUEST}.{secrets.token_hex(4)}"
    try:
        tmp.write_text(f"{secrets.token_hex(12)} {int(start_cs)} {idle_stdout}\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, Path(request_dir) / SWEEP_REQUEST)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise SandboxError(f"could not write the sweep request in {request_dir}: {e}") from e


def box_clock_offset(box_uptime: float, sent: float, received: float) -> float:
    """Seconds to add to this host's ``CLOCK_BOOTTIME`` (the clock of /proc/uptime and of the start times
    in /proc/PID/stat) to get the box's /proc/uptime, from one reading of the box's uptime
    (``box_uptime``, in hundredths: it may be up to 0.01 s behind) taken between ``sent`` and
    ``received`` on this host's clock.

    A box on this host's kernel (runc, podman, bwrap) shares the clock: when the reading allows an
    offset of 0 it is 0, exactly. Else (gVisor keeps its own uptime) the smallest offset the reading
    allows: a command's start on the box's clock then errs early, never late, so a sweep never misses a
    process the command started."""
    low, high = box_uptime - received, box_uptime + 0.01 - sent
    return 0.0 if low <= 0.0 <= high else low
