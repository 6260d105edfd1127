"""perf/sandbox_figures.py in its quick mode, so the script that makes the sandbox figures cannot rot: real
boxes (fte-shell's Docker and bwrap providers through the Episode) beside the real peers it measures
against (verifiers' local DockerRuntime, mini-swe-agent's DockerEnvironment), every figure present and
every start, action and episode answered. (The trajectory figure is left out here: it runs the same
episode as the episodes-per-second figure, and verifiers' import alone takes 5 s of CPU.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CASES = ["docker", "bwrap", "verifiers-docker", "mini-swe-agent"]

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_quick_figures_answer_every_start_and_episode(docker_ready: None, tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's fte_shell, not an installed one
    proc = subprocess.run(
        [sys.executable, str(ROOT / "perf" / "sandbox_figures.py"), "--quick", "--cases", ",".join(CASES),
         "--sequential", "1", "--stagger", "0", "--actions", "", "--json", str(out)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(out.read_text())
    assert res["meta"]["cases"] == CASES, proc.stderr[-3000:]  # none of them was left out
    for case in CASES:
        seq = res["sequential"][case]
        assert (seq["n"], seq["ok"], seq["errors"]) == (1, 1, []), (case, seq)
        assert 0 < seq["p50"] < 300
        burst = res["launch"]["burst 2"][case]
        assert (burst["n"], burst["ok"]) == (2, 2), (case, burst)
        assert burst["all_ready_s"] >= burst["p99"] > 0
        thr = res["throughput"]["2"][case]
        assert (thr["n"], thr["ok"], thr["errors"]) == (2, 2, []), (case, thr)
        assert thr["eps"] == pytest.approx(2 / thr["wall_s"])
    table = [line for line in proc.stdout.splitlines() if line.startswith("| ")]
    assert table[0] == "| figure | " + " | ".join(CASES) + " | " + " | ".join(
        f"verifiers-docker ÷ {c}" for c in CASES if c != "verifiers-docker") + " |"
    assert any(line.startswith("| burst 2: answered | 2/2 | 2/2 | 2/2 | 2/2 |") for line in table), table
    assert "episodes/s at 2 in flight: docker" in proc.stdout
