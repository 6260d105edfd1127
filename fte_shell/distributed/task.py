"""What one Ray task does on its node: the whole run, in a temporary directory, returned as bytes.

Errors of the run itself (the model, the agent, a container that would not start) are part of the
:class:`RunOutcome`, never an exception of the task, so Ray never retries them; the task is retried by Ray
only when its worker or node dies (``max_retries``): every event the run writes is also checkpointed with
the sweep's cache actor, so the retried task resumes the run at its last completed turn
(:mod:`fte_shell.episode.resume`) instead of starting it over. A run whose harness raised is retried by
the sweep, as a new task, exactly like a local run.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import RunConfig
from ..errors import FteError
from ..profiles import runs_in_a_box
from ..record.rundir import TRAJECTORY, read_result, update_result
from ..sandbox.ownership import write_owner_file
from .caches import RemotePageCache, RemotePageSource, RemoteSearch, _get
from .nodes import corpus_missing, node_sandbox
from .packing import pack_dir
from .runenv import restore_secrets


@dataclass
class RunSpec:
    """Everything a node needs for one run (no secrets: those travel in the runtime environment)."""

    question: str
    config: RunConfig
    qid: str
    meta: dict[str, Any]
    has_search: bool
    has_pages: bool
    search_name: str | None = None
    default_n: int | None = None
    retriever: str | None = None
    """The run's ``[search] retriever`` (its arm's, ``bench --retrievers``): the search the cache actor
    answers its searches with."""
    config_digest: str | None = None
    """The digest of the driver's configuration of this run (``fte_shell.digest``): written into the run's
    result.json, since the node's copy differs only in what the driver serves for it (secrets, corpus)."""


@dataclass
class RunOutcome:
    """What a task returns to the driver."""

    data: bytes | None
    """The run directory as :func:`~.packing.pack_dir` bytes (None when the run left no directory)."""
    answer: Any
    error: str | None
    """Why the harness could not finish the run (``None``: it is a result, whatever its stop reason)."""
    node_id: str = ""
    pid: int = 0
    started: float = 0.0
    """``time.time()`` on the node when the run began, and when it ended."""
    ended: float = 0.0
    sandbox: str = ""
    """``provider/runtime`` the run's box ran on (the node's own choice or the sweep's)."""


def execute_run(spec: RunSpec, caches: Any) -> RunOutcome:
    """Run ``spec`` on this node with the sweep's cache actor ``caches``; return the packed run directory."""
    import ray

    from ..runner import run_question
    from ..world import World

    started = time.time()
    cfg = spec.config.model_copy(deep=True)
    cfg.sandbox = node_sandbox(cfg.sandbox)  # the node's own provider choice, if it made one
    restore_secrets(cfg)
    if cfg.sandbox.corpus is not None and runs_in_a_box(cfg.agent.profile):  # a path on the driver: on this node too?
        missing = corpus_missing(cfg.sandbox.corpus, f"Ray node {ray.util.get_node_ip_address()}")
        if missing:  # never a run without the corpus its configuration mounts
            return RunOutcome(data=None, answer=None, error=missing, node_id=ray.get_runtime_context().get_node_id(),
                              pid=os.getpid(), started=started, ended=time.time(),
                              sandbox=f"{cfg.sandbox.provider}/{cfg.sandbox.runtime}")
    if not spec.has_search:
        cfg.search.backend = "none"  # as on the driver, whatever keys this node's environment holds
    cfg.search.corpus = None  # the corpus (a driver path) is served by the cache actor
    search = (RemoteSearch(caches, spec.search_name or "remote", spec.default_n, spec.retriever)
              if spec.has_search else None)
    pages = RemotePageSource(caches) if spec.has_pages else None
    page_cache = RemotePageCache(caches)
    world = World(search, pages, page_cache, open_web=cfg.search.open_web)  # type: ignore[arg-type]
    tmp = Path(tempfile.mkdtemp(prefix="fte-ray-run-"))
    write_owner_file(tmp, keep=False)  # a worker killed with its node leaves it to gc (sandbox gc, startup)
    os.chmod(tmp, 0o711)  # a box that runs as another uid (bwrap started by root) reaches run/workspace
    run_dir = tmp / "run"
    error: str | None = None
    answer = None
    try:
        log = _resume_from_checkpoint(caches, spec.qid, run_dir)
        try:
            res = run_question(spec.question, cfg, run_dir, world=world, qid=spec.qid, model=None, meta=spec.meta,
                               log=log)
            answer = getattr(res, "answer", None)
        except Exception as e:  # noqa: BLE001 - a failed run is a result: recorded, never retried by Ray
            error = f"{e.__class__.__name__}: {e}"
            if not isinstance(e, FteError):
                error += "\n" + "".join(traceback.format_exception(e)[-3:])
        if read_result(run_dir) is not None:  # the driver's digest; the provider the node ran it with
            update_result(run_dir, {**({"config_digest": spec.config_digest} if spec.config_digest else {}),
                                    "sandbox": {"provider": cfg.sandbox.provider, "runtime": cfg.sandbox.runtime}})
        data = pack_dir(run_dir) if run_dir.is_dir() else None
    finally:
        page_cache.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return RunOutcome(data=data, answer=answer, error=error, node_id=ray.get_runtime_context().get_node_id(),
                      pid=os.getpid(), started=started, ended=time.time(),
                      sandbox=f"{cfg.sandbox.provider}/{cfg.sandbox.runtime}")


def _resume_from_checkpoint(caches: Any, qid: str, run_dir: Path) -> Any:
    """The trajectory an earlier attempt at this run left with the cache actor (its node was lost), written
    into ``run_dir`` so ``run_question`` resumes it; returns the listener that checkpoints every event
    of this attempt there (fire and forget: a line lost with the node is a torn last line)."""
    if not qid:
        return None
    lines = _get(caches.begin.remote(qid))
    if lines:
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / TRAJECTORY).write_text("\n".join(lines) + "\n", encoding="utf-8")

    def checkpoint(ev: dict[str, Any]) -> None:
        caches.checkpoint.remote(qid, json.dumps(ev, ensure_ascii=False, default=str))

    return checkpoint

