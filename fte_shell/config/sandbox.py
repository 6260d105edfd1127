"""``[sandbox]``, its provider tables (``[sandbox.docker]``, ``[sandbox.podman]``, ``[sandbox.bwrap]``) and
``[sandbox.fetch_policy]``: the per-question box, what only one provider reads, and the fetch gateway's policy.

``[sandbox]`` holds what every box is whichever provider starts it (the image, the user, the hardening,
limits, timeouts, output caps, the workspace, the corpus at /corpus); ``provider`` chooses the box's
maker and the table of the same name holds that provider's own settings (the other tables are ignored).
Keys that moved from ``[sandbox]`` into a provider table (:data:`MOVED`) are still read at their old place,
with a one-line note naming the new one.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import Field, field_validator, model_validator

from ..plugins import is_reference
from .base import StrictModel


class FetchPolicy(StrictModel):
    """What the fetch gateway may reach and how much it may download for one question."""

    allow_private: list[str] = Field(default_factory=list)
    """Hosts (``host`` or ``host:port``) that may be reached although they resolve to a loopback, private
    or otherwise non-public address. Needed for loopback test servers; empty by default."""

    allow_hosts: list[str] = Field(default_factory=list)
    """If not empty, only hosts matching one of these patterns may be fetched. A pattern is a host name,
    ``*.example.com`` (the domain and its subdomains) or an fnmatch glob."""

    deny_hosts: list[str] = Field(default_factory=list)
    """Hosts matching any of these patterns are refused (same syntax as ``allow_hosts``); e.g. keep
    benchmark answer pages out. Deny wins over allow."""

    max_bytes: int = 10_000_000
    """Cap on the raw (decompressed) bytes of one response; the body is streamed and cut at this size."""

    timeout_s: float = 30.0
    """Wall-clock limit for one fetch, connection through last byte, redirects included."""

    max_redirects: int = 5
    """Redirects followed per fetch; every hop is checked against the policy again."""

    max_fetches: int = 100
    """Pages a question may newly fetch (already-held pages do not count)."""

    max_total_bytes: int = 200_000_000
    """Raw bytes a question may download in total."""

    max_requests: int = 300
    """Downloads a question may attempt, failed and refused ones included: every fetch not served from
    the workspace, the local corpus or the page cache counts. Bounds how hard an agent can hammer servers
    with failing fetches (``max_fetches`` counts only successes)."""

    user_agent: str = "fte-shell/0.1 (+https://github.com/fte-shell/fte-shell; research search agent)"
    """User-Agent header sent with every request."""

    render_js: bool = False
    """Opt-in: render HTML pages with a headless Chromium (Debian's ``chromium``) over CDP before
    conversion. Slower (about 1.6 s and 0.9 GB per page); off by default."""


SandboxProviderName = Literal["docker", "podman", "bwrap"]
"""The built-in sandbox providers (each is the module ``fte_shell.sandbox.providers.<name>.provider``, and
its settings are the table ``[sandbox.<name>]``); a third-party one is ``module:attr``
(:data:`fte_shell.sandbox.base.PROVIDERS`)."""

PROVIDER_TABLES: tuple[str, ...] = get_args(SandboxProviderName)
"""``[sandbox]``'s provider tables, in this order: one per built-in provider, named after it (a field of
:class:`SandboxConfig`; tests/test_sandbox_tables.py checks each is)."""


class EngineBoxConfig(StrictModel):
    """What a container engine's box (Docker's, podman's) has that bwrap's has not."""

    init: bool = True
    """Run the engine's init process (tini) as PID 1's parent to reap zombies; only used when
    ``[sandbox] protect_warden`` is false (else the warden is PID 1 and reaps them itself)."""


class DockerConfig(EngineBoxConfig):
    """``[sandbox.docker]``: boxes as containers of the Docker daemon."""


class PodmanConfig(EngineBoxConfig):
    """``[sandbox.podman]``: boxes as containers of podman's CLI (rootful as root, rootless as a user)."""


