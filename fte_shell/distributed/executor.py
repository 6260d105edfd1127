"""The driver side of a distributed sweep: :class:`RayExecutor` is a
:class:`fte_shell.sweep.RemoteRuns` (``run_sweep(..., remote=RayExecutor())``) that carries out every
run as one Ray task.

:meth:`RayExecutor.open` connects to the cluster, checks the slot nodes (:mod:`.nodes`) and starts the
cache actor on the driver's node (:mod:`.caches`); the sweep's own worker threads (one per slot) then each
submit a task asking for one ``fte_slot`` and no CPU, wait for it, and write its run directory atomically
into the sweep directory; the sweep's bookkeeping (counts, failures.jsonl, outages, progress) is the same
as for a local sweep. Tasks whose worker or node died are retried by Ray up to ``max_retries`` times; a
task that still cannot finish is recorded ``failed`` (an infrastructure failure, redone on the next
resume), never as a wrong answer.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ..digest import config_digest
from ..errors import ConfigError
from ..model.ratelimit import share
from ..record.sweepdir import SweepDir
from ..sweep.state import uses_boxes
from .caches import CacheService
from .nodes import SLOT, check_corpus, check_nodes, gc_nodes
from .packing import remove_parts, unpack_into
from .runenv import strip_secrets, with_env
from .task import RunSpec, execute_run


def connect(address: str) -> bool:
    """Join the Ray cluster at ``address`` (``auto``: the local one / ``RAY_ADDRESS``) unless this process
    already did; True if this call connected. Raises ConfigError naming the fix."""
    host = address.rsplit(":", 1)[0].strip("[]")
    if host in ("127.0.0.1", "localhost", "::1") and "ray" not in sys.modules:
        # a loopback cluster is on this machine: keep Ray from rewriting the address to the host's
        # external IP (which a loopback-bound cluster does not listen on)
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    try:
        import ray
    except ImportError as e:
        raise ConfigError("--ray needs the ray extra: pip install 'fte-shell[ray]'") from e
    if ray.is_initialized():
        return False
    try:
        ray.init(address=address, log_to_driver=False, configure_logging=False)
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise ConfigError(
            f"cannot join the Ray cluster at {address!r}: {e}. Start one with "
            f"`ray start --head --resources '{{\"{SLOT}\": K}}'` (docs/distributed.md)"
        ) from e
    return True


class RemoteRunError(RuntimeError):
    """A run carried out on a node could not finish (its harness raised there, or Ray gave up on it)."""


@dataclass
class RayExecutor:
    """Carries out each run of a sweep as a Ray task on a node with a free ``fte_slot`` (a
    :class:`fte_shell.sweep.RemoteRuns`: ``run_sweep(..., remote=RayExecutor())``)."""

    address: str = "auto"
    """Ray cluster address (``auto``: the running local cluster or ``RAY_ADDRESS``)."""
    max_retries: int = 3
    """Times Ray reruns a task whose worker or node died (never for model/agent failures)."""
    uses_local_sandboxes: bool = False
    """Runs use the nodes' sandboxes, not this host's (the nodes are checked in :meth:`open`)."""
    placements: list[dict[str, Any]] = field(default_factory=list)
    """One entry per finished task: qid, profile, rep, node_id, pid, started, ended (node clock), sandbox
    (``provider/runtime``)."""
    cache_stats: dict[str, Any] = field(default_factory=dict)
    """The cache actor's counts at the end of the sweep (``puts``: pages stored per URL)."""
    leftovers_removed: int = 0
    """Containers of dead harness processes removed on the nodes after the sweep."""

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: set[Any] = set()
        self._stopped = False
        self._connected = False
        self._actor: Any = None
        self._infos: dict[str | None, dict[str, Any]] = {}
        self._runtime_env: dict[str, Any] | None = None
        self._slots = 1
        self._provider = "docker"

    def open(self, bench: Any, dataset: Any, shared: Any, log: Callable[[str], None] | None) -> tuple[Any, int]:
        """Join the cluster, check its slot nodes, start the cache actor; return the run function and the
        number of runs to keep in flight (the cluster's slots)."""
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        say = log or (lambda _m: None)
        self._connected = connect(self.address)
        remove_parts(SweepDir(Path(bench.out)).runs_dir)
        cfg, env = strip_secrets(shared.config)
        self._runtime_env = {"env_vars": env} if env else None
        self._provider = shared.config.sandbox.provider
        boxes = uses_boxes(bench.profiles)
        nodes = check_nodes(shared.config.sandbox, say, sandboxes=boxes, runtime_env=self._runtime_env)
        mounted = shared.config.search.corpus if bench.corpus_arm else shared.config.sandbox.corpus
        if boxes and mounted is not None:  # the corpus for /corpus, exported on every node before the runs
            check_corpus(shared.config.sandbox.model_copy(update={"corpus": mounted}), nodes, say, self._runtime_env)
        slots = sum(n.slots for n in nodes)
        say(f"ray: {len(nodes)} node(s), {slots} {SLOT}(s): "
            + ", ".join(f"{n.address}×{n.slots}" + (" (image shipped)" if n.shipped else "") for n in nodes))
        self._slots = max(1, slots)
        mc = shared.config.model
        if mc.rpm is not None or mc.tpm is not None:  # each run is its own process with its own limiter
            say(f"ray: model.rpm/tpm split over the {self._slots} {SLOT}(s): each run may send "
                f"{share(mc.rpm, self._slots) or 'unlimited'} requests and {share(mc.tpm, self._slots) or 'unlimited'} "
                f"tokens per minute (a node: its slots' shares)")
        here = ray.get_runtime_context().get_node_id()
        self._actor = (ray.remote(num_cpus=0, max_concurrency=64, max_restarts=0)(CacheService)
                       .options(scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False),
                                runtime_env=self._runtime_env)
                       .remote(cfg, shared.world.search is not None, shared.world.page_source is not None,
                               str(Path(bench.out) / "shared" / "page-cache")))
        self._search_info(None)  # the sweep's own search, built before the first run
        self._remote = ray.remote(execute_run).options(
            num_cpus=0, resources={SLOT: 1}, max_retries=self.max_retries, retry_exceptions=False,
            **with_env(self._runtime_env))
        self._spec_base = {"has_search": shared.world.search is not None,
                           "has_pages": shared.world.page_source is not None}
        return self._run, max(1, slots)

    def _search_info(self, retriever: str | None) -> dict[str, Any]:
        """The name and default result count of ``retriever``'s search in the cache actor (None: the
        sweep's own), asked once per retriever."""
        import ray

        with self._lock:
            known = self._infos.get(retriever)
        if known is None:
            known = ray.get(self._actor.info.remote(retriever))
            with self._lock:
                self._infos[retriever] = known
        return known

    def _run(self, question: str, config: Any, out_dir: Path, *, qid: str | None = None,
             meta: dict[str, Any] | None = None, **_local: Any) -> Any:
        """The sweep's run function: one Ray task; its run directory is unpacked into ``out_dir``."""
        import ray

        cfg, _env = strip_secrets(config)
        cfg.model.rpm, cfg.model.tpm = share(cfg.model.rpm, self._slots), share(cfg.model.tpm, self._slots)
        world_meta = getattr(_local.get("world"), "meta", None) or {}  # the driver's world: its retriever
        retriever = config.search.retriever  # the run's arm's (bench --retrievers), else the sweep's own
        info = self._search_info(retriever) if self._spec_base["has_search"] else {}
        spec = RunSpec(question=question, config=cfg, qid=qid or "", meta={**world_meta, **(meta or {})},
                       config_digest=config_digest(config), search_name=info.get("name"),
                       default_n=info.get("default_n"), retriever=retriever, **self._spec_base)
        ref = self._remote.remote(spec, self._actor)
        with self._lock:
            self._pending.add(ref)
        try:
            out = ray.get(ref)
        except ray.exceptions.RayError as e:  # its worker/node died more than max_retries times
            raise RemoteRunError(f"ray: {e.__class__.__name__}: {str(e)[:2000]}") from None
        finally:
            with self._lock:
                self._pending.discard(ref)
        with self._lock:
            if self._stopped:  # the sweep was interrupted: its in-flight runs are not trusted
                raise RemoteRunError("ray: the sweep stopped while this run was in flight")
            if out.data is not None:
                unpack_into(out.data, Path(out_dir))
            self._actor.forget.remote(spec.qid)  # its checkpoint (a lost node's resume) is done with
            m = meta or {}
            self.placements.append({"qid": m.get("qid"), "profile": config.agent.profile, "rep": m.get("rep"),
                                    "node_id": out.node_id, "pid": out.pid, "started": out.started,
                                    "ended": out.ended, "sandbox": out.sandbox})
        if out.error:
            raise RemoteRunError(f"on node {out.node_id[:12]}: {out.error}")
        return SimpleNamespace(answer=out.answer)

    def cancel(self) -> None:
        """Cancel the tasks in flight (each records its interruption and removes its container); their
        run directories are never unpacked."""
        import ray

        with self._lock:
            self._stopped = True
            pending = list(self._pending)
        if ray.is_initialized():
            for ref in pending:
                ray.cancel(ref)

    def close(self) -> None:
        """Cancel what is still in flight, collect the cache counts, stop the actor, remove dead
        harnesses' containers on every node, leave the cluster."""
        try:
            import ray
        except ImportError:  # pragma: no cover - open() never ran
            return
        self.cancel()
        if not ray.is_initialized():
            return
        try:
            if self._actor is not None:
                self.cache_stats = ray.get(self._actor.stats.remote())
                ray.kill(self._actor)
            self.leftovers_removed = gc_nodes(self._runtime_env, self._provider)
        finally:
            if self._connected:
                ray.shutdown()
