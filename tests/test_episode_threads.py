"""The async episode API runs its blocking work in threads of its own, not in the event loop's default
executor (6 threads on a 2-core machine): a burst of episodes is never queued behind a few of them."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from test_agent import NotesProfile

from fte_shell.config import RunConfig
from fte_shell.episode import Episode
from fte_shell.profiles import ToolResult
from fte_shell.record.rundir import RunWriter

N = 32


class MeetingProfile(NotesProfile):
    """``meet()`` returns only once N calls are inside it at the same time (a barrier, 60 s at most)."""

    def __init__(self, barrier: threading.Barrier) -> None:
        super().__init__()
        self.barrier = barrier

    def tools(self) -> list[dict[str, Any]]:
        meet = {"type": "function", "function": {"name": "meet", "description": "meet",
                                                 "parameters": {"type": "object", "properties": {}}}}
        return [*super().tools(), meet]

    def execute(self, name: str, args: dict[str, Any]) -> ToolResult:
        if name == "meet":
            self.barrier.wait(timeout=60)
            return ToolResult(output="met")
        return super().execute(name, args)


def test_a_burst_of_acalls_runs_at_once_beside_a_small_default_executor(tmp_path: Path) -> None:
    barrier = threading.Barrier(N)

    async def main() -> list[str]:
        from concurrent.futures import ThreadPoolExecutor

        small = ThreadPoolExecutor(max_workers=2)  # the caller's own default executor stays theirs
        asyncio.get_running_loop().set_default_executor(small)
        eps = []
        for i in range(N):
            rec = RunWriter(tmp_path / f"r{i}")
            eps.append(Episode(RunConfig(), "q", MeetingProfile(barrier), rec))
        try:
            results = await asyncio.gather(*(ep.acall("meet", {}) for ep in eps))
            return [r.output for r in results]
        finally:
            for ep in eps:
                await ep.aclose()
            small.shutdown()

    # with 2 (or the default 6) threads the N calls could never all be inside meet(): the barrier would break
    assert asyncio.run(main()) == ["met"] * N
    assert not barrier.broken
