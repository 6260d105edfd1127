"""fte-shell as an OpenEnv environment: :class:`FteShellEnvironment` (openenv-core's ``Environment``:
reset/step/state, one instance per session, sessions concurrent), served by openenv's own
``create_app`` (:func:`make_app`) and driven by openenv's own WebSocket client (:class:`FteShellClient`).

Every session's episode comes from one shared :class:`~fte_shell.rl.pool.EpisodePool` (warm boxes, paced
starts, rewards by the dataset's grading preset), made in the server's event loop on the first reset and
closed at the server's shutdown. ``reset(question=…, answer=…)`` opens an episode (without a question:
the dataset's question ``seed`` modulo its size); a step is a tool call (``FteShellAction(tool="bash",
arguments={…})``) or the final answer (``FteShellAction(answer="…")``: ``done``, with the ``reward``).
A session that ends — closed, dropped, reaped idle — closes its episode and removes its box.

::

    app = make_app(config, dataset="hotpotqa")      # uvicorn.run(app, host="127.0.0.1", port=8000)
    async with FteShellClient(base_url="http://127.0.0.1:8000") as env:
        r = await env.reset(question="…", answer="…")
        r = await env.step(FteShellAction(tool="bash", arguments={"command": "search 'x'"}))
        r = await env.step(FteShellAction(answer="…"))   # r.done, r.reward
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

from ..benchmarks.registry import load_dataset
from ..config import RunConfig
from .config import PoolConfig
from .pool import EpisodePool, PoolEpisode


class FteShellAction(Action):
    """A tool call of the profile, or the final answer."""

    tool: str | None = Field(default=None, description="The tool to call (the shell profile: bash)")
    arguments: dict[str, Any] = Field(default_factory=dict, description="The tool's arguments")
    answer: str | None = Field(default=None, description="The final answer: ends the episode with its reward")


class FteShellObservation(Observation):
    """What the agent sees: the question and tools after a reset, a tool's output after a step."""

    output: str = Field(default="", description="The tool's observation (the question after a reset)")
    error: bool = Field(default=False, description="The call failed (unknown tool, bad arguments…)")
    question: str = Field(default="", description="The episode's question")
    tools: list[dict[str, Any]] = Field(default_factory=list, description="The profile's tool schemas")
    system_prompt: str = Field(default="", description="fte-shell's system prompt for the profile")


class FteShellState(State):
    """The session's episode."""

    question: str | None = Field(default=None, description="The episode's question")
    run_dir: str | None = Field(default=None, description="Its run directory")
    done: bool = Field(default=False, description="Finished")
    reward: float | None = Field(default=None, description="Its reward once finished")


class _Shared:
    """The server's episode pool, made in its event loop on first use, closed at shutdown."""

    def __init__(self, config: RunConfig, dataset: str | None, settings: PoolConfig | None, judge: Any):
        self.config, self.dataset, self.settings, self.judge = config, dataset, settings, judge
        self.pool: EpisodePool | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.questions: list[tuple[str, str | None, str]] = []
        self._lock: asyncio.Lock | None = None
        self.closing: set[asyncio.Task[None]] = set()

    async def get(self) -> EpisodePool:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self.pool is None:
                kind = self.dataset.partition(":")[0] if self.dataset else None
                if self.dataset:
                    ds = await asyncio.to_thread(load_dataset, self.dataset, options=self.config.benchmark)
                    self.questions, kind = [(q.question, q.answer, q.id) for q in ds.questions], ds.kind
                self.loop = asyncio.get_running_loop()
                self.pool = await EpisodePool(self.config, dataset=kind, judge=self.judge, settings=self.settings).start()
        return self.pool

    async def close(self) -> None:
        await asyncio.gather(*self.closing, return_exceptions=True)
        if self.pool is not None:
            await self.pool.close()


