"""Node checks before a distributed sweep: every alive node that offers ``fte_slot`` must be able to start
the sweep's sandboxes. With Docker (the default provider) it must reach a Docker daemon and hold the
sandbox image of the driver's content hash. A node without Docker is an error naming
the node; a node without the image (or with another build) gets the driver's, shipped through Ray's
object store with ``docker save``/``docker load`` (no registry). Each check also removes the node's
containers left by dead harness processes (``sandbox.providers.docker.container.gc``), e.g. of Ray
workers killed with a node.
With another provider (``[sandbox] provider``, e.g. bwrap on a cluster without Docker) each node probes
and prepares that provider itself (bwrap: its root file system, from ``sandbox.bwrap.rootfs`` or a shared
``sandbox.bwrap.rootfs_cache``; nothing is shipped) and collects its own leftovers.
A node may choose its own provider: ``FTE_SANDBOX_PROVIDER`` (and ``FTE_SANDBOX_RUNTIME``) in the
environment its Ray worker starts with (``FTE_SANDBOX_PROVIDER=podman ray start …``) beats the sweep's
``[sandbox]`` there (:func:`node_sandbox`); such a node prepares and gc's its own provider, and only
Docker nodes are ever shipped an image.
A sweep that mounts a corpus in its boxes (``--corpus-arm``, ``[sandbox] corpus``: a driver path) needs
that corpus directory at the same path on every slot node: each exports it for ``/corpus`` before the
first run (:func:`check_corpus`), and a node without it is an error naming the node and the path.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import SandboxConfig
from ..errors import FteError, SandboxError, SandboxUnavailable
from .runenv import with_env

SLOT = "fte_slot"
"""The custom Ray resource that bounds a node's live sandboxes (one per run)."""


@dataclass
class NodeInfo:
    """What the driver learnt about one node."""

    node_id: str
    address: str
    slots: int
    image_hash: str | None = None
    """The content-hash label of the node's sandbox image (None: no image)."""
    provider: str = "docker"
    """The node's sandbox provider (its own choice or the sweep's: :func:`node_sandbox`)."""
    sandbox_error: str | None = None
    gc_removed: int = 0
    shipped: bool = False


def slot_nodes() -> list[NodeInfo]:
    """Alive nodes offering at least one ``fte_slot``."""
    import ray

    return [
        NodeInfo(node_id=n["NodeID"], address=n.get("NodeManagerAddress", "?"), slots=int(n["Resources"][SLOT]))
        for n in ray.nodes()
        if n.get("Alive") and int((n.get("Resources") or {}).get(SLOT, 0)) > 0
    ]


NODE_ENV = {"FTE_SANDBOX_PROVIDER": "provider", "FTE_SANDBOX_RUNTIME": "runtime"}
"""A node's own sandbox choice: environment variable -> ``[sandbox]`` key."""


def node_sandbox(cfg: SandboxConfig) -> SandboxConfig:
    """``cfg`` with this node's own provider/runtime choice (:data:`NODE_ENV`), if it made one."""
    mine = {key: os.environ[var] for var, key in NODE_ENV.items() if os.environ.get(var)}
    return SandboxConfig.model_validate({**cfg.model_dump(), **mine}) if mine else cfg


def inspect_here(image: str, want: str | None, gc: bool = True, cfg: SandboxConfig | None = None) -> dict[str, Any]:
    """(On a node) Docker reachable? An image of content hash ``want`` (any tag; else the hash of
    ``image``'s)? And gc of dead owners' containers. A node that chose another provider (:func:`node_sandbox`)
    prepares and gc's that one instead."""
    from .. import runner  # noqa: F401 - runner: warms this worker up for the runs that reuse it

    mine = node_sandbox(cfg or SandboxConfig(image=image))
    if mine.provider != "docker":
        return provider_here(mine, gc)
    from ..sandbox.providers.docker import api, container
    from ..sandbox.providers.docker.image import HASH_LABEL

    try:
        c = api.client()
        c.ping()
    except Exception as e:  # noqa: BLE001 - any failure means "no usable daemon"
        return {"sandbox_error": f"{e.__class__.__name__}: {e}", "image_hash": None, "gc_removed": 0}
    removed = 0
    if gc:
        with contextlib.suppress(Exception):  # gc is best effort
            removed = len(container.gc().removed)
    have: str | None = None
    try:
        if want and c.images.list(filters={"label": f"{HASH_LABEL}={want}"}):
            have = want  # the build the driver runs is here (tags are mutable; runs use image ids)
        else:
            have = (c.images.get(image).labels or {}).get(HASH_LABEL, "")
    except Exception:  # noqa: BLE001 - ImageNotFound and friends: the image must be shipped
        have = None
    return {"sandbox_error": None, "image_hash": have, "gc_removed": removed, "provider": "docker"}


