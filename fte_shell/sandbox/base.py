"""The sandbox provider seam: what a provider (docker, podman, bwrap) gives the provider-agnostic runtime.

A :class:`SandboxProvider` starts a :class:`Box` from a :class:`BoxSpec`; the box spawns the persistent
shell (a :class:`Spawn`, whose terminal the session drives), names its workspace and gateway socket,
signals its warden, and stops. The runtime (:mod:`.session`, :mod:`.facade`, :mod:`.pool`) only uses
these protocols; it never imports a provider's modules (the deployment → runtime split is one-way).

A box keeps the layout the image's helpers and warden expect (``sandbox/lib/warden.sh``): the workspace
read-only at ``/work``, the gateway directory read-only at :data:`GATEWAY_MOUNT`, a private size-capped
tmpfs at :data:`RUN_MOUNT`, and the warden (:data:`WARDEN`) as its main process; with ``[sandbox] corpus``
also the exported corpus read-only at ``/corpus`` (:attr:`BoxSpec.corpus`).

Providers: ``[sandbox] provider`` names one (:data:`PROVIDERS`): a built-in name
(:data:`fte_shell.config.SandboxProviderName`; provider ``NAME`` lives in the module
``fte_shell.sandbox.providers.NAME.provider`` as ``PROVIDER``) or a third-party one as ``module:attr``
(docs/ARCHITECTURE.md "Adding a sandbox provider").
"""

from __future__ import annotations

import atexit
import contextlib
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, get_args

from ..config import SandboxConfig, SandboxProviderName
from ..plugins import Registry

GATEWAY_MOUNT = "/run/fte"
"""Where the box sees its gateway directory (read-only)."""
GATEWAY_SOCKET = f"{GATEWAY_MOUNT}/gw.sock"
"""The gateway's socket inside the box (``FTE_GATEWAY``); on the host: ``gateway_dir / "gw.sock"``."""
SWEEP_REQUEST = "sweep"
"""File in the gateway directory (read-only in the box) where the host puts a fresh request before it
signals the warden (a token, the command's start on the box's clock, the shell's stdout between
commands): a sweep signal without a new token (one the agent sent) is ignored."""
SPAWN_REQUEST = "spawn"
"""File in the gateway directory where the host asks the warden for a new shell (a token, a terminal of
the box, the command's words): :mod:`.warden_shell`."""
RUN_MOUNT = "/opt/fte/run"
"""Private tmpfs of the session: per-command output files and the warden's state file (the shell's pid
and terminal, written once per shell)."""
WARDEN = "/opt/fte/lib/warden.sh"
"""The box's main process: dead-man timer (the TTL) and the enforcer of timeouts."""

Log = Callable[[str], None]


class ShellStream(Protocol):
    """The terminal of a spawned shell, as pexpect drives it: raw bytes both ways."""

    def send(self, s: bytes | str) -> int: ...

    def read_nonblocking(self, size: int = 1, timeout: float | None = -1) -> Any:
        """Bytes that arrived (waits up to ``timeout``): raises ``pexpect.TIMEOUT`` when none came,
        ``pexpect.EOF`` when the shell ended."""
        ...

    def isalive(self) -> bool: ...

    def close(self, force: bool = True) -> None: ...


class Spawn(Protocol):
    """A shell started in a box with a terminal."""

    child: ShellStream

    def exit_code(self, wait_s: float = 5.0) -> int | None:
        """The process's exit status once it ended (None when it runs on or nobody can say)."""
        ...


@dataclass
class BoxSpec:
    """What a provider needs to start one box."""

    config: SandboxConfig
    workspace: Path
    """Host directory mounted read-only at /work."""
    gateway_dir: Path
    """Host directory mounted read-only at :data:`GATEWAY_MOUNT`."""
    run_id: str
    ttl_s: int | None = None
    """The warden's dead-man timer (default ``config.ttl_s``)."""
    corpus: Path | None = None
    """Host directory bound read-only at ``/corpus`` (an exported corpus: :mod:`.corpus_files`); None = no
    ``/corpus``."""


class Box(Protocol):
    """A started box: one per sandbox."""

    id: str
    """The provider's id of the box (a container id for Docker)."""
    name: str
    run_id: str
    workspace: Path
    gateway_dir: Path
    direct_channel: bool
    """A FIFO this process makes in ``gateway_dir`` is the same FIFO for the box's shell, which then
    takes its commands and writes its reports over two of them past the engine's relay
    (:mod:`.channel`); False where the runtime does not pass host FIFOs through (gVisor)."""

    @property
    def gateway_socket(self) -> Path:
        """The host path of the gateway's socket (``gateway_dir / "gw.sock"``)."""
        ...

    def spawn(self, argv: list[str], *, timeout: float) -> Spawn:
        """Start ``argv`` in the box as ``config.user`` with a terminal (the persistent shell); raises
        :class:`SandboxError` when it cannot."""
        ...

    def root_pid(self) -> int | None:
        """This host's pid of the box's PID 1 (the warden) when this process can make terminals in the
        box's devpts through ``/proc/PID/root`` and signal the warden directly, so the warden can start a
        shell (:mod:`.warden_shell`); None where it cannot (not root, gVisor): shells then come from
        :meth:`spawn` alone."""
        ...

    def is_running(self) -> bool: ...

    def exec(self, argv: list[str]) -> tuple[int, str]:
        """Run one command to its end (for checks and repairs, not for the agent): (status, output)."""
        ...

    def signal_warden(self) -> None:
        """Send SIGUSR1 to the box's warden (after the sweep request was written)."""
        ...

    def terminal_argv(self, env: dict[str, str]) -> list[str]:
        """The host command that opens a person's interactive bash in the box (``fte-shell shell``)."""
        ...

    def stop(self) -> None:
        """Remove the box; one that is already gone is not an error."""
        ...

    def describe(self) -> dict[str, Any]:
        """What to record about the box: provider, id, name, run id and provider-specific facts."""
        ...


