"""The bench/judge/report commands and the sweep's failure handling (structured profiles only: no Docker)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from fte_shell.cli import app
from fte_shell.config import ModelConfig, RunConfig
from fte_shell.errors import ConfigError
from fte_shell.runner import run_question
from fte_shell.standins.research import ResearchPolicy
from fte_shell.standins.server import ScriptedServer
from fte_shell.sweep import BenchConfig, run_sweep

runner = CliRunner()




def test_failures_recorded_and_retried(tmp_path: Path, hotpotqa_dir: Path, hotpotqa_corpus: Path) -> None:
    out = tmp_path / "sweep"
    broken = {"on": True}
    calls: list[str] = []

    def flaky(question: str, cfg: Any, run_dir: Path, **kw: Any) -> Any:
        calls.append(kw["qid"])
        if broken["on"] and kw["qid"].startswith(second_id) and cfg.agent.profile == "fte":
            run_dir.mkdir(parents=True, exist_ok=True)
            (run_dir / "trajectory.jsonl").write_text("")  # a partial directory the retry must replace
            raise RuntimeError("disk on fire")
        if kw["qid"].startswith(first_id) and cfg.agent.profile == "fte" and calls.count(kw["qid"]) == 1:
            raise RuntimeError("transient")  # fails once, succeeds on the immediate retry
        return run_question(question, cfg, run_dir, **kw)

    from fte_shell.benchmarks.registry import load_dataset

    first_id, second_id = [q.id for q in load_dataset(f"hotpotqa:{hotpotqa_dir}", limit=3).questions[:2]]
    with ScriptedServer(policy=ResearchPolicy()) as srv:
        cfg = RunConfig(model=ModelConfig(base_url=srv.base_url, model="scripted", api_key="x"))
        bench = BenchConfig(dataset=f"hotpotqa:{hotpotqa_dir}", limit=3, profiles=["fte", "snippet-only"],
                            concurrency=2, out=out, corpus_dir=hotpotqa_corpus)
        s1 = run_sweep(bench, cfg, run_fn=flaky)
        assert (s1.total, s1.done, s1.failed, s1.answered, s1.pending) == (6, 5, 1, 5, 1)
        failed = json.loads((out / "runs" / "fte" / second_id / "r0" / "result.json").read_text())
        assert failed["stop_reason"] == "failed" and "disk on fire" in failed["error"]
        lines = (out / "failures.jsonl").read_text().splitlines()
        assert len(lines) == 1
        row = json.loads(lines[0])
        assert (row["qid"], row["profile"], row["rep"], row["stop_reason"]) == (second_id, "fte", 0, "failed")
        assert "disk on fire" in row["error"] and row["when"]
        assert calls.count(f"{second_id}-fte-r0") == 2  # tried, retried once, recorded
        assert calls.count(f"{first_id}-fte-r0") == 2  # the transient failure was retried and finished
        first = json.loads((out / "runs" / "fte" / first_id / "r0" / "result.json").read_text())
        assert first["stop_reason"] == "answer"
        # a failure is not a result: a plain rerun redoes it
        s2 = run_sweep(bench, cfg, run_fn=flaky)
        assert (s2.skipped, s2.redone, s2.done, s2.failed) == (5, 1, 0, 1)
        broken["on"] = False
        s3 = run_sweep(bench, cfg, run_fn=flaky)
        assert (s3.skipped, s3.redone, s3.done, s3.failed, s3.pending) == (5, 1, 1, 0, 0)
        ok = json.loads((out / "runs" / "fte" / second_id / "r0" / "result.json").read_text())
        assert ok["stop_reason"] == "answer"
        # a partial run (no result.json) is deleted and redone
        partial = out / "runs" / "snippet-only" / second_id / "r0"
        (partial / "result.json").unlink()
        s4 = run_sweep(bench, cfg)
        assert (s4.redone, s4.done) == (1, 1)
        # more repetitions extend the sweep
        s5 = run_sweep(bench.model_copy(update={"runs": 2}), cfg)
        assert (s5.total, s5.skipped, s5.done) == (12, 6, 6)
        assert (out / "runs" / "fte" / second_id / "r1" / "result.json").exists()


def test_sweep_refuses_bad_input(tmp_path: Path, hotpotqa_dir: Path, hotpotqa_corpus: Path) -> None:
    cfg = RunConfig(model=ModelConfig(base_url="http://127.0.0.1:9/v1", model="m", api_key="x"))
    base: dict[str, Any] = {"dataset": f"hotpotqa:{hotpotqa_dir}", "limit": 1, "out": tmp_path / "s", "corpus_dir": hotpotqa_corpus}
    with pytest.raises(ConfigError, match="unknown profile"):
        run_sweep(BenchConfig(**base, profiles=["fte", "bogus"]), cfg)
    with pytest.raises(ConfigError, match="--runs"):
        run_sweep(BenchConfig(**base, profiles=["fte"], runs=0), cfg)
    other = tmp_path / "q.jsonl"
    other.write_text('{"id": "1", "question": "q?", "answer": "a"}\n')
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "sweep.json").write_text(json.dumps({"dataset": {"source": "/elsewhere", "split": None}}))
    with pytest.raises(ConfigError, match="choose another --out"):
        run_sweep(BenchConfig(**{**base, "dataset": str(other)}, profiles=["fte"]), cfg)


def test_cli_bench_judge_report(tmp_path: Path, hotpotqa_dir: Path, hotpotqa_corpus: Path) -> None:
    out = tmp_path / "sweep"
    args = ["bench", f"hotpotqa:{hotpotqa_dir}", "--profiles", "fte,snippet-only", "--limit", "3", "--out",
            str(out), "--scripted", "--corpus-dir", str(hotpotqa_corpus), "--no-progress", "-j", "2"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    assert "6 run(s) finished now" in r.output and "model-free judge:" in r.output
    r = runner.invoke(app, args)
    assert "6 already done" in r.output
    r = runner.invoke(app, ["judge", str(out)])
    assert r.exit_code == 0 and "match judge:" in r.output and "6 cached" in r.output
    reply = "extracted_final_answer: x\nreasoning: r\ncorrect: yes\nconfidence: 90"
    with ScriptedServer(policy=lambda body: reply) as srv:
        r = runner.invoke(app, ["judge", str(out), "--judge-model", "g", "--base-url", srv.base_url, "--api-key", "k"])
        assert r.exit_code == 0, r.output
        assert "llm-equivalence@g judge: 6/6 correct (6 judged now" in r.output and len(srv.requests) == 6
    r = runner.invoke(app, ["report", str(out), "--out", str(tmp_path / "rep")])
    assert r.exit_code == 0, r.output
    metrics = json.loads((tmp_path / "rep" / "metrics.json").read_text())
    assert {p["profile"]: p["accuracy"] for p in metrics["profiles"]} == {"fte": 1.0, "snippet-only": 1.0}
    assert "| fte | scripted | 3 | 0 | 3 | 100.0% |" in (tmp_path / "rep" / "report.md").read_text()


def test_cli_errors_are_one_line(tmp_path: Path) -> None:
    r = runner.invoke(app, ["bench", str(tmp_path / "nope.jsonl"), "--out", str(tmp_path / "o"), "--scripted",
                            "--profiles", "fte", "--no-progress"])
    assert r.exit_code == 2 and "dataset not found" in r.output
    r = runner.invoke(app, ["report", str(tmp_path / "missing"), "--out", str(tmp_path / "rep")])
    assert r.exit_code == 2 and "missing: no such file or directory" in r.output
    (tmp_path / "empty").mkdir()
    r = runner.invoke(app, ["report", str(tmp_path / "empty"), "--out", str(tmp_path / "rep")])
    assert r.exit_code == 2 and "empty: neither a run directory nor a sweep directory with runs" in r.output
    r = runner.invoke(app, ["judge", str(tmp_path / "empty"), "--judge-preset", "browsecomp"])
    assert r.exit_code == 2 and "--judge-model" in r.output
    for cmd in (["judge"], ["export", "atif"]):  # one path check (record.rundir.runs_under) for every reader
        r = runner.invoke(app, [*cmd, str(tmp_path / "missing"), "--out", str(tmp_path / "x")] if cmd[0] == "export"
                          else [*cmd, str(tmp_path / "missing")])
        assert r.exit_code == 2 and "missing: no such file or directory" in r.output, r.output
        r = runner.invoke(app, [*cmd, str(tmp_path / "empty"), "--out", str(tmp_path / "x")] if cmd[0] == "export"
                          else [*cmd, str(tmp_path / "empty")])
        assert r.exit_code == 2 and "empty: neither a run directory nor a sweep directory with runs" in r.output


def test_crashed_run_kept_and_retried(tmp_path: Path, hotpotqa_dir: Path, hotpotqa_corpus: Path) -> None:
    """A run the runner recorded as ``crashed`` (result.json written, then the exception re-raised) keeps
    the runner's record, counts as an infrastructure failure, and is redone on resume."""
    out = tmp_path / "sweep"
    crash = {"on": True}

    def crashing(question: str, cfg: Any, run_dir: Path, **kw: Any) -> Any:
        if crash["on"]:
            run_dir.mkdir(parents=True, exist_ok=True)
            (run_dir / "result.json").write_text(json.dumps({"question": question, "answer": None,
                                                             "stop_reason": "crashed", "run_id": kw["qid"]}))
            raise ValueError("profile bug")
        return run_question(question, cfg, run_dir, **kw)

    with ScriptedServer(policy=ResearchPolicy()) as srv:
        cfg = RunConfig(model=ModelConfig(base_url=srv.base_url, model="scripted", api_key="x"))
        bench = BenchConfig(dataset=f"hotpotqa:{hotpotqa_dir}", limit=1, profiles=["fte"], out=out,
                            corpus_dir=hotpotqa_corpus, retries=0)
        s1 = run_sweep(bench, cfg, run_fn=crashing)
        assert (s1.done, s1.failed, s1.failed_by_reason) == (0, 1, {"failed": 1})
        res = next(out.glob("runs/fte/*/r0/result.json"))
        assert json.loads(res.read_text())["stop_reason"] == "crashed"  # the runner's record is kept
        assert "profile bug" in (out / "failures.jsonl").read_text()
        assert run_sweep(bench, cfg, run_fn=crashing).redone == 1  # redone (and crashed again)
        crash["on"] = False
        s3 = run_sweep(bench, cfg, run_fn=crashing)
        assert (s3.redone, s3.done, s3.failed) == (1, 1, 0)
        assert json.loads(res.read_text())["stop_reason"] == "answer"


