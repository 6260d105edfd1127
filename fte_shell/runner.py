"""``run_question``: open one question's :class:`~fte_shell.episode.Episode` and let the agent drive it —
the model client made (or shared), the server probed so the start event carries its window, the run
directory written, everything closed even on exceptions, Ctrl-C or SIGTERM (the process's own
:func:`~fte_shell.episode.sigterm_as_interrupt`)."""

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