@dataclass
class BoxFields:
    """The fields every provider's box (a dataclass that is a :class:`Box`) starts with, and its gateway
    socket; each provider's box adds its own fields and the methods."""

    id: str
    name: str
    run_id: str
    workspace: Path
    gateway_dir: Path

    @property
    def gateway_socket(self) -> Path:
        return self.gateway_dir / Path(GATEWAY_SOCKET).name


@dataclass
class GcResult:
    removed: list[tuple[str, str]]
    """(name, reason) of each box removed."""
    kept: int
    """Boxes still owned by live processes."""
    dirs: int = 0
    """Temporary sandbox directories of dead owners removed."""
    images: int = 0
    """Superseded images removed (only with ``gc(images=True)``)."""
    reclaimed: int = 0
    """Bytes those images took."""


@dataclass
class Check:
    """One line of ``fte-shell sandbox doctor``."""

    name: str
    ok: bool
    detail: str
    fix: str = ""
    advisory: bool = False
    """Not ok here means a weaker guarantee, not a failure: the provider still works (the doctor says
    "note", not "FAIL"), and ``fix`` says how to get the stronger one (bwrap's limits without a cgroup)."""


class SandboxProvider(Protocol):
    """Starts boxes of one kind and looks after them (gc, doctor, image/toolchain preparation)."""

    name: str

    def start(self, spec: BoxSpec) -> Box:
        """A started, hardened box (registered for removal at exit and on SIGINT/SIGTERM)."""
        ...

    def prepare(self, cfg: SandboxConfig, *, force: bool = False, log: Log | None = None) -> str:
        """Make sure boxes can be started (Docker: the image is built and current); returns its id."""
        ...

    def status(self, cfg: SandboxConfig) -> tuple[bool, str]:
        """(ready, reason) of what :meth:`prepare` makes."""
        ...

    def gc(self, *, log: Log | None = None, images: bool = False) -> GcResult:
        """Remove boxes (and temporary directories) of dead owners or past their TTL; with ``images``
        also superseded images no box uses."""
        ...

    def doctor(self, cfg: SandboxConfig) -> list[Check]:
        """Check the set-up and the hardening of a real test box; each failed check names its fix."""
        ...

    @property
    def backend(self) -> str:
        """What the boxes run on, for messages (e.g. "the Docker daemon (unix:///var/run/docker.sock)")."""
        ...

    def probe(self, timeout_s: float = 10.0) -> str | None:
        """A quick check with fresh connections that boxes can start now: None when so, else why not."""
        ...

    def stop_all(self) -> None:
        """Remove every box this process started and has not removed."""
        ...


PROVIDERS: Registry[SandboxProvider] = Registry("sandbox provider", {
    name: f"{__package__}.providers.{name}.provider:PROVIDER" for name in get_args(SandboxProviderName)
})
"""The sandbox providers: each built-in name -> the ``PROVIDER`` of ``providers/<name>/provider.py``; a
third-party provider is ``[sandbox] provider = "module:attr"`` (docs/ARCHITECTURE.md "Adding a sandbox
provider")."""


def get_provider(name: str) -> SandboxProvider:
    """The provider called ``name`` (a built-in name or ``module:attr``; imported on first use, one per
    process); :class:`ConfigError` listing the known names otherwise."""
    return PROVIDERS.get(name)


def stop_all_boxes() -> None:
    """Remove every box this process started, whichever provider started it (best effort)."""
    for provider in PROVIDERS.loaded():
        provider.stop_all()



def exit_on_sigterm(signum: int, frame: object) -> None:
    """SIGTERM while nothing else handles it (:func:`install_cleanup`): end as the default would, but as a
    ``SystemExit`` that unwinds through ``with`` and ``finally`` blocks and atexit, so the boxes go too."""
    raise SystemExit(128 + signum)


_cleanup_lock = threading.Lock()
_at_exit = False


def install_cleanup() -> None:
    """Remove this process's boxes when it ends, without taking a signal from the program that embeds
    fte-shell: at exit (atexit, once: :func:`stop_all_boxes`), and on SIGTERM only while its handler is
    still the default (:func:`exit_on_sigterm`; set from the main thread only — a later call from there
    sets it). A handler the host program set is never replaced, and SIGINT stays Python's
    (KeyboardInterrupt unwinds the same way). A box whose owner dies without running any of this
    (SIGKILL, a host handler that exits at once) is removed by its provider: the warden's owner check,
    bwrap's ``--die-with-parent``."""
    global _at_exit
    with _cleanup_lock:
        if not _at_exit:
            _at_exit = True
            atexit.register(stop_all_boxes)
    if threading.current_thread() is threading.main_thread():
        with contextlib.suppress(ValueError, OSError):  # ValueError: not the main interpreter
            if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
                signal.signal(signal.SIGTERM, exit_on_sigterm)
