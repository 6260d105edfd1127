"""fte_shell.rl's EpisodePool on real boxes: 32 concurrent episodes with the rewards `fte-shell judge`
gives and no box left; a SIGKILLed trainer (warm, handed-out and starting boxes) leaves no box, on
Docker, podman and bwrap."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from fte_shell import load_config
from fte_shell.record.rundir import read_judgement, verdicts
from fte_shell.rl import EpisodeOver, EpisodePool, PoolConfig, PoolEpisode
from fte_shell.sandbox.ownership import LABEL, OWNER_FILE
from tests.conftest import IN_CI
from tests.providers import CASES, ProviderCase

ROOT = Path(__file__).resolve().parents[1]
KILL_CASES = [c for c in CASES if c.id in ("docker", "podman", "bwrap")]


def usable(case: ProviderCase) -> None:
    problem = case.problem()
    if problem:
        if IN_CI:
            pytest.fail(problem)
        pytest.skip(problem)


def live_boxes(provider: str, pid: int) -> list[str]:
    """The boxes (and their temporary directories) of owner ``pid`` that still exist."""
    found = []
    tmp_dirs = []
    for d in Path("/tmp").glob("fte-*"):
        try:
            if (d / OWNER_FILE).read_text().split()[0] == str(pid):
                tmp_dirs.append(str(d))
        except (OSError, IndexError):
            continue
    found += tmp_dirs
    if provider in ("docker", "podman"):
        out = subprocess.run([provider, "ps", "-aq", "--filter", f"label={LABEL}.owner-pid={pid}"],
                             capture_output=True, text=True, timeout=60).stdout.split()
        found += [f"{provider}:{c}" for c in out]
    for proc in Path("/proc").iterdir():  # bwrap: a box is a process whose command line names its directory
        if proc.name.isdigit() and tmp_dirs:
            try:
                cmd = (proc / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if cmd.startswith("bwrap") and any(d in cmd for d in tmp_dirs):
                found.append(f"bwrap:{proc.name}")
    return found


def config(provider: str, **agent):
    return load_config(None, {"agent": {"profile": "shell", **agent}, "search": {"backend": "none"},
                              "sandbox": {"provider": provider}})


async def one(pool: EpisodePool, i: int) -> tuple[float | None, str]:
    ep = await pool.reset(f"What is {i} plus one?", answer=str(i + 1), qid=f"q{i}")
    assert [t["function"]["name"] for t in ep.tools] == ["bash"]
    r = await ep.step("bash", {"command": f"echo $(({i} + 1)) > /tmp/mine; cat /tmp/mine; ls /tmp"})
    lines = r.output.split()
    assert lines[0] == str(i + 1) and lines[1:2] == ["mine"], r.output  # its own box: nobody else's file
    reward = await ep.finish(lines[0] if i % 3 else "a wrong answer")
    with pytest.raises(EpisodeOver):
        await ep.step("bash", {"command": "true"})
    return reward, str(ep.run_dir)


def test_32_concurrent_episodes_rewards_as_judge_and_no_box_left(tmp_path: Path) -> None:
    case = next(c for c in CASES if c.id == "bwrap")
    usable(case)
    out = tmp_path / "pool"

    async def main() -> list[tuple[float | None, str]]:
        async with EpisodePool(config("bwrap"), size=8, out_dir=out, dataset="hotpotqa",
                               settings=PoolConfig(max_starting=4)) as pool:
            assert await asyncio.to_thread(pool._boxes.wait_ready, 2, 120)  # warm boxes come up by themselves
            got = await asyncio.gather(*(one(pool, i) for i in range(32)))
            assert pool.open_episodes == 0
            return got

    got = asyncio.run(main())
    assert [r for r, _ in got] == [0.0 if i % 3 == 0 else 1.0 for i in range(32)]
    assert live_boxes("bwrap", os.getpid()) == []
    # the pool's directory is a sweep: fte-shell judge grades it the same, run by run
    judged = subprocess.run([sys.executable, "-m", "fte_shell", "judge", str(out), "--force"], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert judged.returncode == 0, judged.stderr
    assert "match judge: 21/32 correct" in judged.stdout, judged.stdout
    for reward, run_dir in got:
        verdict = verdicts(read_judgement(Path(run_dir)))["match"]  # fte-shell judge's, written over the pool's
        assert verdict["correct"] == (reward == 1.0), verdict


def test_record_false_keeps_only_memory_and_timeout_closes(tmp_path: Path) -> None:
    case = next(c for c in CASES if c.id == "bwrap")
    usable(case)

    async def main() -> None:
        async with EpisodePool(config("bwrap", time_budget_s=5), size=1, record=False) as pool:
            out = pool.out_dir
            ep = await pool.reset("Say hi", answer="hi")
            await ep.step("bash", {"command": "echo hi"})
            assert await ep.finish("hi") == 1.0
            assert [e["type"] for e in ep.trajectory] == ["start", "tool_call", "end"]
            assert not ep.run_dir.exists()  # only in memory
            late = await pool.reset("Say ho", answer="ho")
            await asyncio.sleep(7)  # past agent.time_budget_s: finished time_budget, closed, its box removed
            with pytest.raises(EpisodeOver, match="time_budget"):
                await late.step("bash", {"command": "true"})
            assert late.trajectory[-1]["type"] == "end" and late.trajectory[-1]["stop_reason"] == "time_budget"
            assert pool.open_episodes == 0
            abandoned = await pool.reset("Left open", answer="x")
        assert abandoned.trajectory[-1]["stop_reason"] == "abandoned"  # closed with the pool
        assert not out.exists()

    asyncio.run(main())
    assert live_boxes("bwrap", os.getpid()) == []


LEAVE = ("setsid sleep 1001 >/dev/null 2>&1 </dev/null & nohup sleep 1002 >/dev/null 2>&1 & "
         "echo mine > /tmp/mine; export LEAK=1; leak() { :; }; cd /tmp; echo left")


@pytest.mark.parametrize("case", KILL_CASES, ids=[c.id for c in KILL_CASES])
def test_the_next_episode_gets_the_same_box_reset_and_its_own_workspace(case: ProviderCase, tmp_path: Path) -> None:
    usable(case)
    out = tmp_path / "pool"

    async def main() -> tuple[PoolEpisode, PoolEpisode]:
        async with EpisodePool(config(case.provider), size=1, out_dir=out) as pool:
            assert pool.settings.reuse_boxes  # the default
            first = await pool.reset("Leave a mess", answer="x", qid="first")
            box = first.episode.profile.sandbox
            (first.episode.workspace_dir / "page.md").write_text("the first episode's page")  # as a fetch does
            assert (await first.step("bash", {"command": LEAVE})).output.splitlines()[-1] == "left"
            assert "page.md" in (await first.step("bash", {"command": "ls /work"})).output
            await first.finish("x")
            second = await pool.reset("Find nothing", answer="y", qid="second")
            again = second.episode.profile.sandbox
            assert again is box and again.container_id == box.container_id and pool._boxes.reused == 1
            r = await second.step("bash", {"command": "echo cwd=$PWD leak=${LEAK-none}; type leak 2>&1 | head -1; "
                                           "ls -A /tmp /work; ps -eo args | grep -c 'sleep 100[12]'"})
            # no variable, function, file (in /tmp or /work) or process of the first episode is left
            assert r.output.splitlines() == ["cwd=/work leak=none", "bash: type: leak: not found", "/tmp:", "",
                                             "/work:", "0", "[exit code 1]"], r.output
            (second.episode.workspace_dir / "other.md").write_text("the second episode's page")
            await second.finish("y")
            return first, second

    first, second = asyncio.run(main())
    # each run directory kept its own workspace (a copy, made before the box was reset)
    assert not first.run_dir.joinpath("workspace").is_symlink()
    assert [p.name for p in first.run_dir.joinpath("workspace").iterdir()] == ["page.md"]
    assert [p.name for p in second.run_dir.joinpath("workspace").iterdir()] == ["other.md"]
    assert live_boxes(case.provider, os.getpid()) == []


DRIVER = textwrap.dedent(
    """
    import asyncio, os, sys
    from fte_shell import load_config
    from fte_shell.rl import EpisodePool

    cfg = load_config(None, {"agent": {"profile": "shell"}, "search": {"backend": "none"},
                             "sandbox": {"provider": sys.argv[1]}})

    async def main():
        pool = await EpisodePool(cfg, size=2, out_dir=sys.argv[2]).start()
        await asyncio.to_thread(pool._boxes.wait_ready, 2, 300)
        eps = [await pool.reset(f"question {i}", answer="x") for i in range(2)]   # warm boxes, handed out
        for ep in eps:
            await ep.step("bash", {"command": "sleep 0.1"})
        starting = [asyncio.ensure_future(pool.reset(f"more {i}", answer="x")) for i in range(2)]
        await asyncio.sleep(0.2)                                       # starts in flight, refills too
        print("READY", os.getpid(), flush=True)
        await asyncio.sleep(600)

    asyncio.run(main())
    """
)


@pytest.mark.parametrize("case", KILL_CASES, ids=[c.id for c in KILL_CASES])
def test_sigkilled_trainer_leaves_no_box(case: ProviderCase, tmp_path: Path) -> None:
    usable(case)
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, case.provider, str(tmp_path / "pool")], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.startswith("READY"), (line, proc.stderr.read() if proc.stderr else "")
        pid = int(line.split()[1])
        assert live_boxes(case.provider, pid), "the driver has boxes before it is killed"
        os.kill(pid, signal.SIGKILL)
        assert proc.wait(timeout=60) == -signal.SIGKILL
        deadline = time.monotonic() + 30  # the reaper runs gc 0, 3 and 10 s after
        while (left := live_boxes(case.provider, pid)) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert left == [], f"left behind by the SIGKILLed driver: {left}"
        # a later pool discards the dead trainer's episodes (docs/rl.md): kept as they were, never resumed nor
        # overwritten; its own episode of the same question is numbered after them
        kept = {p: p.read_bytes() for p in (tmp_path / "pool").rglob("trajectory.jsonl")}
        assert kept

        async def later() -> Path:
            async with EpisodePool(config(case.provider), size=1, out_dir=tmp_path / "pool") as pool:
                ep = await pool.reset("question 0", answer="x")
                await ep.finish("x")
                return Path(ep.run_dir)

        run_dir = asyncio.run(later())
        assert run_dir.name == "r2" and run_dir.parent / "r1" / "trajectory.jsonl" in kept
        assert {p: p.read_bytes() for p in kept} == kept
    finally:
        if proc.poll() is None:
            proc.kill()
