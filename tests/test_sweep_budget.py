"""A sweep's budget and its rate limiting, end to end: ``bench --max-cost`` (a price given in the config
file) stops starting runs at the budget, exits 4 and says so, and a later ``bench`` with a higher budget
resumes past it; a loopback endpoint answering a storm of 429s (with Retry-After) and then recovering
makes the sweep lower its concurrency and raise it again, with every run finished and none lost, failed
or scored. The scripted research policy drives every run (fte and snippet-only profiles, HotpotQA's local
corpus)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from test_sweep_failures import check_complete, results
from typer.testing import CliRunner

from fte_shell.benchmarks.hotpotqa import ensure_hotpotqa_corpus
from fte_shell.cli import app
from fte_shell.config import ModelConfig, RunConfig
from fte_shell.standins.research import ResearchPolicy
from fte_shell.standins.server import ScriptedServer, ScriptTurn, as_turn
from fte_shell.sweep import BenchConfig, run_sweep
from fte_shell.sweep.judge import judge_runs

runner = CliRunner()


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory, hotpotqa_dir: Path) -> Path:
    return ensure_hotpotqa_corpus(hotpotqa_dir, tmp_path_factory.mktemp("corpus") / "hotpotqa")


def in_plan_order(out: Path, questions: list[str]) -> list[dict[str, Any]]:
    """The finished runs' results in the order the sweep starts them (one profile, one repetition)."""
    res = {d.parent.name: r for d, r in results(out).items()}
    return [res[q] for q in questions if q in res]


def test_max_cost_stops_at_the_budget_and_a_higher_one_resumes(tmp_path: Path, hotpotqa_dir: Path,
                                                                corpus_dir: Path) -> None:
    out = tmp_path / "sweep"
    conf = tmp_path / "price.toml"
    conf.write_text("[model.price]\ninput = 1000.0\ncached_input = 1000.0\noutput = 1000.0\n")  # $0.001 a token

    def bench(*extra: str) -> Any:
        return runner.invoke(app, [
            "bench", f"hotpotqa:{hotpotqa_dir}", "--profiles", "snippet-only", "--limit", "5", "--out", str(out),
            "--base-url", srv.base_url, "--model", "scripted", "--api-key", "x", "--corpus-dir", str(corpus_dir),
            "--config", str(conf), "--concurrency", "1", "--no-progress", "--no-judge", *extra])

    with ScriptedServer(policy=ResearchPolicy()) as srv:
        first = bench("--max-cost", "0.000001")  # less than any run: the first run alone, then stop
        assert first.exit_code == 4, first.output
        assert "budget reached" in first.output and "rerun with a higher --max-cost" in first.output
        qids = [json.loads(line)["id"] for line in (out / "questions.jsonl").read_text().splitlines()]
        done = in_plan_order(out, qids)
        assert len(done) == 1 and done[0]["cost_usd"] == pytest.approx(done[0]["usage"]["total_tokens"] / 1000)
        manifest = json.loads((out / "sweep.json").read_text())
        assert manifest["status"] == "budget_reached"
        c1 = done[0]["cost_usd"]
        # a budget of 2.5 runs at the first one's cost: the rule decides from what is on disk
        second = bench("--max-cost", f"{2.5 * c1:.6f}")
        done = in_plan_order(out, qids)
        costs = [r["cost_usd"] for r in done]
        budget = float(f"{2.5 * c1:.6f}")
        # every run started while spent + (1 in flight) × mean of the finished ones stayed within the budget,
        # and the next one would have passed it
        for i in range(1, len(costs)):
            assert sum(costs[:i]) + sum(costs[:i]) / i <= budget + 1e-12, (i, costs)
        if len(costs) < len(qids):
            assert second.exit_code == 4, second.output
            assert sum(costs) + sum(costs) / len(costs) > budget
        else:
            assert second.exit_code == 0, second.output
        assert len(costs) >= 2  # c1 + c1 <= 2.5 c1: at least the second run started
        third = bench("--max-cost", "1000")  # far above: every run
        assert third.exit_code == 0, third.output
        assert "budget reached" not in third.output
    check_complete(out, 5)
    assert not (out / "failures.jsonl").exists()
    assert json.loads((out / "sweep.json").read_text())["status"] == "finished"


class Storm:
    """The research policy behind an endpoint that answers requests ``start`` to ``start + n - 1`` (counted
    from 1) with 429 and ``Retry-After``, then recovers."""

    def __init__(self, start: int, n: int, retry_after: float = 0.02):
        self.policy, self.start, self.n, self.retry_after = ResearchPolicy(), start, n, retry_after
        self.seen = self.refused = 0
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> ScriptTurn:
        with self._lock:
            self.seen += 1
            storm = self.start <= self.seen < self.start + self.n
            self.refused += storm
        if storm:
            return ScriptTurn(status=429, retry_after=self.retry_after, error="rate limit reached, slow down")
        return as_turn(self.policy(body))


def test_a_429_storm_lowers_then_restores_concurrency_and_loses_no_run(tmp_path: Path, hotpotqa_dir: Path,
                                                                      corpus_dir: Path) -> None:
    out = tmp_path / "sweep"
    storm = Storm(start=6, n=12)
    logs: list[str] = []
    with ScriptedServer(policy=storm) as srv:
        cfg = RunConfig(model=ModelConfig(base_url=srv.base_url, model="storm", api_key="x", max_retries=20,
                                          backoff_s=0.01, rpm=100_000))
        bench = BenchConfig(dataset=f"hotpotqa:{hotpotqa_dir}", limit=10, profiles=["fte", "snippet-only"],
                            concurrency=4, out=out, corpus_dir=corpus_dir)
        stats = run_sweep(bench, cfg, log=logs.append)
    assert storm.refused == 12
    lowered = [i for i, m in enumerate(logs) if "concurrency lowered to" in m]
    raised = [i for i, m in enumerate(logs) if "concurrency raised to" in m]
    assert lowered and raised and lowered[0] < raised[-1], logs
    assert stats.throttled == len(lowered) >= 1 and stats.concurrency_lowest <= 2
    assert stats.concurrency == 4 and "concurrency raised to 4 of 4" in logs[raised[-1]]
    # no run lost, none an infrastructure failure, every one a result the judge scores
    assert (stats.done, stats.failed, stats.pending, stats.lost) == (20, 0, 0, 0)
    res = check_complete(out, 20)
    assert not (out / "failures.jsonl").exists()
    retried = sum(1 for d in res for line in (d / "trajectory.jsonl").read_text().splitlines()
                  if json.loads(line)["type"] == "retry" and "429" in json.loads(line)["error"])
    assert retried == 12  # each 429 was retried inside its run (Retry-After), never the run itself
    js = judge_runs([out], "match")
    assert js.judged == 20 and js.infra_failed == 0
