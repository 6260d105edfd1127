"""``EpisodePool``: many episodes at once from one asyncio event loop, for a trainer's rollouts.

::

    async with EpisodePool(config, size=64, dataset="hotpotqa") as pool:
        ep = await pool.reset(question, answer=gold)      # its own box and workspace (a warm one)
        ep.tools                                          # the profile's tool schemas
        r = await ep.step("bash", {"command": "…"})      # the ToolResult, recorded
        reward = await ep.finish(answer)                  # graded as `fte-shell judge` grades it

Each episode is an :class:`~fte_shell.episode.Episode`; the shell profile's boxes come from a
:class:`~fte_shell.sandbox.SandboxPool` (warm boxes, started one after another by its filler). A burst
of resets that finds no warm box starts boxes itself, at most ``max_starting`` at a time and
``start_interval_s`` apart. The pool's directory is a sweep (``sweep.json``, ``questions.jsonl``,
``runs/<profile>/<qid>/r<k>/``) that ``fte-shell judge``, ``report`` and ``view`` read. An episode is
closed when it finishes, when its ``agent.time_budget_s`` passes (``time_budget``), and when the pool
closes (``abandoned``); its box then goes back to the box pool, reset, for the next episode
(``PoolConfig.reuse_boxes``; its workspace copied into the run directory first), or is removed. Nothing
outlives the pool: its close removes the warm and given-back boxes and those of the episodes still open;
a SIGKILLed trainer's boxes are removed by the sandbox's reaper.
"""

from __future__ import annotations

import asyncio
import functools
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self, TypeVar

from ..benchmarks.base import question_id, safe_id
from ..config import RunConfig
from ..episode import Episode
from ..episode.host import EpisodeHost
from ..episode.threads import closed_if_cancelled, in_thread
from ..profiles import ToolResult
from ..record.sweepdir import ManifestDataset, SweepDir, SweepManifest
from ..sandbox import SandboxPool
from ..stops import is_infra_failure
from ..world import World
from .config import PoolConfig
from .grading import Grader, reward_of

T = TypeVar("T")


class EpisodeOver(RuntimeError):
    """A step on an episode that has ended (finished, timed out, or closed with its pool)."""


class PoolEpisode:
    """One episode of an :class:`EpisodePool`: ``tools``, ``await step(name, args)``, ``await finish(answer)``."""

    def __init__(self, pool: EpisodePool, ep: Episode, qid: str, gold: str | None, trajectory: list[dict[str, Any]]):
        self.pool, self.episode, self.qid, self.gold = pool, ep, qid, gold
        self.trajectory = trajectory
        """Every event of the run as written (the trajectory, also when ``record`` is False)."""
        self.reward: float | None = None
        """Set by :meth:`finish`: 1.0 correct, 0.0 wrong, None without a gold answer or on an infrastructure failure."""
        self.verdict: Any = None
        """The grading preset's verdict behind :attr:`reward`."""
        self._timer: asyncio.TimerHandle | None = None
        self._closing: asyncio.Task[None] | None = None

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The profile's tool schemas (OpenAI function format)."""
        return self.episode.tools

    @property
    def question(self) -> str:
        return self.episode.question

    @property
    def run_dir(self) -> Path:
        return self.episode.run_dir

    @property
    def done(self) -> bool:
        return self.episode.finished or self._closing is not None

    async def step(self, name: str, args: dict[str, Any] | str | None = None) -> ToolResult:
        """Run tool ``name`` (a turn of its own) and return its result; :class:`EpisodeOver` once ended."""
        if self.done:
            stop = self.episode.result.stop_reason if self.episode.result else "closed"
            raise EpisodeOver(f"episode {self.episode.run_id} has ended ({stop}): reset a new one")
        turn = self.episode.begin_turn()
        return await self.pool._run(functools.partial(self.episode.call, name, args, turn=turn))

    async def finish(self, answer: str | None, *, stop_reason: str | None = None) -> float | None:
        """End the episode with ``answer`` (None: ``abandoned``, scored as unanswered), close its box and
        return its reward (:attr:`reward`)."""
        if self.done:
            raise EpisodeOver(f"episode {self.episode.run_id} has already ended")
        stop = stop_reason or ("answer" if answer is not None else "abandoned")
        result = await self.pool._run(functools.partial(self.episode.finish, answer, stop_reason=stop))
        try:
            if self.gold is not None and not is_infra_failure(result.stop_reason):
                self.verdict = await self.pool.grader.verdict(self.question, result.answer, self.gold, self.run_dir,
                                                              self.pool.out_dir, self.qid)
                self.reward = reward_of(self.verdict)
        finally:
            await self.close()
        return self.reward

    async def close(self) -> None:
        """Close the episode (``abandoned`` if unfinished) and remove its box; idempotent."""
        if self._closing is None:
            if self._timer is not None:
                self._timer.cancel()
            self._closing = asyncio.ensure_future(self.pool._close_episode(self))
        await asyncio.shield(self._closing)

    def _time_out(self) -> None:
        if not self.done:
            self._closing = asyncio.ensure_future(self.pool._close_episode(self, "time_budget"))


