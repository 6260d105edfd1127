"""``run_question``: open one question's :class:`~fte_shell.episode.Episode` and let the agent drive it —
the model client made (or shared), the server probed so the start event carries its window, the run
directory written, everything closed even on exceptions, Ctrl-C or SIGTERM (the process's own
:func:`~fte_shell.episode.sigterm_as_interrupt`). ``fork_run``: the same for a fork of a finished run at
turn K (:mod:`fte_shell.episode.fork`)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from .agent import Agent
from .config import RunConfig
from .episode import Episode, RunResult, check_question, sigterm_as_interrupt
from .model import ModelClient
from .record.rundir import EventListener
from .world import World


def run_question(
    question: str,
    config: RunConfig,
    out_dir: Path,
    *,
    world: World | None = None,
    qid: str | None = None,
    log: EventListener | None = None,
    model: ModelClient | None = None,
    meta: dict[str, Any] | None = None,
) -> RunResult:
    """Answer ``question`` with ``config.agent.profile`` and write the run directory ``out_dir``
    (``trajectory.jsonl``, ``result.json``, ``workspace/``).

    ``world`` (search, page source, page cache, snapshot; a sweep shares one) defaults to
    :meth:`World.from_config` of ``config``, made and closed by this run; ``model`` to a new
    :class:`ModelClient` (pass one to share its connection pool). ``log`` gets every trajectory event as
    it is written. ``qid`` becomes the run id (default: timestamp + slug) and ``meta["qid"]``. Raises
    :class:`~fte_shell.errors.ModelError` at once when no model endpoint is configured, and re-raises
    KeyboardInterrupt after recording it (SIGTERM counts as one in the main thread)."""
    check_question(question, config)
    with contextlib.ExitStack() as cleanup:  # undone in reverse order, even on exceptions or Ctrl-C
        if model is None:
            model = ModelClient(config.model)  # fails fast without an endpoint
            cleanup.callback(model.close)
        info = model.server_info()  # probed once per client, before the box starts and outside the time budget
        cleanup.enter_context(sigterm_as_interrupt())  # kept through the episode's closes, so SIGTERM cannot skip them
        ep = cleanup.enter_context(Episode.open(
            config, question, Path(out_dir), world=world, run_id=qid, log=log, server=info, model=model,
            meta={**({"qid": qid} if qid else {}), **(meta or {})}))
        return Agent(config, model).drive(ep)


def fork_run(
    parent_dir: Path,
    at_turn: int,
    out_dir: Path,
    *,
    config: RunConfig | None = None,
    overrides: dict[str, Any] | None = None,
    log: EventListener | None = None,
    model: ModelClient | None = None,
    run_id: str | None = None,
    meta: dict[str, Any] | None = None,
) -> RunResult:
    """Fork the finished run in ``parent_dir`` at turn ``at_turn`` into ``out_dir`` and let the agent go
    on live: the parent's first ``at_turn`` turns replayed without a model call against its snapshot,
    checked against the parent (a difference stops the run: ``fork_mismatch``), then the loop as
    :func:`run_question` runs it. ``config``: the child's whole configuration, else the parent's with
    ``overrides`` over it (:func:`fte_shell.episode.fork.child_config`). Raises
    :class:`~fte_shell.errors.ConfigError` for a parent without a snapshot or without that many turns."""
    from .episode.fork import Parent, child_config

    parent = Parent.read(parent_dir)
    cfg = config if config is not None else child_config(parent, overrides)
    parent.replies(at_turn)  # refused before any model client or box is made
    with contextlib.ExitStack() as cleanup:
        if model is None:
            model = ModelClient(cfg.model)
            cleanup.callback(model.close)
        info = model.server_info()
        cleanup.enter_context(sigterm_as_interrupt())
        ep = cleanup.enter_context(Episode.fork(parent_dir, at_turn, Path(out_dir), config=cfg, log=log, server=info,
                                                model=model, run_id=run_id, meta=meta))
        return Agent(ep.config, model).drive(ep)
