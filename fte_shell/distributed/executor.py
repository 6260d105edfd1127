"""The driver side of a distributed sweep: :class:`RayExecutor` plugs into
:func:`fte_shell.bench.sweep.run_sweep` (its ``executor``) and carries out every run as one Ray task.

It connects to the cluster, checks the slot nodes (:mod:`.nodes`), starts the cache actor on the driver's
node (:mod:`.caches`), submits tasks asking for one ``fte_slot`` and no CPU (a window of twice the slots at
a time), and as each finishes writes its run directory atomically into the sweep directory and records it
through the sweep's own bookkeeping (counts, failures.jsonl, progress). Tasks whose worker or node died
are retried by Ray up to ``max_retries`` times; a task that still cannot finish is recorded ``failed``
(an infrastructure failure, redone with ``--retry-failed``), never as a wrong answer.
"""

from __future__ import annotations

import collections
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from .nodes import SLOT, check_nodes, gc_nodes, slot_nodes
from .packing import remove_parts, unpack_into
from .task import RunSpec, execute_run, strip_secrets

if TYPE_CHECKING:  # pragma: no cover
    from ..bench.sweep import SweepJob, Task

GRACE_S = 10.0
"""Seconds an interrupted sweep waits for its cancelled tasks."""


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


@dataclass
class RayExecutor:
    """Runs each task of a sweep as a Ray task on a node with a free ``fte_slot``."""

    address: str = "auto"
    """Ray cluster address (``auto``: the running local cluster or ``RAY_ADDRESS``)."""
    max_retries: int = 3
    """Times Ray reruns a task whose worker or node died (never for model/agent failures)."""
    window: int | None = None
    """Tasks submitted at once (default: twice the slots of the cluster)."""
    uses_local_docker: bool = False
    placements: list[dict[str, Any]] = field(default_factory=list)
    """One entry per finished task: qid, profile, rep, node_id, pid, started, ended (node clock), attempts."""
    cache_stats: dict[str, Any] = field(default_factory=dict)
    """The cache actor's counts at the end of the sweep (``puts``: pages stored per URL)."""
    leftovers_removed: int = 0

    def run(self, todo: list[Task], job: SweepJob) -> None:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        log = job.log or (lambda _m: None)
        if not todo:
            return
        connected = connect(self.address)
        actor = None
        runtime_env: dict[str, Any] | None = None
        try:
            remove_parts(Path(job.bench.out) / "runs")
            cfg, env = strip_secrets(job.shared.config)
            runtime_env = {"env_vars": env} if env else None
            nodes = check_nodes(job.shared.config.sandbox, log, docker="shell" in job.bench.profiles,
                                runtime_env=runtime_env)
            slots = sum(n.slots for n in nodes)
            log(f"ray: {len(nodes)} node(s), {slots} {SLOT}(s): "
                + ", ".join(f"{n.address}×{n.slots}" + (" (image shipped)" if n.shipped else "") for n in nodes))
            here = ray.get_runtime_context().get_node_id()
            from .caches import CacheService

            actor = (ray.remote(num_cpus=0, max_concurrency=64, max_restarts=0)(CacheService)
                     .options(scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False),
                              runtime_env=runtime_env)
                     .remote(cfg, job.shared.search is not None, job.shared.page_source is not None,
                             str(Path(job.bench.out) / "shared" / "page-cache")))
            info = ray.get(actor.info.remote())
            remote = ray.remote(execute_run).options(
                num_cpus=0, resources={SLOT: 1}, max_retries=self.max_retries, retry_exceptions=False,
                **({"runtime_env": runtime_env} if runtime_env else {}))
            self._loop(todo, job, remote, actor, cfg, info, slots)
            self.cache_stats = ray.get(actor.stats.remote())
        finally:
            if actor is not None:
                ray.kill(actor)
            self.leftovers_removed = gc_nodes(runtime_env) if ray.is_initialized() else 0
            if connected:
                ray.shutdown()

    def _spec(self, t: Task, job: SweepJob, cfg: Any, info: dict[str, Any]) -> RunSpec:
        c = cfg.model_copy(deep=True)
        c.agent.profile = t.profile
        return RunSpec(
            question=t.question.question, config=c, qid=f"{t.question.id}-{t.profile}-r{t.rep}",
            meta={"qid": t.question.id, "rep": t.rep, "dataset": job.dataset.source},
            retries=job.bench.retries, has_search=job.shared.search is not None,
            has_pages=job.shared.page_source is not None, search_name=info.get("name"),
            default_n=info.get("default_n"),
        )

    def _loop(self, todo: list[Task], job: SweepJob, remote: Any, actor: Any, cfg: Any, info: dict[str, Any],
              slots: int) -> None:
        import ray

        queue = collections.deque(todo)
        pending: dict[Any, Task] = {}
        window = self.window or max(2, 2 * slots)
        last_nodes = time.monotonic()
        try:
            while (queue or pending) and not job.stop.is_set():
                if self.window is None and time.monotonic() - last_nodes > 10:  # nodes join and leave
                    last_nodes = time.monotonic()
                    window = max(2, 2 * sum(n.slots for n in slot_nodes()))
                while queue and len(pending) < window:
                    t = queue.popleft()
                    if not job.started(t):
                        return
                    pending[remote.remote(self._spec(t, job, cfg, info), actor)] = t
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
                for ref in ready:
                    t = pending.pop(ref)
                    self._finish(t, ref, job)
        except KeyboardInterrupt:
            for ref in pending:
                ray.cancel(ref)
            ray.wait(list(pending), num_returns=len(pending), timeout=GRACE_S)
            raise

    def _finish(self, t: Task, ref: Any, job: SweepJob) -> None:
        import ray

        try:
            out = ray.get(ref)
        except ray.exceptions.RayError as e:  # its worker/node died more than max_retries times
            if job.stop.is_set():
                return
            job.record(t, None, f"ray: {e.__class__.__name__}: {str(e)[:2000]}")
            return
        if job.stop.is_set():
            return
        if out.data is not None:
            unpack_into(out.data, t.run_dir)
        self.placements.append({"qid": t.question.id, "profile": t.profile, "rep": t.rep, "node_id": out.node_id,
                                "pid": out.pid, "started": out.started, "ended": out.ended,
                                "attempts": out.attempts})
        job.record(t, out.answer, out.error)
