"""``run_question``: set up one question (model client, world, profile), run the loop, write the run
directory, clean up — the profile (and with it any container) is closed even on exceptions, Ctrl-C or
SIGTERM (:func:`sigterm_as_interrupt`, the one handler that turns SIGTERM into KeyboardInterrupt)."""

from __future__ import annotations

import contextlib
import datetime as _dt
import re
import signal
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .agent import Agent, RunResult
from .config import RunConfig
from .errors import ConfigError
from .model import ModelClient
from .profiles import QuestionContext, make_profile
from .profiles.base import check_profile_name
from .record.rundir import EventListener, RunWriter
from .world import World


def slugify(text: str, limit: int = 40) -> str:
    """A short file-name-safe slug of ``text`` (lower-case words joined by ``-``; never empty)."""
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:limit].strip("-")
    return slug or "question"


def new_run_id(question: str) -> str:
    """``YYYYmmdd-HHMMSS-<slug>-<4 hex>``: sortable, readable, unique."""
    now = _dt.datetime.now(_dt.UTC).strftime("%Y%m%d-%H%M%S")
    return f"{now}-{slugify(question, 32)}-{uuid.uuid4().hex[:4]}"


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While inside, SIGTERM raises KeyboardInterrupt in the main thread (so the loop records
    ``interrupted``, writes ``result.json`` and the profile is closed; the sweep uses it too — SIGINT
    raises KeyboardInterrupt by itself). No-op outside the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


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
    it is written. ``qid`` becomes the run id (default: timestamp + slug). Raises
    :class:`~fte_shell.errors.ModelError` at once when no model endpoint is configured, and re-raises
    KeyboardInterrupt after recording it (SIGTERM counts as one in the main thread)."""
    if not question.strip():
        raise ConfigError("the question is empty")
    check_profile_name(config.agent.profile)
    with contextlib.ExitStack() as cleanup:  # undone in reverse order, even on exceptions or Ctrl-C
        if model is None:
            model = ModelClient(config.model)  # fails fast without an endpoint
            cleanup.callback(model.close)
        run_id = qid or new_run_id(question)
        if world is None:
            world = cleanup.enter_context(World.from_config(config))
        run_world = cleanup.enter_context(world.bind(run_id, Path(out_dir), log))
        cleanup.enter_context(sigterm_as_interrupt())  # kept through the closes below, so SIGTERM cannot skip them
        recorder = cleanup.enter_context(RunWriter(Path(out_dir), listener=run_world.listener))
        ctx = QuestionContext(config=config, workspace_dir=recorder.workspace_dir, world=run_world, run_id=run_id,
                              model=model)
        try:
            profile = make_profile(config.agent.profile, ctx)
        except Exception as e:
            recorder.event("error", turn=0, message=f"profile '{config.agent.profile}' failed to start: {e}")
            raise
        cleanup.callback(_close_quietly, profile)
        agent = Agent(config, model, profile, recorder, run_id=run_id,
                      meta={**({"qid": qid} if qid else {}), **run_world.meta, **(meta or {})})
        return agent.run(question)


def _close_quietly(profile: Any) -> None:
    """Close the profile; a Ctrl-C or SIGTERM arriving during the close does not stop the close."""
    try:
        profile.close()
    except KeyboardInterrupt:
        profile.close()
        raise