def load_here(data: bytes, image: str) -> str | None:
    """(On a node) ``docker load`` the shipped image and tag it ``image``; returns its content-hash label."""
    from ..sandbox.providers.docker import api
    from ..sandbox.providers.docker.image import HASH_LABEL

    loaded = api.client().images.load(data)
    if not loaded:
        raise SandboxUnavailable("docker load of the shipped sandbox image loaded nothing")
    img = loaded[0]
    repo, _, tag = image.rpartition(":") if ":" in image.split("/")[-1] else (image, "", "latest")
    img.tag(repo, tag or "latest")
    return (img.labels or {}).get(HASH_LABEL)


def driver_image(cfg: SandboxConfig, log: Callable[[str], None] | None = None) -> tuple[str | None, str | None]:
    """(content hash, image id) of the sandbox image the nodes must run, built here if this host has
    Docker and the build inputs; (None, None) without Docker on the driver."""
    from ..sandbox.providers.docker import api, image

    try:
        api.client().ping()
    except Exception:  # noqa: BLE001 - a driver without Docker: nodes must have the image themselves
        if log:
            log("no Docker on the driver: every node must already hold the sandbox image")
        return None, None
    image_id = image.ensure_image(cfg, log=log)
    labels = api.client().images.get(image_id).labels or {}
    return labels.get(image.HASH_LABEL), image_id


def save_image(image_id: str) -> bytes:
    """``docker save`` of the image by id (not by its tag, which another build may move meanwhile)."""
    from ..sandbox.providers.docker import api

    return b"".join(api.client().api.get_image(image_id))


def provider_here(cfg: SandboxConfig, gc: bool = True) -> dict[str, Any]:
    """(On a node) can this node's provider (the sweep's ``cfg.provider``, or the node's own choice:
    :func:`node_sandbox`) start boxes here? Its probe, then its preparation (e.g. bwrap's root file system,
    podman's image); and gc of dead owners' leftovers."""
    from .. import runner  # noqa: F401 - runner: warms this worker up for the runs that reuse it
    from ..sandbox import get_provider

    mine = node_sandbox(cfg)
    provider = get_provider(mine.provider)
    why = provider.probe(30.0)
    if why is None:
        try:
            provider.prepare(mine)
        except Exception as e:  # noqa: BLE001 - any failure means "cannot start boxes here"
            why = f"{e.__class__.__name__}: {e}"
    removed = 0
    if why is None and gc:
        with contextlib.suppress(Exception):  # gc is best effort
            removed = len(provider.gc().removed)
    return {"sandbox_error": None if why is None else f"{mine.provider}: {why}", "image_hash": None,
            "gc_removed": removed, "provider": mine.provider}