def test_cli_jsonl_dataset_with_a_local_corpus(tmp_path: Path, hotpotqa_dir: Path, hotpotqa_corpus: Path) -> None:
    rows = [json.loads(line) for line in (hotpotqa_dir / "dev.jsonl").read_text().splitlines()[:2]]
    qs = tmp_path / "qs.jsonl"
    qs.write_text("".join(json.dumps({"id": r["_id"], "question": r["question"], "answer": r["answer"]}) + "\n"
                          for r in rows))
    out = tmp_path / "sweep"
    r = runner.invoke(app, ["bench", f"jsonl:{qs}", "--profiles", "fte", "--out", str(out), "--scripted",
                            "--corpus", str(hotpotqa_corpus), "--search", "local", "--no-progress"])
    assert r.exit_code == 0, r.output
    assert "2 run(s) finished now (2 answered), 0 infrastructure failure(s)" in r.output
    manifest = json.loads((out / "sweep.json").read_text())
    assert manifest["dataset"]["kind"] == "jsonl"
    assert manifest["config"]["search"]["cache_dir"] == str(out / "shared" / "search-cache")
    assert any((out / "shared" / "search-cache").iterdir())
    assert {p.parent.name for p in out.glob("runs/fte/*/r0")} == {r["_id"] for r in rows}