class EpisodePool:
    """Episodes of ``config``'s profile, with warm boxes, paced starts and rewards (module docstring)."""

    def __init__(self, config: RunConfig, size: int | None = None, *, out_dir: Path | None = None,
                 dataset: str | None = None, judge: Any = None, settings: PoolConfig | None = None,
                 record: bool | None = None):
        """``size`` and ``record`` override ``settings`` (:class:`PoolConfig`); ``out_dir``: the pool's
        sweep directory (default: a temporary one, removed at close unless ``record``); ``dataset``: the
        benchmark kind whose grading preset gives the rewards (default ``jsonl``'s); ``judge``: an
        :class:`~fte_shell.benchmarks.llmjudge.LLMJudge` for a model preset."""
        upd = {k: v for k, v in (("size", size), ("record", record)) if v is not None}
        self.settings = (settings or PoolConfig()).model_copy(update=upd)
        self.config = config
        self.grader = Grader(config, dataset, judge, self.settings.judge_concurrency)
        self._temp = out_dir is None
        shm = Path("/dev/shm")
        self.out_dir = Path(out_dir) if out_dir is not None else Path(tempfile.mkdtemp(
            prefix="fte-rl-", dir=shm if not self.settings.record and shm.is_dir() else None))
        self.dataset = dataset
        self._sweep = SweepDir(self.out_dir)
        self._world: World | None = None
        self._host: EpisodeHost | None = None
        self._open: set[PoolEpisode] = set()
        self._reps: dict[str, int] = {}
        self._known: set[str] = set()
        self._new_questions: list[dict[str, Any]] = []
        self._reserved = 0
        self._starts: asyncio.Semaphore | None = None
        self._next_start = 0.0
        self._closed = False
        self._opening: set[asyncio.Future[Episode]] = set()

    # --- life -------------------------------------------------------------------------------------------
    async def start(self) -> Self:
        """Open the world, write the sweep manifest, start filling the warm boxes."""
        self._starts = asyncio.Semaphore(self.settings.max_starting)
        self._world = await self._run(functools.partial(World.from_config, self.config))
        self.out_dir.mkdir(parents=True, exist_ok=True)
        manifest = SweepManifest(dataset=ManifestDataset(kind=self.grader.benchmark.kind, source="fte_shell.rl"),
                                 profiles=[self.config.agent.profile], status="running")
        await self._run(functools.partial(self._sweep.write_manifest, manifest))
        self._host = await self._run(functools.partial(EpisodeHost, self.config, self._world, warm=self.settings.size,
                                                       reuse_boxes=self.settings.reuse_boxes))
        return self

    async def close(self) -> None:
        """Close every open episode (``abandoned``), the warm boxes and the world; idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            await asyncio.gather(*self._opening, return_exceptions=True)  # their resets close what they opened
            if self._host is not None:  # first: the open episodes' boxes are then removed, not reset
                await self._run(self._host.close)
            await asyncio.gather(*(ep.close() for ep in list(self._open)), return_exceptions=True)
            await self._flush_questions()
            if self._world is not None:
                await self._run(self._world.close)
            m = self._sweep.manifest()
            if m is not None:
                await self._run(functools.partial(self._sweep.write_manifest, m.model_copy(update={"status": "finished"})))
        finally:
            if self._temp and not self.settings.record:
                shutil.rmtree(self.out_dir, ignore_errors=True)

    async def __aenter__(self) -> Self:
        try:
            return await self.start()
        except BaseException:
            await self.close()
            raise

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.shield(self.close())

    @property
    def ready(self) -> int:
        """Warm boxes waiting now."""
        return self._boxes.ready if self._boxes is not None else 0

    @property
    def _boxes(self) -> SandboxPool | None:
        return self._host.boxes if self._host is not None else None

    @property
    def open_episodes(self) -> int:
        return len(self._open)

    # --- episodes ---------------------------------------------------------------------------------------
    async def reset(self, question: str, answer: str | None = None, *, qid: str | None = None,
                    meta: dict[str, Any] | None = None) -> PoolEpisode:
        """A new episode of ``question`` (its gold ``answer`` gives the reward) in its own box."""
        if self._closed or self._starts is None or self._host is None:
            raise EpisodeOver("the episode pool is not open (use `async with EpisodePool(…)`)")
        qid = safe_id(qid) if qid else question_id(question)
        self._note_question(qid, question, answer, meta)
        rep = self._reps.get(qid, 0) + 1
        while (run_dir := self._sweep.run_dir(self.config.agent.profile, qid, rep)).exists():
            rep += 1  # an earlier pool's episode, a dead trainer's stopped one too, is kept, never resumed
        self._reps[qid] = rep
        trajectory: list[dict[str, Any]] = []
        opener = functools.partial(self._host.open, question, run_dir, log=trajectory.append,
                                   meta={"qid": qid, "rep": rep, **(meta or {})})
        if self._boxes is not None and self._boxes.ready - self._reserved > 0:  # a warm box: no start to pace
            self._reserved += 1
            try:
                ep = await self._open_episode(opener)
            finally:
                self._reserved -= 1
        else:
            async with self._starts:
                await self._pace()
                ep = await self._open_episode(opener)
        pe = PoolEpisode(self, ep, qid, answer, trajectory)
        if self._closed:  # the pool closed while this episode opened
            await self._run(ep.close)
            raise EpisodeOver("the episode pool closed while the episode opened")
        self._open.add(pe)
        budget = self.config.agent.time_budget_s
        if budget:
            pe._timer = asyncio.get_running_loop().call_later(budget, pe._time_out)
        return pe

    async def _pace(self) -> None:
        """Wait for this start's slot of the ramp (``start_interval_s`` after the previous one)."""
        now = time.monotonic()
        slot = max(now, self._next_start)
        self._next_start = slot + self.settings.start_interval_s
        if slot > now:
            await asyncio.sleep(slot - now)

    async def _open_episode(self, opener: Callable[[], Episode]) -> Episode:
        """``opener`` in an episode worker thread; cancelled meanwhile, the episode it opens is ended
        (:func:`~fte_shell.episode.threads.closed_if_cancelled`)."""
        fut = in_thread(opener)
        self._opening.add(fut)
        fut.add_done_callback(self._opening.discard)
        return await closed_if_cancelled(fut)

    async def _close_episode(self, pe: PoolEpisode, stop: str | None = None) -> None:
        try:
            await self._run(functools.partial(pe.episode.end, stop_reason=stop))
        finally:
            self._open.discard(pe)
            if not self.settings.record:
                await self._run(functools.partial(shutil.rmtree, pe.run_dir, ignore_errors=True))
            await self._flush_questions()

    def _note_question(self, qid: str, question: str, answer: str | None, meta: dict[str, Any] | None) -> None:
        if qid not in self._known:
            self._known.add(qid)
            self._new_questions.append({"id": qid, "question": question, "answer": answer, "meta": meta or {}})

    async def _flush_questions(self) -> None:
        """Merge the questions seen since the last flush into ``questions.jsonl`` (the judge's gold answers)."""
        rows, self._new_questions = self._new_questions, []
        if rows and self.settings.record:
            await self._run(functools.partial(self._sweep.write_questions, rows))

    async def _run(self, fn: Callable[[], T]) -> T:
        """``fn`` in an episode worker thread (:mod:`fte_shell.episode.threads`, the async episode API's)."""
        return await in_thread(fn)
