"""``run_question``: open one question's :class:`~fte_shell.episode.Episode` and let the agent drive it —
the model client made (or shared), the server probed so the start event carries its window, the run
directory written, everything closed even on exceptions, Ctrl-C or SIGTERM (the process's own
:func:`~fte_shell.episode.sigterm_as_interrupt`). ``fork_run``: the same for a fork of a finished run at
turn K (:mod:`fte_shell.episode.fork`). A run stopped part-way is resumed in place at its last completed
turn (:mod:`fte_shell.episode.resume`)."""

from __future__ import annotations

import contextlib
import logging
from datetime import datetime
from pathlib import Path
from typing import Any

from .agent import Agent
from .config import RunConfig
from .episode import Episode, RunResult, check_question, sigterm_as_interrupt
from .episode.fork import ParentTimes
from .episode.host import EpisodeHost
from .episode.resume import (
    CannotResume,
    ResumeMismatch,
    ResumePrefix,
    Stopped,
    clear,
    closed_world,
    read_stopped,
    redone_before,
    stash,
    stopped_here,
)
from .model import ModelClient
from .record.events import ResumeEvent
from .record.rundir import EventListener
from .world import RunWorld, World

_log = logging.getLogger(__name__)


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
    resume: bool = True,
) -> RunResult:
    """Answer ``question`` with ``config.agent.profile`` and write the run directory ``out_dir``
    (``trajectory.jsonl``, ``result.json``, ``workspace/``).

    ``world`` (search, page source, page cache, snapshot; a sweep shares one) defaults to
    :meth:`World.from_config` of ``config``, made and closed by this run; ``model`` to a new
    :class:`ModelClient` (pass one to share its connection pool). ``log`` gets every trajectory event as
    it is written. ``qid`` becomes the run id (default: timestamp + slug, or the stopped run's) and
    ``meta["qid"]``. When ``out_dir`` holds a run of ``question`` stopped part-way (no result, or an
    infrastructure stop) and ``resume``, it is resumed in place at its last completed turn
    (:mod:`fte_shell.episode.resume`); when it cannot be, or its replayed state differs, it is redone from
    scratch and its record says why. Raises :class:`~fte_shell.errors.ModelError` at once when no model
    endpoint is configured, and re-raises KeyboardInterrupt after recording it (SIGTERM counts as one in
    the main thread)."""
    check_question(question, config)
    out_dir = Path(out_dir)
    stopped, why = find_stopped(out_dir, question, config, world) if resume else (None, None)
    with contextlib.ExitStack() as cleanup:  # undone in reverse order, even on exceptions or Ctrl-C
        if model is None:
            model = ModelClient(config.model)  # fails fast without an endpoint
            cleanup.callback(model.close)
        info = model.server_info()  # probed once per client, before the box starts and outside the time budget
        cleanup.enter_context(sigterm_as_interrupt())  # kept through the episode's closes, so SIGTERM cannot skip them
        meta = {**({"qid": qid} if qid else {}), **(meta or {})}
        if stopped is not None:
            try:
                return _resume(stopped, question, config, out_dir, world=world, qid=qid, log=log, model=model,
                               info=info, meta=meta)
            except ResumeMismatch as e:
                why = str(e)
        redone = redone_before(out_dir) + 1 if why is not None else 0
        if why is not None:
            _log.warning("fte-shell: %s; the run is redone from scratch", why)
            clear(out_dir)
        ep = cleanup.enter_context(EpisodeHost(config, world).open(
            question, out_dir, run_id=qid, log=log, server=info, model=model, meta=meta))
        if why is not None:
            ep.resumed = {"count": 0, "turns": [], "redone": redone, "mismatch": why}
            ep.record(ResumeEvent(turn=0, count=0, equal=False, mismatches=[why], redone=redone))
        return Agent(config, model).drive(ep)


def find_stopped(out_dir: Path, question: str, config: RunConfig,
                 world: World | None = None) -> tuple[Stopped | None, str | None]:
    """The run stopped part-way in ``out_dir`` to resume (None: none, or nothing to replay), and the
    one-line reason it cannot be resumed (None: it can, or there is none)."""
    if not stopped_here(out_dir):
        return None, None
    try:
        return read_stopped(out_dir, question, config, closed=closed_world(world)), None
    except CannotResume as e:
        return None, str(e)


def _resume(stopped: Stopped, question: str, config: RunConfig, out_dir: Path, *, world: World | None,
            qid: str | None, log: EventListener | None, model: ModelClient, info: Any, meta: dict[str, Any]) -> RunResult:
    """Resume ``stopped`` in place: its record stashed, its turns replayed, then live."""
    st = stash(out_dir)
    with contextlib.ExitStack() as stack:
        if world is None:
            world = stack.enter_context(World.from_config(config))
        host = EpisodeHost(config, StampedWorld(world, st / "workspace", stopped.retrieval_times()))  # type: ignore[arg-type]
        ep = stack.enter_context(host.open(
            question, out_dir, run_id=qid or stopped.start.run_id, log=log, server=info, model=model, meta=meta))
        ep.prefix = ResumePrefix.of(stopped)
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


class StampedWorld:
    """A world whose runs see a local corpus's documents with the retrieval time of the stopped run's
    workspace file of the same name, else the time its recorded fetch wrote it
    (:class:`~fte_shell.episode.fork.ParentTimes`), so a replayed fetch writes the very same file."""

    def __init__(self, inner: World, workspace: Path, times: dict[str, datetime] | None = None):
        self.inner, self.workspace, self.times = inner, workspace, times

    def bind(self, run_id: str | None, run_dir: Path | None, log: EventListener | None = None) -> RunWorld:
        rw = self.inner.bind(run_id, run_dir, log)
        if rw.page_source is not None:
            rw.page_source = ParentTimes(rw.page_source, self.workspace, self.times)  # type: ignore[assignment]
        return rw