class FteShellEnvironment(Environment[FteShellAction, FteShellObservation, FteShellState]):
    """One session: one fte-shell episode at a time."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, shared: _Shared):
        super().__init__()
        self._shared = shared
        self._ep: PoolEpisode | None = None
        self._state = FteShellState()

    async def reset_async(self, seed: int | None = None, episode_id: str | None = None, question: str | None = None,
                          answer: str | None = None, **kwargs: Any) -> FteShellObservation:
        pool = await self._shared.get()
        await self._end()
        qid = None
        if question is None:
            if not self._shared.questions:
                raise ValueError("reset needs a question (the server has no dataset)")
            question, answer, qid = self._shared.questions[(seed or 0) % len(self._shared.questions)]
        self._ep = await pool.reset(question, answer, qid=qid)
        self._state = FteShellState(episode_id=episode_id or self._ep.episode.run_id, question=question,
                                    run_dir=str(self._ep.run_dir))
        return FteShellObservation(output=question, question=question, tools=self._ep.tools,
                                   system_prompt=self._ep.episode.system_prompt)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> FteShellObservation:
        return self._in_loop(self.reset_async(seed, episode_id, **kwargs))

    async def step_async(self, action: FteShellAction, timeout_s: float | None = None,
                         **kwargs: Any) -> FteShellObservation:
        if self._ep is None:
            raise ValueError("no episode: reset first")
        self._state.step_count += 1
        question = self._state.question or ""
        if action.answer is not None:
            reward = await self._ep.finish(action.answer)
            self._state.done, self._state.reward = True, reward
            return FteShellObservation(output="", question=question, done=True, reward=reward)
        if not action.tool:
            raise ValueError("an action names a tool or gives the answer")
        res = await self._ep.step(action.tool, action.arguments)
        return FteShellObservation(output=res.output, error=res.error, question=question)

    def step(self, action: FteShellAction, timeout_s: float | None = None, **kwargs: Any) -> FteShellObservation:
        return self._in_loop(self.step_async(action, timeout_s))

    @property
    def state(self) -> FteShellState:
        return self._state

    async def _end(self) -> None:
        ep, self._ep = self._ep, None
        if ep is not None:
            await ep.close()

    def close(self) -> None:
        """Close the session's episode (its box): from a worker thread (a WebSocket session's end), or in
        the server's loop (a stateless HTTP reset or step), where the close is scheduled."""
        loop = self._shared.loop
        if self._ep is None or loop is None or loop.is_closed():
            return
        if _running() is loop:
            task = loop.create_task(self._end())
            self._shared.closing.add(task)
            task.add_done_callback(self._shared.closing.discard)
        else:
            self._in_loop(self._end())

    def _in_loop(self, coro: Any) -> Any:
        """Run ``coro`` in the server's loop from a worker thread (openenv's sync paths)."""
        loop = self._shared.loop
        if loop is None or _running() is loop:
            raise RuntimeError("use the async API in the server's event loop")
        try:
            return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout=600)
        except concurrent.futures.TimeoutError as e:
            raise TimeoutError("the episode did not answer within 600 s") from e


def _running() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def make_app(config: RunConfig, *, dataset: str | None = None, settings: PoolConfig | None = None,
             judge: Any = None, max_sessions: int = 64) -> Any:
    """openenv's FastAPI app (``create_app``) over fte-shell episodes of ``config``: at most
    ``max_sessions`` concurrent sessions; the pool closes with the app."""
    shared = _Shared(config, dataset, settings, judge)
    app = create_app(lambda: FteShellEnvironment(shared), FteShellAction, FteShellObservation,
                     env_name="fte-shell", max_concurrent_envs=max_sessions)
    app.router.on_shutdown.append(shared.close)
    return app


class FteShellClient(EnvClient[FteShellAction, FteShellObservation, FteShellState]):
    """openenv's WebSocket client for :func:`make_app`'s server."""

    def _step_payload(self, action: FteShellAction) -> dict[str, Any]:
        return action.model_dump(exclude_none=True)

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[FteShellObservation]:
        obs = FteShellObservation(**payload.get("observation", {}), done=bool(payload.get("done")),
                                  reward=payload.get("reward"))
        return StepResult(observation=obs, reward=payload.get("reward"), done=bool(payload.get("done")))

    def _parse_state(self, payload: dict[str, Any]) -> FteShellState:
        return FteShellState(**payload)


__all__ = ["FteShellAction", "FteShellClient", "FteShellEnvironment", "FteShellObservation", "FteShellState",
           "make_app"]
