"""Resume overhead: what continuing a stopped run costs before its first live model call.

    python3 perf/resume_overhead.py [--provider bwrap] [--turns 50] [--rounds 3]

Records, through the real loop and a scripted loopback model, a shell-profile run of ``--turns`` turns of
typical commands (``echo``/``grep``/``sed``/``wc``/``ls``, files written to /work and /tmp, ``cd`` and
``export``) and a final answer, with a snapshot. Then, for ``--rounds`` rounds, interleaved:

1. baseline: a fresh run of the same question whose first reply is the answer (the box's start, the
   start event, one model call and the end: what any run pays);
2. resumed: a copy of the recorded run stopped after turn ``--turns`` (``result.json`` gone), resumed by
   ``run_question``: the box's start, the replay of every recorded tool call, the check, then the same one
   live answer.

Prints medians, the resume overhead (resumed − baseline: the replay and its check), per replayed turn, and
the ratio resumed / baseline. The goal (issue 34): overhead ≤ 1 s for 50 turns on bwrap.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from fte_shell.config import RunConfig
from fte_shell.runner import run_question
from fte_shell.standins.server import ScriptedServer, ScriptToolCall, ScriptTurn

Q = "Which notes did the run keep?"
COMMANDS = [
    "echo 'note {i}' >> /work/notes.md",
    "grep -c note /work/notes.md",
    "cd /tmp && mkdir -p d{i} && cd d{i} && export STEP={i}",
    "wc -l /work/notes.md; ls /work | head",
    "sed -n '1,3p' /work/notes.md",
]


def script(turns: int) -> list[ScriptTurn]:
    out = [ScriptTurn(tool_calls=[ScriptToolCall(id=f"c{i}", name="bash", arguments={
        "command": COMMANDS[i % len(COMMANDS)].format(i=i)})]) for i in range(1, turns + 1)]
    return [*out, ScriptTurn(content="<answer>the notes</answer>")]


def config(url: str, provider: str, snap: Path) -> RunConfig:
    return RunConfig.model_validate({
        "model": {"base_url": url, "model": "scripted", "max_retries": 0},
        "agent": {"profile": "shell", "max_turns": 500, "current_date": "2026-01-15"},
        "search": {"backend": "none"}, "sandbox": {"provider": provider}, "snapshot": {"dir": str(snap)}})


def stop_after(src: Path, dest: Path, turn: int) -> None:
    """``src`` as a SIGKILL after turn ``turn``'s last tool result leaves it."""
    shutil.copytree(src, dest)
    lines = (dest / "trajectory.jsonl").read_text().splitlines()
    last = max(i for i, line in enumerate(lines) if (e := json.loads(line))["type"] == "tool_call" and e["turn"] == turn)
    (dest / "trajectory.jsonl").write_text("\n".join(lines[:last + 1]) + "\n")
    (dest / "result.json").unlink()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--provider", default="bwrap")
    ap.add_argument("--turns", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="fte-resumebench-"))
    os.chmod(tmp, 0o755)  # a bwrap box started by root runs as sandbox.user, who must reach the workspace
    snap = tmp / "snap"
    try:
        with ScriptedServer(script(args.turns)) as srv:
            res = run_question(Q, config(srv.base_url, args.provider, snap), tmp / "recorded")
        assert res.stop_reason == "answer", res.stop_reason
        base_t, resumed_t = [], []
        for r in range(args.rounds):
            with ScriptedServer([ScriptTurn(content="<answer>the notes</answer>")]) as srv:
                t0 = time.perf_counter()
                run_question(Q, config(srv.base_url, args.provider, snap), tmp / f"base{r}")
                base_t.append(time.perf_counter() - t0)
            stop_after(tmp / "recorded", tmp / f"resumed{r}", args.turns)
            with ScriptedServer([ScriptTurn(content="<answer>the notes</answer>")]) as srv:
                t0 = time.perf_counter()
                res = run_question(Q, config(srv.base_url, args.provider, snap), tmp / f"resumed{r}")
                resumed_t.append(time.perf_counter() - t0)
                assert len(srv.requests) == 1 and res.resumed is not None, "resumed with one live call"
        b, s = statistics.median(base_t), statistics.median(resumed_t)
        print(f"provider {args.provider}, {args.turns} replayed turns, {args.rounds} rounds (medians)")
        print(f"  baseline run (box start + 1 answer turn): {b:.3f} s")
        print(f"  resumed run  (box start + {args.turns}-turn replay + check + 1 answer turn): {s:.3f} s")
        print(f"  resume overhead: {s - b:.3f} s ({(s - b) / args.turns * 1000:.1f} ms per replayed turn); "
              f"ratio resumed/baseline {s / b:.2f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