class BwrapConfig(StrictModel):
    """``[sandbox.bwrap]``: boxes of bubblewrap over the image's files exported once (docs/hpc.md)."""

    rootfs: Path | None = None
    """The box's root file system, a directory (an exported tree, e.g. on shared storage) or a tar of the
    sandbox image (``docker export``), extracted once into ``rootfs_cache``. None = the tree of
    ``[sandbox] image``, exported from Docker or podman the first time and cached by the image's content
    hash."""

    rootfs_cache: Path | None = None
    """Where exported root file systems are kept (one directory per content hash); None =
    ``~/.cache/fte-shell/rootfs`` (``/var/cache/fte-shell/rootfs`` for root)."""

    cgroup_parent: str | None = None
    """A cgroup the admin delegated to you (path inside the cgroup tree, the same in every v1 controller),
    under which each box gets a cgroup of its own for memory, pids and CPU. None = ``fte-shell`` when run as
    root, else no cgroup: rlimits (pids per box, memory per process, CPU not limited)."""


MOVED: dict[str, tuple[str, ...]] = {
    "init": ("docker", "podman"),
    "rootfs": ("bwrap",),
    "rootfs_cache": ("bwrap",),
    "cgroup_parent": ("bwrap",),
}
"""Keys that were ``[sandbox]``'s and are now a provider table's: key -> the tables that have it. An old
config's key goes to the table of its ``provider`` when that table has it, else to the first one."""

MOVED_UNTIL = "0.3.0"
"""The first release that no longer reads the keys of :data:`MOVED` at their old place."""


def moved_table(key: str, provider: str) -> str:
    """The provider table an old ``[sandbox] key`` belongs to under ``provider``."""
    tables = MOVED[key]
    return provider if provider in tables else tables[0]


def _move_old_keys(data: dict[str, Any]) -> dict[str, Any]:
    provider = str(data.get("provider", "docker"))
    out = dict(data)
    for key in MOVED:
        if key not in out:
            continue
        table = moved_table(key, provider)
        sub = out.get(table)
        sub = dict(sub) if isinstance(sub, dict) else {} if sub is None else sub
        if not isinstance(sub, dict):  # a model instance given in Python: leave both for pydantic to report
            continue
        if key in sub:
            raise ValueError(f"[sandbox] {key} and [sandbox.{table}] {key} are both set: keep only "
                             f"[sandbox.{table}] {key}")
        sub[key] = out.pop(key)
        out[table] = sub
        print(f"note: [sandbox] {key} is an old place, read until fte-shell {MOVED_UNTIL}: write it as "
              f"[sandbox.{table}] {key}", file=sys.stderr)
    return out


