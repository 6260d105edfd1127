"""fte_shell.rl.verifiers with the real verifiers 0.4: its loader resolves the taskset, and `vf-eval` runs 3
HotpotQA questions x 2 rollouts end to end (fte-shell's tools over MCP, a bwrap box per rollout, the
loopback scripted model) with rewards equal to what `fte-shell judge` gives for the same answers."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from fte_shell import load_config
from fte_shell.agent.replies import extract_answer
from fte_shell.record.rundir import read_judgement, verdicts
from fte_shell.rl import EpisodePool
from fte_shell.standins.server import ScriptedServer, ScriptToolCall, ScriptTurn
from tests.providers import CASES
from tests.test_rl_pool import live_boxes, usable

ROOT = Path(__file__).resolve().parents[1]
RIGHT = "San Juan, San Luis and Mendoza"  # the gold answer of the second question


def test_verifiers_loader_resolves_the_taskset_and_its_harness(hotpotqa_dir: Path) -> None:
    from verifiers.v1.utils.loaders import default_harness_id, harness_class, taskset_class

    from fte_shell.rl.verifiers import FteShellTaskset, FteShellTasksetConfig, HostChatHarness

    assert taskset_class("fte-shell-rl") is FteShellTaskset
    assert default_harness_id("fte-shell-rl") == "fte-shell-rl" and harness_class("fte-shell-rl") is HostChatHarness
    tasks = list(FteShellTaskset(FteShellTasksetConfig(dataset="hotpotqa", limit=3)))
    assert len(tasks) == 3 and tasks[1].data.answer == RIGHT and tasks[1].data.dataset == "hotpotqa"
    assert "<answer>" in (tasks[0].data.system_prompt or "") and tasks[0].key == tasks[0].data.id
    assert [type(t).__name__ for t in FteShellTaskset.task_type().toolsets(tasks[0].config)] == ["FteShellToolset"]


def policy(req: dict[str, Any]) -> ScriptTurn | str:
    """One bash call in the box, then an answer: right for the second question, wrong for the others."""
    msgs = req["messages"]
    user = next(m["content"] for m in msgs if m["role"] == "user")
    tools = [m for m in msgs if m["role"] == "tool"]
    if not tools:
        return ScriptTurn(tool_calls=[ScriptToolCall(name="bash", arguments={"command": "echo in-the-box; pwd"})])
    assert "in-the-box" in str(tools[-1]["content"]) and "/work" in str(tools[-1]["content"])
    return f"Done. <answer>{RIGHT if '1944 San Juan' in str(user) else 'Buenos Aires'}</answer>"


def test_vf_eval_rewards_equal_fte_shell_judge(hotpotqa_dir: Path, tmp_path: Path) -> None:
    usable(next(c for c in CASES if c.id == "bwrap"))
    overrides = {"search": {"backend": "none"}, "sandbox": {"provider": "bwrap"}}
    env = dict(os.environ, FTE_TEST_KEY="unused", PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    vf_eval = Path(sys.executable).parent / "vf-eval"
    before = set(Path(tempfile.gettempdir()).glob("fte-vf-*"))
    with ScriptedServer(policy=policy) as srv:
        p = subprocess.run([str(vf_eval), "fte-shell-rl", "-m", "scripted", "-n", "3", "-r", "2", "--no-push",
                            "--client.base-url", srv.base_url, "--client.api-key-var", "FTE_TEST_KEY",
                            "--env.agent.runtime.type", "subprocess", "--env.taskset.dataset", "hotpotqa", "-o", str(tmp_path / "vf"),
                            "--env.taskset.task.tools.overrides", json.dumps(overrides)],
                           env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    traces = [json.loads(line) for f in (tmp_path / "vf").rglob("traces.jsonl") for line in f.read_text().splitlines()]
    rollouts = [t for row in traces for t in (row["traces"] if "traces" in row else [row])]
    assert len(rollouts) == 6 and all(not r["errors"] for r in rollouts), [r["errors"] for r in rollouts]
    got = []
    for r in rollouts:
        data = r["task"]["data"]
        replies = [n["message"] for n in r["nodes"] if (n.get("message") or {}).get("role") == "assistant"]
        answer = extract_answer(str(replies[-1].get("content") or ""))
        got.append((data["id"], data["question"], data["answer"], answer, r["rewards"]["correct"]["score"]))
    assert sorted(g[4] for g in got) == [0.0, 0.0, 0.0, 0.0, 1.0, 1.0]
    assert all(g[3] for g in got), got  # every rollout answered
    # the same answers as fte-shell runs, graded by `fte-shell judge`
    cfg = load_config(None, {"agent": {"profile": "fte"}, "search": {"backend": "none"}})
    out = tmp_path / "judged"

    async def record() -> list[Path]:
        async with EpisodePool(cfg, out_dir=out, dataset="hotpotqa") as pool:
            eps = [await pool.reset(q, answer=gold, qid=qid) for qid, q, gold, _, _ in got]
            for ep, g in zip(eps, got, strict=True):
                await ep.finish(g[3])
            return [ep.run_dir for ep in eps]

    dirs = asyncio.run(record())
    judged = subprocess.run([sys.executable, "-m", "fte_shell", "judge", str(out), "--force"], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert judged.returncode == 0, judged.stderr
    assert [verdicts(read_judgement(d))["match"]["correct"] for d in dirs] == [g[4] == 1.0 for g in got]
    assert live_boxes("bwrap", os.getpid()) == []
    # each rollout's temporary run directory is gone too (its server ended without its teardown: the
    # reaper's gc of a dead owner's directories removed it)
    deadline = time.monotonic() + 60
    while (left := set(Path(tempfile.gettempdir()).glob("fte-vf-*")) - before) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not left, sorted(left)