def _on_each(nodes: list[NodeInfo], fn: Callable[..., Any], runtime_env: dict[str, Any] | None,
             *args: Any, timeout: float | None = None) -> list[Any]:
    """``fn(*args)`` run once on each of ``nodes`` (pinned there, no retry), its results in node order
    (``ray.get``'s GetTimeoutError after ``timeout`` seconds)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    remote = ray.remote(num_cpus=0, max_retries=0, **with_env(runtime_env))(fn)
    return list(ray.get([remote.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n.node_id, soft=False))
                         .remote(*args) for n in nodes], timeout=timeout))


def _refuse_bad(nodes: list[NodeInfo], error: type[Exception], why: Callable[[NodeInfo], str]) -> None:
    """Raise ``error`` naming every node whose sandbox check failed (``why``: the advice for one)."""
    bad = [n for n in nodes if n.sandbox_error]
    if bad:
        raise error("; ".join(f"Ray node {n.address} ({n.node_id[:12]}) offers {n.slots} {SLOT} but {why(n)}"
                              for n in bad))


def _check_provider_nodes(cfg: SandboxConfig, nodes: list[NodeInfo], runtime_env: dict[str, Any] | None) -> None:
    for n, r in zip(nodes, _on_each(nodes, provider_here, runtime_env, cfg), strict=True):
        n.sandbox_error, n.gc_removed, n.provider = r["sandbox_error"], r["gc_removed"], r["provider"]
    _refuse_bad(nodes, SandboxError, lambda n: (
        f"cannot start {cfg.provider} sandboxes ({n.sandbox_error}): fix it there (fte-shell sandbox doctor) "
        f"or restart that node without --resources {SLOT}"))


def check_nodes(cfg: SandboxConfig, log: Callable[[str], None] | None = None, *, sandboxes: bool = True,
                runtime_env: dict[str, Any] | None = None) -> list[NodeInfo]:
    """Check every slot node (see the module docstring); raises :class:`SandboxUnavailable` naming the nodes
    that cannot run sandboxes, ``ConfigError`` when no node offers a slot. ``sandboxes=False`` (no profile
    of the sweep uses a container): only the slots are listed. ``runtime_env``: the one the runs get, so
    their worker processes (warmed up by the check) are reused."""
    import ray

    from ..errors import ConfigError

    nodes = slot_nodes()
    if not nodes:
        raise ConfigError(
            f"no Ray node offers the {SLOT!r} resource: join nodes with "
            f"`ray start --address HEAD:6379 --resources '{{\"{SLOT}\": K}}'` (docs/distributed.md)"
        )
    if not sandboxes:
        return nodes
    if cfg.provider != "docker":
        _check_provider_nodes(cfg, nodes, runtime_env)
        return nodes
    want, image_id = driver_image(cfg, log)
    for n, r in zip(nodes, _on_each(nodes, inspect_here, runtime_env, cfg.image, want, True, cfg), strict=True):
        n.sandbox_error, n.image_hash, n.gc_removed = r["sandbox_error"], r["image_hash"], r["gc_removed"]
        n.provider = r.get("provider", "docker")
    _refuse_bad(nodes, SandboxUnavailable, lambda n: (
        f"cannot run its sandbox provider {n.provider} ({n.sandbox_error}): start Docker (or set up its "
        f"FTE_SANDBOX_PROVIDER) there (bash sandbox/setup-host.sh) or restart that node without --resources {SLOT}"))
    need = [n for n in nodes if n.provider == "docker"
            and (n.image_hash is None or (want is not None and n.image_hash != want))]
    if need and (want is None or image_id is None):
        raise SandboxUnavailable("; ".join(
            f"Ray node {n.address} ({n.node_id[:12]}) has no sandbox image {cfg.image} and the driver has "
            f"none to ship: run `fte-shell sandbox build` there" for n in need))
    if need:
        if log:
            log(f"shipping sandbox image {cfg.image} ({want}) to {len(need)} node(s) with docker save/load")
        got = _on_each(need, load_here, runtime_env, ray.put(save_image(image_id)), cfg.image)
        for n, h in zip(need, got, strict=True):
            if h != want:
                raise SandboxUnavailable(f"Ray node {n.address}: the shipped image has content hash {h}, not {want}")
            n.image_hash, n.shipped = h, True
    return nodes


def corpus_missing(path: str | os.PathLike[str], where: str) -> str | None:
    """One line when the corpus directory ``path`` (a driver path: ``[sandbox] corpus``, a corpus arm's
    ``[search] corpus``) is not on the node ``where`` names, else None."""
    if Path(path).is_dir():
        return None
    return (f"sandbox.corpus {path}: no such directory on {where}; the corpus in the box (--corpus-arm, "
            f"--sandbox-corpus) needs it at the same path on every node with {SLOT}s (docs/distributed.md)")


def corpus_here(cfg: SandboxConfig) -> str | None:
    """(On a node) export the corpus of ``cfg.corpus`` for ``/corpus`` (once per corpus, before the runs);
    None, or why it cannot be (one line)."""
    from ..sandbox.corpus_files import corpus_mount

    if cfg.corpus is None:
        return None
    missing = corpus_missing(cfg.corpus, "this node")
    if missing:
        return missing
    try:
        corpus_mount(node_sandbox(cfg))
    except FteError as e:
        return str(e)
    return None


def check_corpus(cfg: SandboxConfig, nodes: list[NodeInfo], log: Callable[[str], None] | None = None,
                 runtime_env: dict[str, Any] | None = None) -> None:
    """Export ``cfg.corpus`` for ``/corpus`` on every slot node before the first run; raises
    :class:`SandboxError` naming each node that does not have it."""
    for n, why in zip(nodes, _on_each(nodes, corpus_here, runtime_env, cfg), strict=True):
        n.sandbox_error = why
    _refuse_bad(nodes, SandboxError, lambda n: (
        f"cannot mount the corpus in its boxes ({n.sandbox_error}): copy the corpus directory there, or "
        f"restart that node without --resources {SLOT}"))
    if log:
        log(f"ray: {cfg.corpus} exported for /corpus on {len(nodes)} node(s)")


def gc_here(provider: str = "docker") -> int:
    """(On a node) remove the boxes of dead harness processes (the sweep's provider, or the node's own
    choice: :func:`node_sandbox`); returns how many."""
    from ..sandbox import get_provider

    try:
        return len(get_provider(node_sandbox(SandboxConfig(provider=provider)).provider).gc().removed)  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001 - best effort
        return 0


def gc_nodes(runtime_env: dict[str, Any] | None = None, provider: str = "docker") -> int:
    """Remove, on every alive slot node, the containers of dead harness processes; returns how many."""
    try:
        return sum(_on_each(slot_nodes(), gc_here, runtime_env, provider, timeout=120))
    except Exception:  # noqa: BLE001 - a node lost meanwhile: best effort
        return 0
