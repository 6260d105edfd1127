"""Grading presets and judge agreement: a loopback grading model (the real openai client against the
scripted server) answering each preset's format, hand-made runs, verdicts parsed (malformed replies are
errors and leave the run unscored), several judges side by side in judgement.json, `judge --compare` with
κ computed by hand, the report's Judges section with Avg@K / Best@K / Pass@K under each judge."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from fte_shell.benchmarks.llmjudge import LLMJudge, judge_model_config
from fte_shell.benchmarks.presets import BROWSECOMP_ZH_PROMPT, SIMPLEQA_PROMPT, parse_simpleqa
from fte_shell.benchmarks.registry import PRESETS, preset
from fte_shell.cli import app
from fte_shell.errors import ConfigError, ModelError
from fte_shell.report.build import write_report
from fte_shell.standins.server import ScriptedServer
from fte_shell.sweep.judge import judge_runs

runner = CliRunner()


def make_sweep(tmp: Path, answers: dict[str, str | None], *, reps: int = 1, kind: str | None = None) -> Path:
    """A sweep of profile ``fte``: question ``qN`` has gold ``gold-N``; ``answers`` gives each run's answer
    (the same in every repetition)."""
    root = tmp / "sweep"
    root.mkdir()
    (root / "sweep.json").write_text(json.dumps({"dataset": {"kind": kind}} if kind else {}))
    qs = [{"id": qid, "question": f"Question {qid}?", "answer": f"gold-{qid[1:]}"} for qid in answers]
    (root / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in qs))
    for qid, ans in answers.items():
        for rep in range(reps):
            d = root / "runs" / "fte" / qid / f"r{rep}"
            d.mkdir(parents=True)
            ev = {"type": "model_call", "t": 1, "turn": 1, "message": {"role": "assistant",
                  "content": f"Done. <answer>{ans}</answer>"}, "usage": {}}
            (d / "trajectory.jsonl").write_text(json.dumps(ev) + "\n")
            (d / "result.json").write_text(json.dumps({"question": f"Question {qid}?", "answer": ans,
                                                       "stop_reason": "answer" if ans else "max_turns",
                                                       "profile": "fte"}))
    return root


def judgement(root: Path, qid: str, rep: int = 0) -> dict[str, Any]:
    return json.loads((root / "runs" / "fte" / qid / f"r{rep}" / "judgement.json").read_text())


def qid_of(body: dict[str, Any]) -> str:
    prompt = body["messages"][0]["content"]
    return next(q for q in ("q1", "q2", "q3", "q4", "q5", "q6") if f"Question {q}?" in prompt)


def grader(url: str, model: str) -> LLMJudge:
    return LLMJudge(judge_model_config(model, base_url=url, api_key="k", max_retries=0))


# --- renamed presets ---------------------------------------------------------------------------------------
def test_a_former_preset_name_still_works_with_a_note_and_its_verdicts_are_reused(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    # presets are named for what they grade: browsecomp (HotpotQA's default too) is now llm-equivalence
    root = make_sweep(tmp_path, {"q1": "Paris", "q2": "Lyon"})
    reply = "extracted_final_answer: x\nreasoning: r\ncorrect: yes\nconfidence: 80"
    with ScriptedServer(policy=lambda body: reply) as srv:
        s = judge_runs([root], "browsecomp", judge=grader(srv.base_url, "g"))
        assert (s.judged, s.judges) == (2, ["llm-equivalence@g"])
        assert ("note: judge preset browsecomp is an old spelling, accepted until fte-shell 0.3.0: use "
                "llm-equivalence") in capfd.readouterr().err
        for qid in ("q1", "q2"):  # as a sweep judged before the rename keeps them
            f = tmp_path / "sweep" / "runs" / "fte" / qid / "r0" / "judgement.json"
            v = {**judgement(root, qid)["llm-equivalence@g"], "preset": "browsecomp"}
            f.write_text(json.dumps({"browsecomp@g": v}))
        asked = len(srv.requests)
        s = judge_runs([root], "llm-equivalence", judge=grader(srv.base_url, "g"))
        assert (s.cached, s.judged, len(srv.requests)) == (2, 0, asked)  # reused, no call
    j = judgement(root, "q1")
    assert set(j) == {"llm-equivalence@g"}  # moved (one verdict: no "primary" entry)
    assert j["llm-equivalence@g"]["preset"] == "llm-equivalence"
    for old, new in (("browsecomp-zh", "llm-equivalence-zh"), ("simpleqa", "llm-three-way"),
                     ("hle", "llm-equivalence-confidence")):
        assert preset(old) is preset(new)


# --- each preset's format, through the real client ------------------------------------------------------
def test_each_model_preset_parses_its_own_format(tmp_path: Path) -> None:
    root = make_sweep(tmp_path, {"q1": "Paris", "q2": "Lyon"})
    replies = {
        "llm-equivalence": {"q1": "extracted_final_answer: Paris\nreasoning: same\ncorrect: yes\nconfidence: 80",
                       "q2": "extracted_final_answer: Lyon\nreasoning: differs\ncorrect: no\nconfidence: 30"},
        # the Chinese grader: full-width colons, 是/否 read as yes/no
        "llm-equivalence-zh": {"q1": "extracted_final_answer：Paris\nreasoning：一致\ncorrect：是\nconfidence：90",
                          "q2": "extracted_final_answer: Lyon\nreasoning: 不一致\ncorrect: no\nconfidence: 100"},
        "llm-three-way": {"q1": "reasoning: matches\ngrade: CORRECT", "q2": "reasoning: no answer given\ngrade: C"},
        "llm-equivalence-confidence": {"q1": "extracted_final_answer: Paris\nreasoning: ok\ncorrect: yes\n"
                                             "confidence: 95",
                "q2": "extracted_final_answer: Lyon\nreasoning: wrong\ncorrect: no\nconfidence: 60"},
    }
    want = {  # (correct, grade, confidence, extracted) of q1 and q2
        "llm-equivalence": [(True, None, 80, "Paris"), (False, None, 30, "Lyon")],
        "llm-equivalence-zh": [(True, None, 90, "Paris"), (False, None, 100, "Lyon")],
        "llm-three-way": [(True, "CORRECT", None, None), (False, "NOT_ATTEMPTED", None, None)],
        "llm-equivalence-confidence": [(True, None, 95, "Paris"), (False, None, 60, "Lyon")],
    }
    name = {"current": ""}
    with ScriptedServer(policy=lambda body: replies[name["current"]][qid_of(body)]) as srv:
        for p in replies:
            name["current"] = p
            before = len(srv.requests)
            s = judge_runs([root], p, judge=grader(srv.base_url, "g"))
            assert (s.judged, s.errors, s.judges) == (2, [], [f"{p}@g"]), p
            sent = srv.requests[before:]
            assert len(sent) == 2 and all(b["temperature"] == 0 and b["model"] == "g" for b in sent)
            for qid, (correct, grade, conf, extracted) in zip(("q1", "q2"), want[p]):
                v = judgement(root, qid)[f"{p}@g"]
                assert (v["correct"], v["grade"], v["confidence"], v["extracted_final_answer"]) == (
                    correct, grade, conf, extracted), (p, qid)
                assert (v["preset"], v["judge_model"], v["method"], v["gold"]) == (p, "g", "llm", f"gold-{qid[1:]}")
                # the call kept with the verdict: the prompt really sent, the parameters, the reply
                prompt = next(b for b in sent if f"Question {qid}?" in b["messages"][0]["content"])["messages"][0]["content"]
                assert v["call"]["prompt"] == prompt and v["raw"] == replies[p][qid]
                assert v["call"]["params"]["temperature"] == 0 and v["call"]["attempts"] == 1
    zh = srv.requests[2]["messages"][0]["content"]
    assert zh.startswith(BROWSECOMP_ZH_PROMPT.split("\n")[0]) and ("gold-1" in zh or "gold-2" in zh)
    assert SIMPLEQA_PROMPT.split("\n")[0] in srv.requests[4]["messages"][0]["content"]
    # the four judges stand side by side; the last one graded is primary
    j = judgement(root, "q1")
    assert sorted(k for k in j if k != "primary") == ["llm-equivalence-confidence@g", "llm-equivalence-zh@g",
                                                      "llm-equivalence@g", "llm-three-way@g"]
    assert j["primary"] == "llm-equivalence-confidence@g"


@pytest.mark.parametrize(("name", "reply", "needle"), [
    ("llm-equivalence", "I think it is right.", "no 'correct: yes|no' line"),
    ("llm-equivalence-zh", "正确", "no 'correct: yes|no' line"),
    ("llm-three-way", "reasoning: fine\nThe answer is correct.", "no 'grade: CORRECT|INCORRECT|NOT_ATTEMPTED' line"),
    ("llm-equivalence-confidence", "extracted_final_answer: x\nreasoning: r\ncorrect: yes",
     "no 'confidence: 0-100' line"),
])
def test_a_malformed_reply_is_an_error_and_the_run_stays_unscored(tmp_path: Path, name: str, reply: str,
                                                                   needle: str) -> None:
    root = make_sweep(tmp_path, {"q1": "Paris"})
    s0 = judge_runs([root], "match")  # another judge's verdict, which must stay as it was
    assert s0.judged == 1
    before = judgement(root, "q1")
    with ScriptedServer(policy=lambda body: reply) as srv:
        s = judge_runs([root], name, judge=grader(srv.base_url, "g"))
    assert (s.judged, s.correct, len(s.errors)) == (0, 0, 1)
    assert f"does not follow the {name} preset ({needle})" in s.errors[0] and "runs/fte/q1/r0" in s.errors[0]
    assert judgement(root, "q1") == before


def test_parsers_directly() -> None:
    assert parse_simpleqa("grade: not attempted").grade == "NOT_ATTEMPTED"
    assert parse_simpleqa("reasoning: a\ngrade: B").grade == "INCORRECT"
    assert parse_simpleqa("grade: INCORRECT\ngrade: CORRECT").correct is True  # the last line counts
    with pytest.raises(ModelError, match="llm-three-way"):
        parse_simpleqa("grade: maybe")
    with pytest.raises(ModelError, match="llm-three-way"):
        parse_simpleqa("CORRECT")  # not on a grade: line


def test_a_run_without_an_answer_is_graded_without_a_call(tmp_path: Path) -> None:
    root = make_sweep(tmp_path, {"q1": None})
    with ScriptedServer(policy=lambda body: "grade: CORRECT") as srv:
        s = judge_runs([root], "llm-three-way", judge=grader(srv.base_url, "g"))
        assert len(srv.requests) == 0
    v = judgement(root, "q1")["llm-three-way@g"]
    assert (s.judged, v["correct"], v["grade"], v["call"]) == (1, False, "NOT_ATTEMPTED", None)


# --- the registry and the defaults ----------------------------------------------------------------------
def test_registry_names_every_preset_and_refuses_an_unknown_one(tmp_path: Path) -> None:
    models = ("llm-equivalence", "llm-equivalence-zh", "llm-three-way", "llm-equivalence-confidence")
    assert {*models, "match", "widesearch"} <= set(PRESETS)
    assert [p for p in models if not preset(p).needs_model] == []
    assert not preset("match").needs_model and preset("llm-three-way").temperature == 0.0
    with pytest.raises(ConfigError, match=r"unknown judge preset 'nope' \(known: .*llm-equivalence.*llm-three-way"):
        preset("nope")
    root = make_sweep(tmp_path, {"q1": "x"})
    with pytest.raises(ConfigError, match="llm-three-way judge preset needs a grading model: pass --judge-model"):
        judge_runs([root], "llm-three-way")
    # the dataset's default (llm-equivalence for a plain sweep) needs a model: without one, match, and a note
    s = judge_runs([root])
    assert s.judges == ["match"] and "llm-equivalence needs a grading model" in s.notes[0]
    assert judgement(root, "q1")["match"]["preset"] == "match"


# --- several judges side by side, and what is reused ----------------------------------------------------
def test_verdicts_of_another_preset_or_model_are_not_reused(tmp_path: Path) -> None:
    root = make_sweep(tmp_path, {"q1": "a", "q2": "b"})
    replies = {"llm-equivalence": "extracted_final_answer: a\nreasoning: r\ncorrect: yes\nconfidence: 50",
               "llm-three-way": "grade: INCORRECT"}
    with ScriptedServer(policy=lambda body: replies["llm-three-way" if "NOT_ATTEMPTED" in
                                                    body["messages"][0]["content"] else "llm-equivalence"]) as srv:
        a, b = grader(srv.base_url, "judge-a"), grader(srv.base_url, "judge-b")
        assert judge_runs([root], "llm-equivalence", judge=a).judged == 2 and len(srv.requests) == 2
        s = judge_runs([root], "llm-three-way", judge=a)  # same model, another preset: graded anew
        assert (s.judged, s.cached, len(srv.requests)) == (2, 0, 4)
        s = judge_runs([root], "llm-equivalence", judge=b)  # same preset, another model: graded anew
        assert (s.judged, s.cached, len(srv.requests)) == (2, 0, 6)
        assert judgement(root, "q1")["primary"] == "llm-equivalence@judge-b"
        s = judge_runs([root], "llm-equivalence", judge=a)  # this judge's own verdicts: reused, primary again
        assert (s.judged, s.cached, s.correct, len(srv.requests)) == (0, 2, 2, 6)
        j = judgement(root, "q1")
        assert j["primary"] == "llm-equivalence@judge-a"
        assert (j["llm-equivalence@judge-a"]["correct"], j["llm-three-way@judge-a"]["correct"],
                j["llm-equivalence@judge-b"]["correct"]) == (True, False, True)
        # a model-free pass (bench's at the end of a sweep) never displaces a model's verdict as primary
        judge_runs([root], "match")
        assert judgement(root, "q1")["primary"] == "llm-equivalence@judge-a"
        # --force grades again
        s = judge_runs([root], "llm-equivalence", judge=a, force=True)
        assert (s.judged, len(srv.requests)) == (2, 8)


# --- judge --compare ------------------------------------------------------------------------------------
def test_compare_prints_accuracy_kappa_and_the_disagreeing_runs(tmp_path: Path) -> None:
    root = make_sweep(tmp_path, {f"q{i}": f"ans-{i}" for i in range(1, 7)})
    says_yes = {"judge-a": {"q1", "q2", "q3", "q4"}, "judge-b": {"q1", "q2", "q3", "q4", "q5"}}

    def policy(body: dict[str, Any]) -> str:
        ok = qid_of(body) in says_yes[body["model"]]
        return f"extracted_final_answer: x\nreasoning: r\ncorrect: {'yes' if ok else 'no'}\nconfidence: 70"

    with ScriptedServer(policy=policy) as srv:
        for m in ("judge-a", "judge-b"):
            r = runner.invoke(app, ["judge", str(root), "--judge-model", m, "--base-url", srv.base_url,
                                    "--api-key", "k", "--judge-preset", "llm-equivalence"])
            assert r.exit_code == 0, r.output
            assert f"llm-equivalence@{m} judge: {len(says_yes[m])}/6 correct (6 judged now" in r.output
        n = len(srv.requests)
        r = runner.invoke(app, ["judge", str(root), "--compare"], env={"COLUMNS": "200"})
        assert len(srv.requests) == n  # --compare alone grades nothing
    assert r.exit_code == 0, r.output
    # by hand: 6 runs, A yes on 4, B yes on 5, agreeing on 5 (q1-q4 yes, q6 no).
    # p_o = 5/6; p_e = 4/6 * 5/6 + 2/6 * 1/6 = 22/36; kappa = (30/36 - 22/36) / (14/36) = 8/14 = 4/7 = 0.571
    lines = r.output.splitlines()
    assert any("llm-equivalence@judge-a" in x and "│ 6 " in x and "66.7%" in x for x in lines), r.output
    assert any("llm-equivalence@judge-b" in x and "83.3%" in x for x in lines), r.output
    assert any("llm-equivalence@judge-a" in x and "llm-equivalence@judge-b" in x and "0.571" in x and "│ 5 " in x
               for x in lines), r.output
    assert "1 run(s) with differing verdicts:" in r.output
    assert f"{root}/runs/fte/q5/r0  llm-equivalence@judge-a=wrong  llm-equivalence@judge-b=correct" in r.output
    assert "q4/r0  llm-equivalence" not in r.output


def test_compare_without_verdicts_and_a_preset_needing_a_model(tmp_path: Path) -> None:
    root = make_sweep(tmp_path, {"q1": "x"})
    r = runner.invoke(app, ["judge", str(root), "--compare"])
    assert r.exit_code == 0 and "no verdicts to compare" in r.output
    r = runner.invoke(app, ["judge", str(root), "--judge-preset", "llm-equivalence-confidence"])
    assert r.exit_code == 2 and "--judge-model" in r.output
    r = runner.invoke(app, ["judge", str(root), "--judge-preset", "nope"])
    assert r.exit_code == 2 and "unknown judge preset 'nope'" in r.output
    # bench grades without a model: a model preset is refused before any run starts
    r = runner.invoke(app, ["bench", str(root / "questions.jsonl"), "--out", str(tmp_path / "o"), "--scripted",
                            "--profiles", "fte", "--no-progress", "--judge-preset", "llm-three-way"])
    assert r.exit_code == 2 and "bench grades without a model; llm-three-way needs one" in r.output
    assert not (tmp_path / "o" / "runs").exists()


# --- the report -----------------------------------------------------------------------------------------
def _verdict(correct: bool, preset_name: str, model: str | None) -> dict[str, Any]:
    return {"method": "llm" if model else "match", "correct": correct, "gold": "g", "answer": "a",
            "preset": preset_name, "judge_model": model}


def test_report_shows_each_judge_with_avg_best_pass_at_k(tmp_path: Path) -> None:
    root = make_sweep(tmp_path, {"q1": "a", "q2": "a"}, reps=2)
    a = {("q1", 0): True, ("q1", 1): False, ("q2", 0): False, ("q2", 1): False}
    b = {("q1", 0): True, ("q1", 1): True, ("q2", 0): False, ("q2", 1): True}
    for (qid, rep), ok in a.items():
        (root / "runs" / "fte" / qid / f"r{rep}" / "judgement.json").write_text(json.dumps({
            "browsecomp@A": _verdict(ok, "browsecomp", "A"), "simpleqa@B": _verdict(b[(qid, rep)], "simpleqa", "B"),
            "primary": "browsecomp@A"}))
    rep = write_report([root], tmp_path / "rep")
    m = json.loads(rep.metrics.read_text())
    j = m["judges"]
    assert j["primary"] == {"fte": {"browsecomp@A": 4}}
    assert [(s["judge"], s["judged"], s["correct"]) for s in j["by_profile"]["fte"]] == [
        ("browsecomp@A", 4, 1), ("simpleqa@B", 4, 3)]
    # kappa by hand: pairs (T,T) (F,T) (F,F) (F,T); p_o = 2/4, p_e = 1/4*3/4 + 3/4*1/4 = 6/16; (8/16-6/16)/(10/16) = 0.2
    pair = j["agreement"]["pairs"][0]
    assert (pair["a"], pair["b"], pair["n"], pair["agree"]) == ("browsecomp@A", "simpleqa@B", 4, 2)
    assert pair["kappa"] == pytest.approx(0.2)
    assert len(j["agreement"]["disagreements"]) == 2
    # Avg@2 / Best@2 / Pass@2 by hand: A r0 1/2, r1 0/2 -> 25%, 50%, 50%; B r0 1/2, r1 2/2 -> 75%, 100%, 100%
    at_k = {x["label"]: (x["k"], x["mean"], x["best_of_k"], x["pass_at_k"]) for x in j["repetitions"]}
    assert at_k == {"fte · browsecomp@A": (2, 0.25, 0.5, 0.5), "fte · simpleqa@B": (2, 0.75, 1.0, 1.0)}
    # the main numbers are the primary judge's: the same Avg@K/Best@K/Pass@K, the same accuracy
    main = m["repetitions"][0]
    assert (main["mean"], main["best_of_k"], main["pass_at_k"]) == at_k["fte · browsecomp@A"][1:]
    assert m["profiles"][0]["accuracy"] == 0.25
    md = rep.markdown.read_text()
    assert "## Judges" in md and "| fte | browsecomp@A (4) | 25.0% (1/4) | 75.0% (3/4) |" in md
    assert "| browsecomp@A | simpleqa@B | 4 | 2 | 0.200 |" in md
    assert "| fte · simpleqa@B | 2 | 75.0% | 100.0% | 100.0% |" in md
    assert "| Profile | K | Accuracy per run | Avg@K ± sd | Best@K | Pass@K |" in md


def test_report_of_verdicts_without_presets_has_no_judges_section(tmp_path: Path) -> None:
    root = make_sweep(tmp_path, {"q1": "a"})
    (root / "runs/fte/q1/r0/judgement.json").write_text(json.dumps({"match": {"correct": True, "f1": 1.0}}))
    rep = write_report([root], tmp_path / "rep")
    assert "judges" not in json.loads(rep.metrics.read_text()) and "## Judges" not in rep.markdown.read_text()


def test_a_plugins_rule_preset_grades_through_the_default_judge(tmp_path: Path) -> None:
    """The seam a benchmark's own rule uses (GAIA's): a Preset with ``rule`` in ``Benchmark.presets``; the
    default judge applies it and keeps its verdicts under its name."""
    from fte_shell.benchmarks.answers import Verdict
    from fte_shell.benchmarks.grading import JudgeRequest, JudgeSummary, judge_answers
    from fte_shell.benchmarks.presets import Preset

    def same_digits(answer: str | None, gold: str) -> Verdict:
        digits = "".join(c for c in answer or "" if c.isdigit())
        return Verdict(method="rule", correct=bool(digits) and digits == "".join(c for c in gold if c.isdigit()),
                       gold=gold, answer=answer)

    root = make_sweep(tmp_path, {"q1": "gold 1", "q2": "gold-22"})
    rule = Preset("digits", "test rule: the digits agree", rule=same_digits)
    assert not rule.needs_model
    s = JudgeSummary()
    judge_answers(JudgeRequest(root=root, sweep=root, preset=rule), s)
    assert (s.judged, s.correct, s.judges) == (2, 1, ["digits"])
    v = judgement(root, "q1")["digits"]
    assert (v["method"], v["preset"], v["correct"], v["judge_model"], v["call"]) == ("rule", "digits", True, None, None)
    assert judgement(root, "q2")["digits"]["correct"] is False


def test_bench_grades_at_the_end_with_a_model_free_preset(tmp_path: Path) -> None:
    qs = tmp_path / "qs.jsonl"
    qs.write_text(json.dumps({"id": "q1", "question": "What is 6 times 7?", "answer": "42"}) + "\n")
    args = ["bench", f"jsonl:{qs}", "--scripted", "--profiles", "fte", "--no-progress", "--search", "none"]
    r = runner.invoke(app, [*args, "--out", str(tmp_path / "a"), "--judge-preset", "match"])
    assert r.exit_code == 0, r.output
    assert "model-free judge: 0/1 correct (match)" in r.output
    v = json.loads((tmp_path / "a/runs/fte/q1/r0/judgement.json").read_text())
    assert list(v) == ["match"] and v["match"]["preset"] == "match"
    # the dataset's default (llm-equivalence) needs a model: bench grades by exact match instead
    r = runner.invoke(app, [*args, "--out", str(tmp_path / "b")])
    assert r.exit_code == 0 and "model-free judge: 0/1 correct (match)" in r.output, r.output