class SandboxConfig(StrictModel):
    """The per-question sandbox box (a hardened container of Docker or podman, or a bwrap box) and its
    persistent bash session."""

    provider: str = "docker"
    """What runs the sandbox: ``docker`` (a hardened container per question, through the Docker daemon),
    ``podman`` (the same container through podman's CLI, no daemon: rootful as root, rootless as a plain
    user with subuid/subgid ranges), ``bwrap`` (bubblewrap: no daemon, no root; a box over the image's
    files exported once, see docs/hpc.md) or a third-party provider as ``module:attr`` (it reads this
    table's shared keys; docs/ARCHITECTURE.md "Adding a sandbox provider"). The guarantees each holds:
    docs/sandbox.md."""

    runtime: Literal["runc", "runsc"] = "runc"
    """The OCI runtime of docker and podman boxes: ``runc`` (the default) or ``runsc`` (gVisor: a user-space
    kernel between the agent and the host; for Docker register it first with
    ``bash sandbox/setup-host.sh --runtime runsc``). bwrap boxes have no OCI runtime (``runsc`` is refused).
    A shared key, not a provider table's: it decides which of the box's guarantees hold (docs/sandbox.md)."""

    docker: DockerConfig = Field(default_factory=DockerConfig)
    """Docker's own settings (read when ``provider`` is ``docker``)."""

    podman: PodmanConfig = Field(default_factory=PodmanConfig)
    """podman's own settings (read when ``provider`` is ``podman``)."""

    bwrap: BwrapConfig = Field(default_factory=BwrapConfig)
    """bwrap's own settings (read when ``provider`` is ``bwrap``)."""

    image: str = "fte-shell-sandbox:latest"
    """Sandbox image tag; built from ``Dockerfile.sandbox`` when missing (if ``auto_build``)."""

    base_image: str = "debian:bookworm-slim"
    """Base image passed to the build as ``BASE_IMAGE`` (create it offline with
    ``sandbox/bootstrap-base.sh`` when no registry is reachable)."""

    auto_build: bool = True
    """Build the image the first time it is needed (a visible message is printed)."""

    user: str = "1000:1000"
    """User (uid:gid) the shell runs as inside the container. Never root."""

    read_only_root: bool = True
    """Mount the container's root filesystem read-only."""

    tmpfs_size: str = "256m"
    """Size cap of the writable scratch tmpfs at /tmp (also HOME)."""

    memory: str = "1g"
    """Memory limit of the container; swap is disabled (memswap = memory)."""

    cpus: float = 1.0
    """CPU quota in cores."""

    pids_limit: int = 256
    """Maximum number of processes/threads in the container (contains fork bombs)."""

    network_mode: Literal["none"] = "none"
    """The container has no network; its only way out is the gateway socket."""

    cap_drop_all: bool = True
    """Drop all Linux capabilities."""

    no_new_privileges: bool = True
    """Set ``no-new-privileges`` (setuid binaries cannot raise privileges)."""

    protect_warden: bool = True
    """Run the warden (dead-man timer and timeout enforcer) as the container's PID 1. The kernel shields
    a namespace's PID 1 from signals sent inside it, so an agent's ``pkill -f warden`` or ``kill -9 -1``
    cannot end the sandbox; the warden then reaps zombies itself and the engine's ``init`` is not added.
    False: the engine's init (when ``[sandbox.docker]``/``[sandbox.podman]`` ``init``) is PID 1 and the
    warden its child, which the agent can kill."""

    ttl_s: int = 6 * 3600
    """Dead-man timer: the container exits by itself this many seconds after start, even if the harness
    was SIGKILLed; ``fte-shell sandbox gc`` removes it."""

    command_timeout_s: float = 30.0
    """Default per-command timeout; the command's whole process tree is killed inside the container."""

    output_cap_bytes: int = 50_000
    """Observation cap: longer output is cut to a head and a tail with a line stating what was omitted."""

    output_buffer_size: str = "16m"
    """Size of the private tmpfs that receives a command's raw output inside the container. Output past
    it is discarded (the writer gets "No space left on device"), so unbounded output (``yes``) can fill
    neither memory nor disk; the observation still shows a head, a tail and the omitted byte count."""

    total_time_budget_s: float | None = None
    """Optional wall-clock budget for all commands of this sandbox together; None = unlimited."""

    workspace_dir: Path | None = None
    """Host directory mounted read-only at /work. None = a fresh temporary directory per sandbox."""

    keep_workspace: bool = False
    """Keep a temporary workspace directory after the sandbox closes (a given ``workspace_dir`` is
    always kept)."""

    corpus: Path | None = None
    """A local corpus directory (made by ``fte-shell corpus build``; usually ``[search] corpus``) whose
    documents the box sees as plain files under ``/corpus``, read-only, one file per document named by its
    docid (docs/sandbox.md "The corpus in the box"): exported once into ``corpus_cache`` and bound into
    every box, never copied per box. None = no ``/corpus``."""

    corpus_cache: Path | None = None
    """Where corpora exported for ``corpus`` are kept (one directory per corpus fingerprint); None =
    ``~/.cache/fte-shell/corpus-files`` (``$XDG_CACHE_HOME`` when set; ``/var/cache/fte-shell/corpus-files``
    for root)."""

    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment variables for the shell. Host variables never enter the container."""

    fetch_policy: FetchPolicy = Field(default_factory=FetchPolicy)
    """Network policy of this sandbox's fetch gateway."""

    @field_validator("provider")
    @classmethod
    def _known_provider(cls, name: str) -> str:
        if name in PROVIDER_TABLES or is_reference(name):
            return name
        raise ValueError(f"a provider name ({', '.join(PROVIDER_TABLES)}) or a third-party one "
                         "as module:attr")

    @model_validator(mode="before")
    @classmethod
    def _old_places(cls, data: Any) -> Any:
        """Keys of :data:`MOVED` at their old place in ``[sandbox]``: moved to their table, with a note."""
        return _move_old_keys(data) if isinstance(data, dict) and any(k in data for k in MOVED) else data

    @property
    def engine(self) -> EngineBoxConfig | None:
        """The container engine's table of the chosen provider (``docker``, ``podman``); None for bwrap."""
        return self.docker if self.provider == "docker" else self.podman if self.provider == "podman" else None