class InProcessRuns:
    """A ``RemoteRuns`` that carries out each run in this process (the seam without a cluster): it counts
    what the sweep asks of it and sends this process SIGTERM from inside the ``stop_at``-th run."""

    uses_local_sandboxes = False

    def __init__(self, slots: int, stop_at: int | None = None) -> None:
        import threading

        self.slots, self.stop_at = slots, stop_at
        self.calls: list[str] = []
        self.opened = self.cancelled = self.closed = 0
        self.in_flight = self.peak = 0
        self._lock = threading.Lock()
        self._cancel = threading.Event()

    def open(self, bench: Any, dataset: Any, shared: Any, log: Any) -> tuple[Any, int]:
        self.opened += 1
        return self.run, self.slots

    def run(self, question: str, cfg: Any, run_dir: Path, **kw: Any) -> Any:
        import os
        import signal

        with self._lock:
            self.calls.append(kw["qid"])
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            n = len(self.calls)
        try:
            if n == self.stop_at:
                run_dir.mkdir(parents=True)  # a run in flight when the sweep is interrupted
                os.kill(os.getpid(), signal.SIGTERM)
                assert self._cancel.wait(30), "the sweep did not cancel the runs in flight"
                raise RuntimeError("cancelled")
            return run_question(question, cfg, run_dir, **kw)
        finally:
            with self._lock:
                self.in_flight -= 1

    def cancel(self) -> None:
        self.cancelled += 1
        self._cancel.set()

    def close(self) -> None:
        self.closed += 1


