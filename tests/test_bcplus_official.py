"""BrowseComp-Plus's official figures (fte_shell/benchmarks/browsecomp_plus/official.py) against values
computed by hand from the definitions of the benchmark's scripts_evaluation/evaluate_with_openai.py —
including where that script is odd (first-match parsing, every qrels line counted, the calibration's last
bin left out) — and the run files' fields as each profile's trajectory gives them (runfile.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_paper_metrics import mk_run

from fte_shell.benchmarks.browsecomp_plus.official import (
    OfficialRun,
    calibration_error,
    cited_docids,
    evaluate,
    from_run_file,
    parse_grader_reply,
    read_raw_qrels,
)
from fte_shell.benchmarks.browsecomp_plus.runfile import (
    CorpusDocids,
    retrieved_docids,
    run_file,
    tool_call_counts,
)
from fte_shell.errors import ConfigError
from fte_shell.record.rundir import read_events


def test_grader_reply_is_read_as_the_script_reads_it() -> None:
    bold = parse_grader_reply("**extracted_final_answer:** Paris\n**reasoning:** same\n**correct:** yes\n"
                              "**confidence:** 95%")
    assert (bold.correct, bold.confidence, bold.extracted_final_answer) == (True, 95.0, "Paris")
    assert parse_grader_reply("**correct**: no\n**confidence**: 40").correct is False
    # the first match wins, anywhere in the reply: "incorrect: no" reads as "correct: no"
    assert parse_grader_reply("The answer is incorrect: no match.\ncorrect: yes").correct is False
    assert parse_grader_reply("correct: no\ncorrect: yes").correct is False
    assert parse_grader_reply("correct: yes\nconfidence: 150").confidence == 100.0  # capped
    assert parse_grader_reply("correct: yes\nconfidence: 72.5").confidence == 72.5  # decimals kept
    assert parse_grader_reply("correct: yes").confidence is None
    for bad in ("", None, "correct: maybe\nconfidence: 80"):
        assert parse_grader_reply(bad).parse_error


def test_citations_and_raw_qrels(tmp_path: Path) -> None:
    # every run of digits in a bracket pair that holds no bracket: [12, 40] cites two, a year counts too,
    # the full-width brackets count, [a[3]] cites 3, [x] nothing
    assert cited_docids("see [12, 40] and 【7】, in [1990]; [a[3]] and [x]") == ["12", "1990", "3", "40", "7"]
    assert cited_docids("") == [] and cited_docids(None) == []
    q = tmp_path / "qrels.txt"
    q.write_text("1 Q0 11 1\n1 Q0 12 1\n1 Q0 13 0\n\n2 Q0 21 1\n2 Q0 21 1\n")
    # relevance is not read (13 counts) and a repeated line counts twice
    assert read_raw_qrels(q) == {"1": ["11", "12", "13"], "2": ["21", "21"]}
    q.write_text("1 Q0 11\n")
    with pytest.raises(ConfigError, match="qrels.txt:1: a qrels line has 4 fields"):
        read_raw_qrels(q)


def test_calibration_error_by_hand() -> None:
    # 250 confidences: bins [0, 100) and [100, 250); only the first is added (the script's loop stops before
    # the last bin). First bin: confidence 0.10, 30 of 100 correct: |0.10 - 0.30| = 0.2, weight 100/250:
    # 100 * sqrt(0.4 * 0.04) = 12.6491…
    conf = [10.0] * 100 + [90.0] * 150
    ok = [i < 30 for i in range(100)] + [True] * 150
    assert calibration_error(conf, ok) == pytest.approx(100 * (0.4 * 0.04) ** 0.5)
    assert calibration_error(conf, ok[:100] + [False] * 150) == pytest.approx(12.649110640673518)  # last bin ignored
    # 300: bins of 10 (30 correct: 0.2), 50 (50 correct: 0), 95 (ignored): 100 * sqrt(1/3 * 0.04) = 11.547…
    conf3 = [10.0] * 100 + [50.0] * 100 + [95.0] * 100
    ok3 = [i < 30 for i in range(100)] + [i < 50 for i in range(100)] + [False] * 100
    assert calibration_error(conf3, ok3) == pytest.approx(11.547005383792516)
    # fewer than 200 points leave one bin, never added; fewer than 100: the script reports 0
    assert calibration_error([10.0] * 150, [True] * 150) == 0.0
    assert calibration_error([10.0] * 99, [True] * 99) == 0.0


def test_evaluate_by_hand(tmp_path: Path) -> None:
    (tmp_path / "q").write_text("1 Q0 11 1\n1 Q0 12 1\n1 Q0 13 0\n2 Q0 21 1\n2 Q0 21 1\n")
    qrels = read_raw_qrels(tmp_path / "q")
    runs = [
        OfficialRun("1", True, "Explanation: [11] and [14, 12].\nExact Answer: X\nConfidence: 80%", ["11", "12", "99"],
                    {"search": 3, "get_document": 1}, "extracted_final_answer: X\nreasoning: ok\ncorrect: yes\n"
                    "confidence: 80"),
        OfficialRun("2", True, "Exact Answer: Y", ["21"], {"search": 1}, "**correct:** no\n**confidence:** 40"),
        OfficialRun("3", False, "", ["31"], {"search": 5}),  # not completed: never graded, still counted
        OfficialRun("1", True, "Exact Answer: Z [13]", [], {}, "no verdict here"),  # an unreadable grader reply
    ]
    f = evaluate(runs, qrels)
    assert (f.runs, f.completed, f.unjudged, f.correct, f.parse_errors) == (4, 3, 0, 1, 1)
    assert f.accuracy == 0.25  # 1 of 4: the unanswered and the unreadable count, not correct
    # recall per run: 2/3 ({11, 12} of 3 lines), 1/2 ({21} of 2 lines), query 3 has none (left out), 0/3
    assert f.recall == pytest.approx((2 / 3 + 1 / 2 + 0) / 3) and f.recall_runs == 3 and f.no_qrels == ["3"]
    assert f.tool_calls == {"search": 9 / 4, "get_document": 1 / 4}
    assert (f.confidences, f.calibration_error) == (2, 0.0)  # A and B; under 100: 0
    # citations: A cites {11, 12, 14} (2 relevant: P 2/3, R 2/3), B none, D {13} (P 1, R 1/3)
    assert f.with_citations == 2 and f.citations_per_response == 2.0
    assert f.citation_precision == pytest.approx((2 / 3 + 1) / 2)
    assert f.citation_recall == pytest.approx((2 / 3 + 1 / 3) / 2)
    assert [p["correct"] for p in f.per_query] == [True, False, False, False]
    # a completed run not yet graded: no accuracy until it is
    pending = evaluate([*runs[:2], OfficialRun("2", True, "Exact Answer: Y", [], {})], qrels)
    assert pending.unjudged == 1 and pending.accuracy is None


def _run_file_dir(tmp: Path, name: str, calls: list, *, schema: int = 1, answer: str | None = "x") -> Path:
    d = mk_run(tmp / name, name, calls)
    lines = [json.loads(x) for x in (d / "trajectory.jsonl").read_text().splitlines()]
    lines[0]["schema_version"] = schema
    final = {"type": "model_call", "t": 99, "turn": 99, "message": {"role": "assistant", "content":
             f"Explanation: it is [10007].\nExact Answer: {answer}\nConfidence: 90%"}, "usage": {
             "prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15,
             "prompt_tokens_details": {"cached_tokens": 4}}}
    (d / "trajectory.jsonl").write_text("".join(json.dumps(e) + "\n" for e in [*lines, final]))
    res = json.loads((d / "result.json").read_text())
    res.update(answer=answer, stop_reason="answer" if answer else "max_turns",
               usage={"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15})
    (d / "result.json").write_text(json.dumps(res))
    return d


def test_retrieved_docids_and_tool_counts_per_profile(tmp_path: Path) -> None:
    urls = {"10007": "https://fixture.example/10007", "10014": "https://fixture.example/10014"}
    resolve = CorpusDocids(None, urls)
    # fte: the search facts (urls, mapped to docids) and the fetch facts (docids)
    fte = _run_file_dir(tmp_path, "fte", [
        ("search", {"query": "q"}, "…", False, {"searches": [{"query": "q", "urls": [urls["10014"], "10021"]}]}),
        ("fetch", {"url": "10007"}, "…", False, {"fetches": [{"url": "10007", "ok": True, "path": "/work/a.txt",
                                                              "source": "10007", "new": True}]}),
        ("grep", {"pattern": "river"}, "/work/a.txt:3: river", False, {})])
    ev = read_events(fte)
    assert retrieved_docids(ev, resolve) == ["10014", "10021", "10007"]
    assert tool_call_counts(ev) == {"search": 1, "fetch": 1, "grep": 1}
    # shell: the in-box search and fetch (facts of the bash call) and a grep over the mounted corpus
    sh = _run_file_dir(tmp_path, "shell", [
        ("bash", {"command": "search 'river town'"}, "…", False,
         {"searches": [{"query": "river town", "urls": ["10028"]}], "fetches": []}),
        ("bash", {"command": "rg -l Quor /corpus"}, "/corpus/10/10035.txt\n/corpus/10/10042.txt\n", False,
         {"searches": [], "fetches": []})])
    ev = read_events(sh)
    assert retrieved_docids(ev, resolve) == ["10028", "10035", "10042"]
    counts = tool_call_counts(ev)
    assert counts["bash"] == 2 and counts["search"] == 1  # the search command counts as a search
    # a search tool that recorded no facts (the standard profile's JSON result list): its docid fields
    std = _run_file_dir(tmp_path, "standard", [
        ("search", {"query": "q"}, json.dumps([{"docid": "10049", "score": 3.2, "snippet": "…"}]), False, {}),
        ("get_document", {"docid": "10007"}, "{…}", False, {"source": "10007"})])
    assert retrieved_docids(read_events(std), resolve) == ["10049", "10007"]
    # open-find: the page a call opened (meta.source), a URL mapped to its docid
    of = _run_file_dir(tmp_path, "open-find", [("open", {"url": urls["10007"]}, "Open page", False,
                                                {"source": urls["10007"]})])
    assert retrieved_docids(read_events(of), resolve) == ["10007"]


def test_run_file_fields(tmp_path: Path) -> None:
    d = _run_file_dir(tmp_path, "fte", [("search", {"query": "q"}, "3 results", False,
                                         {"searches": [{"query": "q", "urls": ["10007"]}]})])
    f = run_file(d, "769", CorpusDocids(None), arm="fte", rep=0)
    assert f is not None and f["query_id"] == "769" and f["status"] == "completed"
    assert f["retrieved_docids"] == ["10007"] and f["tool_call_counts"] == {"search": 1}
    assert f["result"][0] == {"type": "tool_call", "tool_name": "search", "arguments": '{"query": "q"}',
                              "output": "3 results"}
    assert f["result"][-1]["type"] == "output_text" and f["result"][-1]["output"].startswith("Explanation:")
    assert f["usage"] == {"input_tokens": 10, "input_tokens_cached": 4, "output_tokens": 5,
                          "included_reasoning_tokens": 0, "total_tokens": 15}
    assert f["metadata"]["model"] == "m" and f["metadata"]["arm"] == "fte"
    run = from_run_file(f, "correct: yes")
    assert run.completed and run.response == f["result"][-1]["output"] and run.retrieved_docids == ["10007"]
    # a run without a parsable answer: not completed (the evaluation counts it, ungraded, as not correct)
    un = run_file(_run_file_dir(tmp_path, "un", [], answer=None), "770", CorpusDocids(None))
    assert un is not None and un["status"] == "max_turns" and not from_run_file(un, None).completed
    # an infrastructure failure is no run file
    inf = _run_file_dir(tmp_path, "inf", [])
    res = json.loads((inf / "result.json").read_text())
    (inf / "result.json").write_text(json.dumps({**res, "stop_reason": "model_error"}))
    assert run_file(inf, "771", CorpusDocids(None)) is None
