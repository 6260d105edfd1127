"""Judges: parsing the grader's captured verdict, the LLM judge through the real openai client against the
scripted loopback server, caching, and the model-free HotpotQA-style judge."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fte_shell.benchmarks.answers import exact_match, normalize_answer, token_f1
from fte_shell.benchmarks.llmjudge import LLMJudge, judge_model_config
from fte_shell.benchmarks.presets import parse_grader_reply
from fte_shell.errors import ConfigError
from fte_shell.standins.server import ScriptedServer
from fte_shell.sweep.judge import judge_runs

REPLY_YES = """extracted_final_answer: Paris
reasoning: The response names Paris, which is the reference answer.
correct: yes
confidence: 85"""


def test_captured_value_not_group0() -> None:
    # The public reference grader does re.search(r"correct: (yes|no)", text).group(0) == "yes": always False.
    m = re.search(r"correct: (yes|no)", REPLY_YES)
    assert m is not None and m.group(0) == "correct: yes" and m.group(0) != "yes"
    fields = parse_grader_reply(REPLY_YES)
    assert fields == {"extracted_final_answer": "Paris",
                      "reasoning": "The response names Paris, which is the reference answer.",
                      "correct": "yes", "confidence": 85}


def test_parse_variants() -> None:
    assert parse_grader_reply("**correct**: No\nconfidence: 250")["correct"] == "no"
    assert parse_grader_reply("**correct**: No\nconfidence: 250")["confidence"] == 100
    # an in-line mention inside the reasoning does not count; the field line does
    r = parse_grader_reply("reasoning: it is not correct: yes it is wrong\ncorrect: no")
    assert r["correct"] == "no"
    assert parse_grader_reply("I think so.")["correct"] is None


def test_normalization_and_f1() -> None:
    assert normalize_answer("The  Beatles!") == "beatles"
    assert exact_match("an Apple, Inc.", "apple inc")
    assert token_f1("beer and whisky", "beer and whisky") == 1.0
    assert token_f1("beer", "beer and whisky") == pytest.approx(0.5)  # p=1, r=1/3
    assert token_f1("yes", "no") == 0.0 and token_f1("no", "no") == 1.0
    assert token_f1("", "x") == 0.0


def make_sweep(tmp: Path) -> Path:
    root = tmp / "sweep"
    (root).mkdir()
    (root / "sweep.json").write_text("{}")
    qs = [{"id": "q1", "question": "Capital of France?", "answer": "Paris"},
          {"id": "q2", "question": "Two plus two?", "answer": "four"}]
    (root / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in qs))
    for qid, ans in (("q1", "Paris"), ("q2", "5")):
        d = root / "runs" / "fte" / qid / "r0"
        d.mkdir(parents=True)
        ev = {"type": "model_call", "t": 1, "turn": 1, "message": {"role": "assistant",
              "content": f"Done. <answer>{ans}</answer>"}, "usage": {}}
        (d / "trajectory.jsonl").write_text(json.dumps(ev) + "\n")
        q = next(x for x in qs if x["id"] == qid)
        (d / "result.json").write_text(json.dumps({"question": q["question"], "answer": ans,
                                                   "stop_reason": "answer"}))
    # an unfinished run is skipped
    (root / "runs" / "fte" / "q3" / "r0").mkdir(parents=True)
    return root


def test_llm_judge_through_scripted_server_and_cache(tmp_path: Path) -> None:
    root = make_sweep(tmp_path)
    no = "extracted_final_answer: 5\nreasoning: 5 is not four.\ncorrect: no\nconfidence: 100"

    def policy(body: dict) -> str:
        prompt = body["messages"][0]["content"]
        return REPLY_YES if "Capital of France" in prompt else no

    with ScriptedServer(policy=policy) as srv:
        judge = LLMJudge(judge_model_config("grader", base_url=srv.base_url, api_key="k"))
        s = judge_runs([root], "llm-equivalence", judge=judge, concurrency=2)
        assert (s.judged, s.cached, s.skipped, s.correct, s.errors) == (2, 0, 1, 1, [])
        assert len(srv.requests) == 2
        # through ModelClient: the judge's settings are really sent (greedy, a short completion)
        assert all(b["temperature"] == 0 and b["max_tokens"] == 1024 and b["model"] == "grader" for b in srv.requests)
        assert "tools" not in srv.requests[0]
        assert "Paris" in srv.requests[0]["messages"][0]["content"] or "Paris" in srv.requests[1]["messages"][0]["content"]
        j1 = json.loads((root / "runs/fte/q1/r0/judgement.json").read_text())["llm-equivalence@grader"]
        assert (j1["correct"], j1["extracted_final_answer"], j1["confidence"], j1["judge_model"], j1["preset"]) == (
            True, "Paris", 85, "grader", "llm-equivalence")
        # the whole call is kept with the verdict: the prompt sent, the parameters, the reply
        sent = next(b for b in srv.requests if "Capital of France" in b["messages"][0]["content"])
        assert j1["call"]["prompt"] == sent["messages"][0]["content"] and j1["raw"] == REPLY_YES
        assert j1["call"]["params"]["temperature"] == 0 and j1["call"]["params"]["model"] == "grader"
        j2 = json.loads((root / "runs/fte/q2/r0/judgement.json").read_text())["llm-equivalence@grader"]
        assert j2["correct"] is False
        # second pass: everything cached, no request
        s2 = judge_runs([root], "llm-equivalence", judge=judge)
        assert (s2.judged, s2.cached, s2.correct) == (0, 2, 1) and len(srv.requests) == 2


def test_llm_judge_bad_reply_is_recorded_not_fatal(tmp_path: Path) -> None:
    root = make_sweep(tmp_path)
    with ScriptedServer(policy=lambda body: "I cannot grade this.") as srv:
        judge = LLMJudge(judge_model_config("grader", base_url=srv.base_url, max_retries=0))
        s = judge_runs([root], "llm-equivalence", judge=judge)
    assert s.judged == 0 and len(s.errors) == 2 and "correct: yes|no" in s.errors[0]
    assert not (root / "runs/fte/q1/r0/judgement.json").exists()


def test_llm_judge_endpoint_down_is_recorded_with_the_model_clients_error(tmp_path: Path) -> None:
    import socket

    root = make_sweep(tmp_path)
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cfg = judge_model_config("grader", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0)
    assert (cfg.temperature, cfg.max_tokens, cfg.model) == (0.0, 1024, "grader")
    s = judge_runs([root], "llm-equivalence", judge=LLMJudge(cfg))
    assert s.judged == 0 and len(s.errors) == 2
    assert all("judge model call failed: EndpointUnavailable" in e for e in s.errors)


def test_match_judge_and_both_kept(tmp_path: Path) -> None:
    root = make_sweep(tmp_path)
    s = judge_runs([root], "match")
    assert (s.judged, s.correct) == (2, 1)
    data = json.loads((root / "runs/fte/q1/r0/judgement.json").read_text())
    assert data["match"]["em"] == 1.0 and data["match"]["f1"] == 1.0
    with pytest.raises(ConfigError, match="--judge-model"):
        judge_runs([root], "llm-equivalence")
    with pytest.raises(ConfigError, match="nope: no such file or directory"):
        judge_runs([tmp_path / "nope"], "match")
    (tmp_path / "empty").mkdir()  # a typo'd or empty sweep: an error, not "0 judged"
    with pytest.raises(ConfigError, match="empty: neither a run directory nor a sweep directory with runs"):
        judge_runs([tmp_path / "empty"], "match")


# --- judgement.json: several judges side by side, the primary verdict, files written before presets ----
def test_primary_verdict_rules() -> None:
    from fte_shell.record.rundir import made_primary, primary_key, verdicts, with_verdict

    match = {"method": "match", "correct": False, "gold": "g", "answer": "a", "preset": "match"}
    model = {"method": "llm", "correct": True, "gold": "g", "answer": "a", "preset": "simpleqa", "judge_model": "m"}
    one = with_verdict(None, "match", match)
    assert one == {"match": match}  # one verdict: no primary written
    two = with_verdict(one, "simpleqa@m", model)
    assert two["primary"] == "simpleqa@m" and primary_key(two) == "simpleqa@m"
    # a model-free verdict written later does not displace the model's
    assert with_verdict(two, "match", {**match, "correct": True})["primary"] == "simpleqa@m"
    # another model's does; so does asking for the first one again
    other = {**model, "judge_model": "n", "correct": False}
    three = with_verdict(two, "simpleqa@n", other)
    assert three["primary"] == "simpleqa@n" and made_primary(three, "simpleqa@m")["primary"] == "simpleqa@m"
    # a benchmark's own entry (WideSearch's) is not a verdict and is kept as it is
    ws = {"score": 1.0, "judge_model": None}
    assert verdicts({**three, "widesearch": ws}).keys() == {"match", "simpleqa@m", "simpleqa@n"}
    assert with_verdict({"widesearch": ws}, "match", match) == {"widesearch": ws, "match": match}


def test_a_judgement_written_before_presets_reads_and_its_llm_verdict_is_reused(tmp_path: Path) -> None:
    from fte_shell.metrics import run_metrics

    root = make_sweep(tmp_path)
    d = root / "runs/fte/q1/r0"
    old = {"llm": {"method": "llm", "correct": True, "gold": "Paris", "answer": "Paris", "judge_model": "grader",
                   "raw": REPLY_YES, "extracted_final_answer": "Paris", "reasoning": "r", "confidence": 85,
                   "em": None, "f1": None},
           "match": {"method": "match", "correct": False, "gold": "Paris", "answer": "Paris", "em": 0.0, "f1": 0.5}}
    (d / "judgement.json").write_text(json.dumps(old))
    m = run_metrics(d)
    assert (m.correct, m.f1) == (True, 0.5)  # the model's verdict counts, as before
    with ScriptedServer(policy=lambda body: REPLY_YES) as srv:
        judge = LLMJudge(judge_model_config("grader", base_url=srv.base_url, api_key="k"))
        s = judge_runs([d], "llm-equivalence", judge=judge)
        assert (s.judged, s.cached, len(srv.requests)) == (0, 1, 0)  # the old verdict of that model, reused
        new = json.loads((d / "judgement.json").read_text())
        assert "llm" not in new and new["llm-equivalence@grader"] == {**old["llm"], "preset": "llm-equivalence"}
        assert new["match"] == old["match"] and new["primary"] == "llm-equivalence@grader"
        # another model's old verdict is not this one's: graded, the old one kept beside it
        (d / "judgement.json").write_text(json.dumps(old))
        other = LLMJudge(judge_model_config("grader-2", base_url=srv.base_url, api_key="k"))
        s = judge_runs([d], "llm-equivalence", judge=other)
        assert (s.judged, s.cached, len(srv.requests)) == (1, 0, 1)
        new = json.loads((d / "judgement.json").read_text())
        assert new["llm@grader"] == old["llm"] and new["llm-equivalence@grader-2"]["judge_model"] == "grader-2"
        assert new["primary"] == "llm-equivalence@grader-2"


# --- the old spelling: judge --method (renamed --judge-preset) --------------------------------------------
def test_the_old_method_flag_still_grades_with_a_one_line_note(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from fte_shell.cli import app

    root = make_sweep(tmp_path)
    runner = CliRunner()
    with ScriptedServer(policy=lambda body: REPLY_YES) as srv:
        r = runner.invoke(app, ["judge", str(root), "--method", "llm", "--judge-model", "grader",
                                "--base-url", srv.base_url, "--api-key", "k"])
        assert r.exit_code == 0, r.output
        assert len(srv.requests) == 2
    assert r.stderr == ("note: --method llm is an old spelling, accepted until fte-shell 0.3.0: use "
                        "--judge-preset llm-equivalence\n")
    assert "llm-equivalence@grader" in json.loads((root / "runs/fte/q1/r0/judgement.json").read_text())
    r = runner.invoke(app, ["judge", str(root), "--method", "match"])
    assert r.exit_code == 0 and r.stderr.splitlines() == [
        "note: --method match is an old spelling, accepted until fte-shell 0.3.0: use --judge-preset match"]
    assert r.stdout.startswith("match judge: 1/2 correct")
    r = runner.invoke(app, ["judge", str(root), "--method", "auto", "--judge-preset", "match"])  # the new one wins
    assert r.exit_code == 0 and "use no --judge-preset (the default)" in r.stderr and "match judge" in r.stdout
    r = runner.invoke(app, ["judge", str(root), "--method", "llm2"], env={"COLUMNS": "200"})
    assert r.exit_code == 2 and "--method takes auto, llm, match (now: --judge-preset)" in r.stderr
    assert "--method" not in runner.invoke(app, ["judge", "--help"]).stdout  # old spellings are not advertised
