"""End-to-end sweeps through the real harness: D1's run_question, the real sandbox for ``shell``, the
HotpotQA local corpus, and the scripted server running the deterministic research policy. Then the
model-free judge and the report, whose numbers must equal the metrics recomputed from the trajectories.
Finally a sweep run as a subprocess is SIGKILLed part-way and resumed: no finished run is done again,
none is lost, and no container is left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fte_shell.config import ModelConfig, RunConfig
from fte_shell.metrics import collect, run_metrics, summarize
from fte_shell.report.build import write_report
from fte_shell.report.sections import main_table
from fte_shell.standins.research import ResearchPolicy
from fte_shell.standins.server import ScriptedServer, as_turn
from fte_shell.stops import is_infra_failure
from fte_shell.sweep import BenchConfig, run_sweep
from fte_shell.sweep.judge import judge_runs
from tests.servers import run_key

pytestmark = [pytest.mark.docker, pytest.mark.slow]

REPO = Path(__file__).resolve().parent.parent




def our_containers(pids: list[int]) -> list[str]:
    import docker

    c = docker.from_env()
    out = []
    for pid in pids:
        # the low-level listing: one call, no per-container inspect that races a removal
        out += [x["Id"] for x in c.api.containers(all=True, filters={"label": f"fte-shell.owner-pid={pid}"})]
    return out


def test_sweep_judge_report(tmp_path: Path, docker_ready: None, hotpotqa_dir: Path, hotpotqa_corpus: Path) -> None:
    out = tmp_path / "sweep"
    profiles = ["shell", "fte", "snippet-only"]
    with ScriptedServer(policy=ResearchPolicy()) as srv:
        cfg = RunConfig(model=ModelConfig(base_url=srv.base_url, model="scripted", api_key="x"))
        bench = BenchConfig(dataset=f"hotpotqa:{hotpotqa_dir}", limit=20, profiles=profiles, concurrency=8,
                            out=out, corpus_dir=hotpotqa_corpus)
        events: Counter[str] = Counter()
        stats = run_sweep(bench, cfg, on_event=lambda kind, t, s: events.update([kind]))
        first = Counter(k for b in srv.requests if (k := run_key(b)))
        assert (stats.total, stats.done, stats.failed, stats.skipped) == (60, 60, 0, 0)
        assert events["start"] == 60 and events["done"] == 60
        assert len(first) == 60 and set(first.values()) == {1}  # each run started once
        # rerunning the same sweep does nothing
        again = run_sweep(bench, cfg)
        assert (again.skipped, again.done) == (60, 0)
        assert len([b for b in srv.requests if run_key(b)]) == 60
    manifest = json.loads((out / "sweep.json").read_text())
    assert manifest["status"] == "finished" and manifest["profiles"] == profiles
    assert manifest["config"]["search"]["backend"] == "local"
    assert manifest["config"]["model"]["api_key"] != "x"  # secrets masked
    assert len((out / "questions.jsonl").read_text().splitlines()) == 20
    # search results were shared: one cache file per distinct (query, n)
    assert any((out / "shared" / "search-cache").iterdir())
    assert (out / "shared" / "page-cache").is_dir()  # B's PageCache, handed to every run

    runs = collect([out])
    assert len(runs) == 60 and {r.profile for r in runs} == set(profiles)
    shell_runs = [r for r in runs if r.profile == "shell"]
    assert all(r.n_search >= 1 and r.n_select >= 1 and r.n_extract >= 1 for r in shell_runs)
    assert all(r.cache_files >= 1 for r in shell_runs)
    # the same page text for both interfaces: the same question's workspaces are byte-identical in body
    for r in shell_runs:
        fte = Path(r.run_dir.replace("/shell/", "/fte/"))
        shell_ws = {p.name: p.read_text().split("\n\n", 1)[1] for p in (Path(r.run_dir) / "workspace").iterdir()}
        fte_ws = {p.name: p.read_text().split("\n\n", 1)[1] for p in (fte / "workspace").iterdir()}
        for name in set(shell_ws) & set(fte_ws):
            assert shell_ws[name] == fte_ws[name]

    js = judge_runs([out], "match")
    assert js.judged == 60 and js.errors == []
    verdicts = [json.loads((Path(r.run_dir) / "judgement.json").read_text())["match"] for r in runs]
    assert all(v["gold"] for v in verdicts)

    rep = write_report([out], tmp_path / "report")
    for p in [rep.markdown, rep.html, rep.metrics, *rep.plots]:
        assert p.exists() and p.stat().st_size > 0
    assert len(rep.plots) == 5
    html_text = rep.html.read_text()
    assert html_text.count("data:image/png;base64,") == 5 and 'src="http' not in html_text
    # the report's numbers equal the metrics recomputed from the trajectories
    recomputed = {s.profile: s for s in summarize([run_metrics(Path(r.run_dir), profile=r.profile, qid=r.qid)
                                                   for r in runs])}
    reported = {p["profile"]: p for p in json.loads(rep.metrics.read_text())["profiles"]}
    assert set(reported) == set(profiles)
    for name, s in recomputed.items():
        assert reported[name] == json.loads(s.model_dump_json())
        correct = sum(1 for r, v in zip(runs, verdicts) if r.profile == name and v["correct"])
        assert s.accuracy == pytest.approx(correct / 20)
    md = rep.markdown.read_text()
    _head, rows = main_table(list(recomputed.values()))
    for row in rows:
        assert "| " + " | ".join(row) + " |" in md


def delayed_policy() -> Any:
    policy = ResearchPolicy()

    def fn(body: dict[str, Any]) -> Any:
        return as_turn(policy(body)).model_copy(update={"delay_s": 0.15})

    return fn


def bench_cmd(out: Path, hotpotqa_dir: Path, hotpotqa_corpus: Path, base_url: str) -> list[str]:
    return [sys.executable, "-m", "fte_shell", "bench", f"hotpotqa:{hotpotqa_dir}", "--profiles", "shell,fte",
            "--limit", "10", "--out", str(out), "--base-url", base_url, "--model", "scripted", "--api-key", "x",
            "-j", "4", "--corpus-dir", str(hotpotqa_corpus), "--no-progress", "--no-judge"]


def wait_for(cond: Any, proc: subprocess.Popen[bytes], what: str, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert proc.poll() is None, f"the sweep ended early ({proc.returncode}) while waiting for {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def results(out: Path) -> dict[Path, Path]:
    return {p.parent: p for p in out.glob("runs/*/*/r0/result.json")}


def finished(out: Path) -> dict[Path, Path]:
    """The runs with a result (not an infrastructure stop such as ``interrupted``: those are resumed)."""
    return {d: p for d, p in results(out).items() if not is_infra_failure(json.loads(p.read_text())["stop_reason"])}


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Subprocesses a test starts; any still running when it ends (a failed assertion) are stopped with
    SIGTERM (the sweep then removes its containers), then SIGKILL."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def test_interrupt_kill_and_resume(
    tmp_path: Path, docker_ready: None, hotpotqa_dir: Path, hotpotqa_corpus: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    out = tmp_path / "sweep"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with ScriptedServer(policy=delayed_policy()) as srv:
        cmd = bench_cmd(out, hotpotqa_dir, hotpotqa_corpus, srv.base_url)
        # 1. SIGTERM: the sweep stops, removes its containers, discards the runs in flight, says so
        p1 = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        procs.append(p1)
        wait_for(lambda: len(results(out)) >= 2 and our_containers([p1.pid]), p1, "two runs and a live container")
        p1.send_signal(signal.SIGTERM)
        _, err1 = p1.communicate(timeout=60)
        assert p1.returncode == 130, err1.decode()
        assert b"interrupted" in err1
        assert our_containers([p1.pid]) == []
        dirs = {d for d in out.glob("runs/*/*/r0")}
        # the runs in flight are kept (partial, or ended `interrupted`) for the rerun to resume
        assert all((d / "trajectory.jsonl").exists() for d in dirs)
        assert json.loads((out / "sweep.json").read_text())["status"] == "interrupted"
        done_at_term = set(finished(out))
        n1 = len(done_at_term)
        replied_at_term = [d for d in dirs if d not in done_at_term
                           and '"type": "model_call"' in (d / "trajectory.jsonl").read_text()]

        # 2. SIGKILL: nothing can clean up; containers and partial runs stay behind
        p2 = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        procs.append(p2)
        wait_for(lambda: len(results(out)) >= n1 + 3 and our_containers([p2.pid]), p2, "progress and a live container")
        p2.send_signal(signal.SIGKILL)
        p2.wait()
        assert our_containers([p2.pid]), "a SIGKILLed harness leaves its containers (until gc)"
        done_before = {d: (p.stat().st_mtime_ns, json.loads(p.read_text())["run_id"]) for d, p in finished(out).items()}
        assert n1 + 3 <= len(done_before) < 20
        started_before = Counter(k for b in srv.requests if (k := run_key(b)))
        # the runs the kill cut part-way, with the replies they have on disk (each a model call paid once)
        cut = {d: sum(1 for line in (d / "trajectory.jsonl").read_text().splitlines() if '"type": "model_call"' in line)
               for d in out.glob("runs/*/*/r0") if d not in done_before and (d / "trajectory.jsonl").exists()}

        # 3. resume: the same command finishes the sweep
        p3 = subprocess.run(cmd, check=False, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        assert p3.returncode == 0, p3.stderr
        assert f"{len(done_before)} already done" in p3.stdout

    final = results(out)
    assert len(final) == 20  # none lost
    assert all(json.loads(p.read_text())["stop_reason"] == "answer" for p in final.values())
    # no finished run done twice: same file, same run id, and its question+profile started exactly once
    questions = {json.loads(line)["id"]: json.loads(line)["question"]
                 for line in (out / "questions.jsonl").read_text().splitlines()}
    started = Counter(k for b in srv.requests if (k := run_key(b)))
    for d, (mtime, run_id) in done_before.items():
        res = d / "result.json"
        assert res.stat().st_mtime_ns == mtime and json.loads(res.read_text())["run_id"] == run_id
        key = (questions[d.parent.name], d.parent.parent.name)
        assert started[key] == started_before[key]  # not started again after the kill
        if d in done_at_term:
            assert started[key] == 1  # finished in the first invocation: never started again
    # every run has one complete trajectory (partial ones resumed in place, not appended to)
    for d in final:
        types = [json.loads(line)["type"] for line in (d / "trajectory.jsonl").read_text().splitlines()]
        assert types.count("start") == 1 and types[-1] == "end"
    # a run the kill cut after a reply was resumed at its last completed turn (a local corpus is a closed
    # world: resumable without a snapshot): not started again, its recorded replies replayed, not asked again
    # (a run the SIGTERM cut may have a tool result of its removed box on disk: its replay differs, and it is
    # redone from scratch, saying why)
    clean = 0
    for d, replies in cut.items():
        res = json.loads((d / "result.json").read_text())
        key = (questions[d.parent.name], d.parent.parent.name)
        if not replies:
            continue
        assert res["resumed"]["count"] >= 1 or res["resumed"]["mismatch"], (d, res.get("resumed"))
        if res["resumed"]["redone"] == 0:
            clean += 1
            assert started[key] == started_before[key]
            replayed = [line for line in (d / "trajectory.jsonl").read_text().splitlines()
                        if '"replayed": true' in line and '"model_call"' in line]
            assert len(replayed) >= replies - 1  # a reply whose turn was cut is replayed too
    assert clean >= 1 or not any(cut.values()), cut
    resumed = [r for p in final.values() if (r := json.loads(p.read_text()).get("resumed")) and r["count"] >= 1]
    # a run cut before its first reply has nothing to resume (it starts over); one cut after a reply resumes
    if replied_at_term or any(cut.values()):
        assert resumed, "the runs the SIGTERM and the SIGKILL cut after a reply were resumed"
    # no container left behind: the resumed sweep's gc removed the killed harness's ones
    assert our_containers([p1.pid, p2.pid, os.getpid()]) == []
    manifest = json.loads((out / "sweep.json").read_text())
    assert manifest["status"] == "finished" and manifest["stats"]["skipped"] == len(done_before)
