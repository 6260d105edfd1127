"""``bench --corpus-arm``: shell with and without the sweep's own local corpus at ``/corpus`` as two arms of
one sweep, paired run for run with the other profiles' (the plan, the arm names, the run digests; refused
without a box profile or a local corpus, or with ``[sandbox] corpus`` set for every box); and, on the
BrowseComp-Plus fixture with a real Docker box, the scripted sweep whose corpus arm's shell runs ``rg``
/corpus, recorded in result.json, sweep.json and the report's paired rows. An old sweep (no such arm) plans
and names its runs as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bcplus_fixture import make_bcplus_clone
from typer.testing import CliRunner

from fte_shell.benchmarks.base import Question
from fte_shell.cli import app
from fte_shell.config import RunConfig
from fte_shell.record.events import ToolCallEvent
from fte_shell.record.rundir import arm_name, arm_profile, read_events
from fte_shell.sweep import BenchConfig
from fte_shell.sweep.state import plan, run_digests

runner = CliRunner()
QUESTIONS = [Question(id="q1", question="one?", answer="1"), Question(id="q2", question="two?", answer="2")]


def test_the_corpus_arm_is_named_with_a_suffix_and_parsed_back() -> None:
    assert arm_name("shell", corpus=True) == "shell+corpus"
    assert arm_name("shell", "keep_all", "bm25", True) == "shell@bm25+corpus"
    assert arm_name("shell", "discard_all", "bm25", True) == "shell@bm25+discard_all+corpus"
    assert arm_name("shell", "keep_recent:5", None, True) == "shell@keep_recent-5+corpus"
    assert arm_name("shell", "keep_all", "bm25") == "shell@bm25"  # without the arm: as before
    for name in ("shell+corpus", "shell@bm25+corpus", "shell@bm25+discard_all+corpus", "shell", "fte@bm25"):
        assert arm_profile(name) == name.partition("@")[0].removesuffix("+corpus")


def test_the_plan_adds_the_corpus_arm_to_the_box_profile_only(tmp_path: Path) -> None:
    bench = BenchConfig(dataset="x", out=tmp_path, profiles=["standard", "shell"], corpus_arm=True, runs=2)
    tasks = plan(bench, QUESTIONS)
    assert len(tasks) == 2 * 2 * 3  # reps × questions × (standard, shell, shell+corpus)
    arms = {(t.profile, t.corpus, t.run_dir.parent.parent.name) for t in tasks}
    assert arms == {("standard", False, "standard"), ("shell", False, "shell"), ("shell", True, "shell+corpus")}
    paired = {t.run_dir.parent.parent.name: {(t.question.id, t.rep)} for t in tasks}
    for t in tasks:
        paired[t.run_dir.parent.parent.name].add((t.question.id, t.rep))
    assert len({frozenset(v) for v in paired.values()}) == 1  # every arm on the same questions and reps
    old = plan(BenchConfig(dataset="x", out=tmp_path, profiles=["standard", "shell"], runs=2), QUESTIONS)
    assert [t.run_dir for t in old] == [t.run_dir for t in tasks if not t.corpus]  # an old sweep: unchanged


def test_a_third_party_profile_that_runs_a_box_gets_the_arm_and_the_probe(tmp_path: Path) -> None:
    """Whether a profile runs a box is its class's ``uses_box``: a third-party subclass of the shell profile
    gets a corpus arm and the sandbox probe; a profile that does not say (a subclass of fte) gets neither."""
    from fte_shell.profiles import runs_in_a_box
    from fte_shell.sweep.run import _needed

    box, no_box = "tests.thirdparty_plugins:PlainShell", "tests.thirdparty_plugins:ReadOnlyFte"
    assert runs_in_a_box(box) and not runs_in_a_box(no_box) and not runs_in_a_box("standard")
    bench = BenchConfig(dataset="x", out=tmp_path, profiles=[no_box, box], corpus_arm=True)
    arms = {t.run_dir.parent.parent.name for t in plan(bench, QUESTIONS)}
    assert arms == {no_box, box, f"{box}+corpus"}
    cfg = RunConfig()
    assert "sandbox" in _needed(bench, cfg)
    assert "sandbox" not in _needed(bench.model_copy(update={"profiles": [no_box], "corpus_arm": False}), cfg)


def test_the_corpus_arm_has_its_own_run_digest(tmp_path: Path) -> None:
    from fte_shell.search.corpus import CorpusDoc, build_corpus

    corpus = build_corpus([CorpusDoc(docid="1", title="T", text="zephyrine")], tmp_path / "c")
    cfg = RunConfig.model_validate({"search": {"backend": "local", "corpus": str(corpus)}})
    digests = run_digests(cfg, ["fte", "shell"], None, ["bm25"], corpus_arm=True)
    assert set(digests) == {"fte@bm25", "shell@bm25", "shell@bm25+corpus"}
    assert len(set(digests.values())) == 3
    assert run_digests(cfg, ["fte", "shell"], None, ["bm25"]) == {k: v for k, v in digests.items() if "+" not in k}


@pytest.mark.parametrize(("extra", "message"), [
    (["--profiles", "standard"], "--profiles has none"),
    (["--profiles", "shell", "--sandbox-corpus", "CORPUS"], "puts it in every box"),
])
def test_a_corpus_arm_that_cannot_be_is_one_line(tmp_path: Path, extra: list[str], message: str) -> None:
    fx = make_bcplus_clone(tmp_path / "bc", n_docs=20, n_queries=1)
    extra = [str(tmp_path / "idx") if e == "CORPUS" else e for e in extra]
    r = runner.invoke(app, ["bench", f"browsecomp-plus:{fx.root}", "--corpus-arm", "--out", str(tmp_path / "s"),
                            "--scripted", "--corpus-dir", str(tmp_path / "idx"), "--no-progress", *extra])
    assert r.exit_code != 0 and message in r.output, r.output
    assert "Traceback" not in r.output


@pytest.mark.docker
@pytest.mark.slow
def test_the_corpus_arm_in_a_bcplus_sweep(tmp_path: Path, docker_ready: None) -> None:
    fx = make_bcplus_clone(tmp_path / "bc", n_docs=60, n_queries=2)
    out = tmp_path / "sweep"
    old = ["bench", f"browsecomp-plus:{fx.root}", "--profiles", "standard,fte,shell", "--out", str(out),
           "--scripted", "--corpus-dir", str(tmp_path / "idx"), "--no-progress", "-j", "2"]
    r = runner.invoke(app, old)  # a sweep without the arm ...
    assert r.exit_code == 0 and "6 run(s) finished now (6 answered)" in r.output, r.output
    assert {p.name for p in (out / "runs").iterdir()} == {"standard", "fte", "shell"}
    args = [*old, "--corpus-arm"]
    r = runner.invoke(app, args)  # ... resumed with it: only the corpus arm's runs are new
    assert r.exit_code == 0, r.output
    assert "6 already done" in r.output and "2 run(s) finished now (2 answered)" in r.output
    arms = {"standard", "fte", "shell", "shell+corpus"}
    assert {p.name for p in (out / "runs").iterdir()} == arms
    manifest = json.loads((out / "sweep.json").read_text())
    assert manifest["bench"]["corpus_arm"] is True and set(manifest["run_config_digests"]) == arms
    for p in (out / "runs").glob("*/*/r0/result.json"):
        arm, res = p.parent.parent.parent.name, json.loads(p.read_text())
        assert res["meta"]["arm"] == arm and res["meta"].get("corpus_in_box", False) == (arm == "shell+corpus")
        assert res["config_digest"] == manifest["run_config_digests"][arm]
        if not arm.startswith("shell"):
            continue
        calls = [e for e in read_events(p.parent) if isinstance(e, ToolCallEvent)]
        greps = [e for e in calls if (e.arguments or {}).get("command", "").startswith("rg -l -i -e ")]
        if arm == "shell":
            assert not greps  # no /corpus in this box, and the model is not told of one
            continue
        assert len(greps) == 1 and (greps[0].meta.model_extra or {}).get("exit_code") == 0, greps
        found = [ln for ln in greps[0].observation.splitlines() if ln.startswith("/corpus/")]
        assert found, greps[0].observation  # the corpus's files, in the box

    r = runner.invoke(app, args)  # resume: nothing to do
    assert r.exit_code == 0 and "8 already done" in r.output, r.output
    assert runner.invoke(app, ["judge", str(out)]).exit_code == 0
    r = runner.invoke(app, ["report", str(out), "--out", str(tmp_path / "rep")])
    assert r.exit_code == 0, r.output
    data = json.loads((tmp_path / "rep" / "metrics.json").read_text())
    assert {p["label"] for p in data["profiles"]} == arms
    pairs = {frozenset((p["a"], p["b"])) for p in data["paired"]}
    assert frozenset(("shell", "shell+corpus")) in pairs and all(p["n"] == 2 for p in data["paired"])