def test_remote_runs_seam_and_interrupt(tmp_path: Path, hotpotqa_dir: Path, hotpotqa_corpus: Path) -> None:
    """Runs carried out through a ``RemoteRuns``: the sweep opens it once, keeps its slots busy and no more,
    closes it; on SIGTERM it cancels the runs in flight, keeps them to resume and says it was interrupted; a
    resume keeps every run that got a result and continues the one that did not."""
    out = tmp_path / "sweep"
    with ScriptedServer(policy=ResearchPolicy()) as srv:
        cfg = RunConfig(model=ModelConfig(base_url=srv.base_url, model="scripted", api_key="x"))
        bench = BenchConfig(dataset=f"hotpotqa:{hotpotqa_dir}", limit=4, profiles=["fte", "snippet-only"],
                            concurrency=8, out=out, corpus_dir=hotpotqa_corpus)
        stopping = InProcessRuns(slots=1, stop_at=3)
        s1 = run_sweep(bench, cfg, remote=stopping)
        assert s1.interrupted and (s1.done, s1.lost, s1.failed) == (2, 1, 0), s1
        assert (stopping.opened, stopping.cancelled, stopping.closed, stopping.peak) == (1, 1, 1, 1)
        assert json.loads((out / "sweep.json").read_text())["status"] == "interrupted"
        # the run in flight is kept for a resume (docs/bench.md "Resume"); it wrote nothing, so it starts over
        assert len(list(out.glob("runs/*/*/r0"))) == 3
        assert sum(1 for d in out.glob("runs/*/*/r0") if (d / "result.json").exists()) == 2
        assert not (out / "failures.jsonl").exists()  # an interrupted run is no failure
        runs = InProcessRuns(slots=2)
        s2 = run_sweep(bench, cfg, remote=runs)
        assert not s2.interrupted and (s2.skipped, s2.done, s2.pending) == (2, 6, 0), s2
        assert (runs.opened, runs.cancelled, runs.closed) == (1, 0, 1) and runs.peak <= 2
        assert len(runs.calls) == 6
