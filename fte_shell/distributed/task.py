"""What one Ray task does on its node: the whole run, in a temporary directory, returned as bytes.

Errors of the run itself (the model, the agent, a container that would not start) are part of the
:class:`RunOutcome`, never an exception of the task, so Ray never retries them; the task is retried by Ray
only when its worker or node dies (``max_retries``). The run is retried in place ``retries`` times when
its harness raised, exactly like a local sweep.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from ..config import RunConfig
from ..errors import FteError

SECRET_ENV = {"OPENAI_API_KEY": ("model", "api_key"), "SERPER_API_KEY": ("search", "serper_api_key")}
"""Secrets of a run and the environment variable (set in the task's Ray runtime environment) carrying
each to the node; the config shipped with the task has them removed."""


@dataclass
class RunSpec:
    """Everything a node needs for one run (no secrets: those travel in the runtime environment)."""

    question: str
    config: RunConfig
    qid: str
    meta: dict[str, Any]
    retries: int
    has_search: bool
    has_pages: bool
    search_name: str | None = None
    default_n: int | None = None
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
    attempts: int = 1
    extra: dict[str, Any] = field(default_factory=dict)


def strip_secrets(cfg: RunConfig) -> tuple[RunConfig, dict[str, str]]:
    """``cfg`` without its secrets, and the secrets as runtime-environment variables."""
    out = cfg.model_copy(deep=True)
    env: dict[str, str] = {}
    for var, (section, name) in SECRET_ENV.items():
        value = getattr(getattr(out, section), name)
        if value is not None:
            env[var] = value.get_secret_value() if isinstance(value, SecretStr) else str(value)
            setattr(getattr(out, section), name, None)
    return out, env


def restore_secrets(cfg: RunConfig) -> None:
    """Put the secrets from this process's environment (the runtime env) back into ``cfg``."""
    for var, (section, name) in SECRET_ENV.items():
        if os.environ.get(var) and getattr(getattr(cfg, section), name) is None:
            setattr(getattr(cfg, section), name, SecretStr(os.environ[var]))


def execute_run(spec: RunSpec, caches: Any) -> RunOutcome:
    """Run ``spec`` on this node with the sweep's cache actor ``caches``; return the packed run directory."""
    import ray

    from ..runner import run_question
    from .caches import RemotePageCache, RemotePageSource, RemoteSearch
    from .packing import pack_dir

    started = time.time()
    cfg = spec.config.model_copy(deep=True)
    restore_secrets(cfg)
    if not spec.has_search:
        cfg.search.backend = "none"  # as on the driver, whatever keys this node's environment holds
    cfg.search.corpus = None  # the corpus (a driver path) is served by the cache actor
    search = RemoteSearch(caches, spec.search_name or "remote", spec.default_n) if spec.has_search else None
    pages = RemotePageSource(caches) if spec.has_pages else None
    page_cache = RemotePageCache(caches)
    tmp = Path(tempfile.mkdtemp(prefix="fte-ray-run-"))
    run_dir = tmp / "run"
    error: str | None = None
    answer = None
    attempts = 0
    try:
        for attempt in range(spec.retries + 1):
            attempts += 1
            if attempt:
                shutil.rmtree(run_dir, ignore_errors=True)
            error = None
            try:
                res = run_question(spec.question, cfg, run_dir, search=search, page_source=pages,  # type: ignore[arg-type]
                                   page_cache=page_cache, qid=spec.qid, model=None, meta=spec.meta)  # type: ignore[arg-type]
                answer = getattr(res, "answer", None)
                break
            except Exception as e:  # noqa: BLE001 - a failed run is a result: recorded, never retried by Ray
                error = f"{e.__class__.__name__}: {e}"
                if not isinstance(e, FteError):
                    error += "\n" + "".join(traceback.format_exception(e)[-3:])
        result = run_dir / "result.json"
        if spec.config_digest and result.is_file():
            r = json.loads(result.read_text(encoding="utf-8"))
            r["config_digest"] = spec.config_digest
            tmp_result = result.with_name(".result.json.tmp")
            tmp_result.write_text(json.dumps(r, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
            os.replace(tmp_result, result)
        data = pack_dir(run_dir) if run_dir.is_dir() else None
    finally:
        page_cache.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return RunOutcome(data=data, answer=answer, error=error, node_id=ray.get_runtime_context().get_node_id(),
                      pid=os.getpid(), started=started, ended=time.time(), attempts=attempts)
