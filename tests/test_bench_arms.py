"""``bench --context``: every (profile, context strategy) arm on the same questions through the real harness
(structured profiles, the scripted loopback model, the HotpotQA local corpus; no Docker): a run directory
per arm, its strategy in each run's configuration, the per-arm digests of sweep.json, resume (and adding an
arm on resume), a changed ``[agent.context]`` setting refused, and the report's rows per arm. The discard_all arm's runs record real edits (the loop's context strategies). A sweep
without ``--context`` keeps the layout and the digests of every sweep before the axis."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from fte_shell.cli import app
from fte_shell.digest import canonical_config, digest_of
from fte_shell.record.events import ContextEditEvent, StartEvent
from fte_shell.record.rundir import read_events
from fte_shell.sweep.state import sweep_canonical

runner = CliRunner()
ARMS = ["fte", "fte@keep_recent-5", "fte@discard_all", "snippet-only", "snippet-only@keep_recent-5",
        "snippet-only@discard_all"]




def bench(out: Path, hotpotqa_dir: Path, hotpotqa_corpus: Path, *extra: str) -> list[str]:
    return ["bench", f"hotpotqa:{hotpotqa_dir}", "--profiles", "fte,snippet-only", "--limit", "2", "--out", str(out),
            "--scripted", "--corpus-dir", str(hotpotqa_corpus), "--no-progress", "-j", "2", *extra]


def results(out: Path) -> dict[Path, dict]:
    return {p.parent: json.loads(p.read_text()) for p in sorted((out / "runs").glob("*/*/r*/result.json"))}


def test_three_arm_sweep_resume_and_report(tmp_path: Path, hotpotqa_dir: Path, hotpotqa_corpus: Path) -> None:
    out = tmp_path / "sweep"
    cfg = tmp_path / "ctx.toml"
    cfg.write_text("[agent.context]\ntrigger_tokens = 1500\n")  # the scripted runs pass it by their third turn
    args = [*bench(out, hotpotqa_dir, hotpotqa_corpus, "--context", "keep_all,keep_recent:5,discard_all"), "-c", str(cfg)]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    assert "12 run(s) finished now" in r.output
    assert sorted(p.name for p in (out / "runs").iterdir()) == sorted(ARMS)
    manifest = json.loads((out / "sweep.json").read_text())
    assert manifest["contexts"] == ["keep_all", "keep_recent:5", "discard_all"]
    assert list(manifest["run_config_digests"]) == ["fte", "snippet-only", "fte@keep_recent-5",
                                                    "snippet-only@keep_recent-5", "fte@discard_all",
                                                    "snippet-only@discard_all"]
    res = results(out)
    assert len(res) == 12
    for run_dir, rec in res.items():
        arm = run_dir.parent.parent.name
        assert rec["config_digest"] == manifest["run_config_digests"][arm]
        start = next(e for e in read_events(run_dir) if isinstance(e, StartEvent))
        strategy = start.config["agent"]["context"]["strategy"]
        assert strategy == {"fte": "keep_all", "keep_recent-5": "keep_recent", "discard_all": "discard_all"}[
            arm.partition("@")[2] or "fte"]
        assert rec["profile"] == arm.partition("@")[0]
        edits = [e for e in read_events(run_dir) if isinstance(e, ContextEditEvent) and e.cleared]
        if arm == "fte@discard_all":  # the loop dropped earlier calls once the prompt passed the trigger
            assert edits and all(e.strategy == "discard_all" for e in edits)
        if strategy == "keep_all":
            assert not edits
    assert len(set(manifest["run_config_digests"].values())) == 6

    r = runner.invoke(app, args)  # resume: nothing to do
    assert r.exit_code == 0 and "12 already done" in r.output and "0 run(s) finished now" in r.output
    # an arm added on resume runs only its own runs
    r = runner.invoke(app, [*bench(out, hotpotqa_dir, hotpotqa_corpus, "--context",
                                   "keep_all,keep_recent:5,discard_all,discard_fraction:0.5"), "-c", str(cfg)])
    assert r.exit_code == 0 and "4 run(s) finished now" in r.output and "12 already done" in r.output
    assert (out / "runs" / "fte@discard_fraction-0.5").is_dir()
    # a changed [agent.context] setting the arms share is refused, naming the arm
    cfg.write_text("[agent.context]\ntrigger_tokens = 1600\n")
    r = runner.invoke(app, [*bench(out, hotpotqa_dir, hotpotqa_corpus, "--context", "keep_all,discard_all"), "-c", str(cfg)])
    assert r.exit_code == 2 and "fte@discard_all" in r.output and "--allow-config-change" in r.output

    r = runner.invoke(app, ["report", str(out), "--out", str(tmp_path / "rep")])
    assert r.exit_code == 0, r.output
    assert "Context arms" in r.output
    md = (tmp_path / "rep" / "report.md").read_text()
    rows = [line.split(" | ")[0].lstrip("| ") for line in md.split("## Context arms")[1].split("\n\n")[1].splitlines()[2:]]
    assert rows == ["fte · keep_all", "fte · keep_recent:5", "fte · discard_all", "fte · discard_fraction:0.5",
                    "snippet-only · keep_all", "snippet-only · keep_recent:5", "snippet-only · discard_all",
                    "snippet-only · discard_fraction:0.5"]
    metrics = json.loads((tmp_path / "rep" / "metrics.json").read_text())
    arms = {a["label"]: a for a in metrics["arms"]}
    rows_by_label = {p["label"]: p for p in metrics["profiles"]}  # a row's stop counts: one home, the row's own
    assert arms["fte · discard_all"]["results"] == 2 and rows_by_label["fte · discard_all"]["stops"] == {"answer": 2}
    # the per-arm numbers are the runs' own: edited share and edits from the recorded context_edit events
    for label, a in arms.items():
        runs = [r for r in metrics["runs"] if f"{r['profile']} · {r['context']}" == label]
        assert a["edited"] == sum(1 for r in runs if r["edits"]["edits"]) / len(runs)
    assert arms["fte · discard_all"]["edited"] == 1.0 and arms["fte · keep_all"]["edited"] == 0.0
    # the paired tests cover every pair of arms (8 rows: 28 pairs, each on the 2 judged questions)
    assert len(metrics["paired"]) == 28 and {p["n"] for p in metrics["paired"]} == {2}
    assert {("fte · keep_all", "fte · discard_all")} <= {(p["a"], p["b"]) for p in metrics["paired"]}


def test_without_context_the_layout_and_digests_are_unchanged(tmp_path: Path, hotpotqa_dir: Path,
                                                                hotpotqa_corpus: Path) -> None:
    out = tmp_path / "sweep"
    r = runner.invoke(app, bench(out, hotpotqa_dir, hotpotqa_corpus))
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in (out / "runs").iterdir()) == ["fte", "snippet-only"]
    manifest = json.loads((out / "sweep.json").read_text())
    assert manifest["contexts"] == ["keep_all"]
    # the digests as every sweep before the context axis computed them: the canonical config, the profile set
    for p, d in manifest["run_config_digests"].items():
        c = canonical_config(manifest["config"])
        c["agent"]["profile"] = p
        assert digest_of(c) == d
    assert manifest["config_canonical"] == sweep_canonical(manifest["config"])
    assert "context" not in manifest["config_canonical"]["agent"]
    r = runner.invoke(app, bench(out, hotpotqa_dir, hotpotqa_corpus, "--context", "keep_all"))
    assert r.exit_code == 0 and "4 already done" in r.output


def test_bad_context_spec_is_one_line(tmp_path: Path, hotpotqa_dir: Path, hotpotqa_corpus: Path) -> None:
    r = runner.invoke(app, bench(tmp_path / "s", hotpotqa_dir, hotpotqa_corpus, "--context", "keep_all,keep_recent:x"))
    assert r.exit_code == 2 and "keep_recent takes a count" in r.output
    r = runner.invoke(app, bench(tmp_path / "s", hotpotqa_dir, hotpotqa_corpus, "--context", "discard_all,discard_all"))
    assert r.exit_code == 2 and "discard_all more than once" in r.output
