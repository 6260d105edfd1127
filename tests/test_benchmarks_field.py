"""The field's benchmarks (GAIA, xbench-DeepSearch, BrowseComp-ZH, HLE, SimpleQA, FRAMES, WebWalkerQA): files
made in each publisher's layout (encrypted the reference way where the benchmark is), answered by a
loopback model, graded end to end through ``bench`` → ``judge`` → ``report``; every expected number is
computed by hand in the comments."""

from __future__ import annotations

import base64
import csv
import hashlib
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from fte_shell.benchmarks.base import Question, question_id, require_fields
from fte_shell.benchmarks.cipher import canary_key, derive_key, encrypt
from fte_shell.benchmarks.gaia import question_scorer
from fte_shell.benchmarks.registry import load_dataset
from fte_shell.cli import app
from fte_shell.config import BenchmarkOptions
from fte_shell.errors import ConfigError
from fte_shell.metrics.scores import calibration_error, grade_summary
from fte_shell.record.rundir import find_runs, read_judgement, write_judgement
from fte_shell.standins.server import ScriptedServer

runner = CliRunner()


# --- helpers -------------------------------------------------------------------------------------------
def answering(answers: dict[str, str]) -> Callable[[dict[str, Any]], str]:
    """A loopback agent model: answers at once with the reply of the first key found in the question."""

    def policy(body: dict[str, Any]) -> str:
        question = next(m["content"] for m in body["messages"] if m["role"] == "user")
        return next(reply for key, reply in answers.items() if key in question)

    return policy


GRADE = {"yes": "CORRECT", "no": "INCORRECT", "na": "NOT_ATTEMPTED"}


def grading(replies: dict[str, tuple[str, int]]) -> Callable[[dict[str, Any]], str]:
    """A loopback grader: ``(yes|no|na, confidence)`` by the first key found in the grading prompt (the
    keys are the agents' answers, found nowhere else in it); the reply carries the four-field lines and a
    three-way ``grade`` line (``na``: not attempted), so any grader prompt family can read it."""

    def policy(body: dict[str, Any]) -> str:
        prompt = body["messages"][-1]["content"]
        verdict, conf = next(v for k, v in replies.items() if k in prompt)
        return (f"extracted_final_answer: x\nreasoning: r\ncorrect: {'yes' if verdict == 'yes' else 'no'}\n"
                f"confidence: {conf}\ngrade: {GRADE[verdict]}")

    return policy


def bench(spec: str, out: Path, srv: ScriptedServer, *extra: str) -> str:
    r = runner.invoke(app, ["bench", spec, "--out", str(out), "--profiles", "fte", "--search", "none",
                            "--base-url", srv.base_url, "--model", "m", "--api-key", "k", "--no-progress",
                            "--no-judge", "-j", "2", *extra])
    assert r.exit_code == 0, r.output
    return r.output


def judge_llm(out: Path, replies: dict[str, tuple[str, int]]) -> None:
    with ScriptedServer(policy=grading(replies)) as g:
        r = runner.invoke(app, ["judge", str(out), "--judge-model", "g", "--base-url", g.base_url, "--api-key", "k"])
        assert r.exit_code == 0, r.output


def report(out: Path, rep: Path) -> tuple[dict[str, Any], str]:
    r = runner.invoke(app, ["report", str(out), "--out", str(rep)])
    assert r.exit_code == 0, r.output
    return json.loads((rep / "metrics.json").read_text()), (rep / "report.md").read_text()


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def questions(spec: str, **kw: Any) -> list[Question]:
    return load_dataset(spec, **kw).questions


# --- the metrics, by hand --------------------------------------------------------------------------------
def test_calibration_error_by_hand() -> None:
    # beta 2 over 5 pairs (given unsorted): sorted confidences 0.1 0.4 | 0.5 0.9 1.0 (the last bin takes the rest)
    # bin 1: mean conf 0.25, accuracy 1/2 -> 2/5 * 0.25^2 = 0.025
    # bin 2: mean conf 0.8, accuracy 2/3 -> 3/5 * (0.8 - 2/3)^2 = 3/5 * 0.017777… = 0.0106666…
    # RMS = sqrt(0.0356666…) = 0.188856…
    got = calibration_error([0.9, 0.1, 1.0, 0.4, 0.5], [True, False, True, True, False], beta=2)
    assert got == pytest.approx(math.sqrt(0.025 + 0.6 * (0.8 - 2 / 3) ** 2))
    assert got == pytest.approx(0.188856, abs=1e-6)
    # fewer pairs than a bin: one bin; a perfectly calibrated set is 0
    assert calibration_error([0.5, 0.5], [True, False]) == 0.0
    assert calibration_error([1.0, 0.0], [True, False], beta=1) == 0.0
    assert calibration_error([], []) is None


def test_simpleqa_summary_by_hand() -> None:
    # 3 correct, 1 incorrect, 1 not attempted of 5: correct 0.6, given attempted 0.6 / 0.8 = 0.75,
    # F = 2 * 0.6 * 0.75 / (0.6 + 0.75) = 0.9 / 1.35 = 2/3
    s = grade_summary(["CORRECT", "CORRECT", "INCORRECT", "NOT_ATTEMPTED", "CORRECT"])
    assert s == {"n": 5, "correct": 0.6, "incorrect": 0.2, "not_attempted": 0.2,
                 "correct_given_attempted": pytest.approx(0.75), "f_score": pytest.approx(2 / 3)}
    assert grade_summary(["NOT_ATTEMPTED"])["f_score"] == 0.0 and grade_summary([])["correct"] is None
    with pytest.raises(ValueError, match="unknown grade"):
        grade_summary(["YES"])


@pytest.mark.parametrize(("answer", "gold", "ok"), [
    ("$1,234.5", "1234.5", True),          # a number: $ , % removed, compared as a float
    ("12%", "12", True),
    ("17 km", "17", False),                 # not a number once normalized -> never equal
    ("Apple,3.0, banana", "apple, 3, Banana", True),  # a list: element by element, numbers as numbers
    ("a", "a; b", False),                   # lists of different lengths
    ("Mr A, B", "Mr. A, B", False),         # list elements keep their punctuation
    ("st petersburg", "St. Petersburg", True),  # a string: white space and punctuation removed, any case
    ("Saint Petersburg", "St. Petersburg", False),
    (None, "None", True),                   # no answer compares as the text None
])
def test_gaia_rule(answer: str | None, gold: str, ok: bool) -> None:
    assert question_scorer(answer, gold) is ok


# --- loaders: the published layouts and malformed files -----------------------------------------------
def gaia_dir(root: Path) -> Path:
    root.mkdir(parents=True)
    rows = [
        ("t1", "Q-number", 1, "1234.5", ""), ("t2", "Q-unit", 1, "17", ""), ("t5", "Q-string", 1, "St. Petersburg", ""),
        ("t3", "Q-list", 2, "apple, 3, Banana", ""), ("t4", "Q-short", 2, "a; b", ""),
        ("t7", "Q-punct", 3, "Mr. A, B", ""), ("t6", "Q-file", 3, "x", "t6.xlsx"),
    ]
    write_jsonl(root / "metadata.jsonl", [{"task_id": t, "Question": q, "Level": lv, "Final answer": a, "file_name": f,
                                           "Annotator Metadata": {"Steps": "…"}} for t, q, lv, a, f in rows])
    return root


def test_required_fields_named_in_order_with_where() -> None:
    """The one check every loader makes: a header names ``columns:``, a row's object only the names."""
    require_fields(["a", "b"], ("b", "a"), "f.csv:1", "a thing")  # nothing missing: no error
    with pytest.raises(ConfigError, match=r"^f.csv:1: not a thing \(missing columns: c, 'd e'\)$"):
        require_fields(["a"], ("c", "a", "d e"), "f.csv:1", "a thing")
    with pytest.raises(ConfigError, match=r"^f.jsonl:3: not a row \(missing x\)$"):
        require_fields({"y": 1}, ("y", "x"), "f.jsonl:3", "a row")


def test_gaia_loader(tmp_path: Path) -> None:
    root = gaia_dir(tmp_path / "validation")
    said: list[str] = []
    ds = load_dataset(f"gaia:{root}", log=said.append)
    assert [q.id for q in ds.questions] == ["t1", "t2", "t5", "t3", "t4", "t7"]
    assert said == ["GAIA: 6 of 7 task(s) kept; 1 with an attached file dropped (--no-gaia-text-only keeps them)"]
    assert ds.questions[3].meta == {"level": 2} and ds.questions[3].answer == "apple, 3, Banana"
    assert ds.questions[0].question.startswith("Q-number\n\nGive as your final answer")
    every = questions(str(root), options=BenchmarkOptions(gaia_text_only=False))  # a bare dir with metadata.jsonl
    assert len(every) == 7 and every[-1].meta == {"level": 3, "file_name": "t6.xlsx"}
    (root / "metadata.jsonl").write_text('{"task_id": "a", "Question": "q", "Level": 1, "file_name": ""}\n')
    with pytest.raises(ConfigError, match=r"metadata.jsonl:1: not a GAIA task \(missing 'Final answer'\)"):
        load_dataset(f"gaia:{root}")
    with pytest.raises(ConfigError, match="metadata.jsonl not found"):
        load_dataset(f"gaia:{tmp_path}")


def xor_cyclic(text: str, canary: str) -> str:
    """xbench's encryption written out independently: each byte XOR the canary's byte at i mod len."""
    key = canary.encode()
    return base64.b64encode(bytes(b ^ key[i % len(key)] for i, b in enumerate(text.encode()))).decode()


def test_xbench_loader(tmp_path: Path) -> None:
    assert canary_key("abc", 7) == b"abcabca" and derive_key("abc", 40) != canary_key("abc", 40)
    p = tmp_path / "DeepSearch-2505.csv"
    rows = [("1", "谁写了《红楼梦》？", "曹雪芹", "deep", "xbench-canary-1"), ("2", "二加二", "四", "deep", "another canary")]
    with p.open("w", newline="", encoding="utf-8-sig") as f:  # UTF-8 with a byte-order mark, as published
        w = csv.writer(f)
        w.writerow(["id", "prompt", "type", "answer", "canary"])
        for rid, q, a, t, c in rows:
            w.writerow([rid, xor_cyclic(q, c), t, xor_cyclic(a, c), c])
    assert p.read_bytes().startswith(b"\xef\xbb\xbf")
    qs = questions(f"xbench:{p}")
    assert [(q.id, q.question, q.answer, q.meta) for q in qs] == [
        ("1", "谁写了《红楼梦》？", "曹雪芹", {"type": "deep"}), ("2", "二加二", "四", {"type": "deep"})]
    p.write_text("id,prompt,answer\n1,x,y\n", encoding="utf-8-sig")
    with pytest.raises(ConfigError, match=r"DeepSearch-2505.csv:1: not an xbench-DeepSearch CSV \(missing columns: canary\)"):
        load_dataset(f"xbench:{p}")
    p.write_text("prompt,answer,canary\n" + xor_cyclic("q", "k") + ",!!!not base64,k\n", encoding="utf-8-sig")
    with pytest.raises(ConfigError, match=r"DeepSearch-2505.csv:2: cannot decrypt row"):
        load_dataset(f"xbench:{p}")


def write_xlsx(path: Path, head: list[str], rows: list[list[str]]) -> Path:
    import openpyxl

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.append(head)
    for r in rows:
        ws.append(r)
    wb.save(path)
    return path


def test_browsecomp_zh_loader(tmp_path: Path) -> None:
    # the reference scheme written out: XOR with SHA-256(canary) repeated, then base64
    def enc(text: str, canary: str) -> str:
        data, digest = text.encode(), hashlib.sha256(canary.encode()).digest()
        return base64.b64encode(bytes(b ^ digest[i % 32] for i, b in enumerate(data))).decode()

    long_q = "这是一个很长的问题，" * 8  # longer than one 32-byte digest
    assert enc(long_q, "c") == encrypt(long_q, "c")
    p = write_xlsx(tmp_path / "browsecomp-zh-encrypted.xlsx", ["Topic", "Question", "Answer", "canary"],
                   [["艺术", enc(long_q, "zh-canary"), enc("答案一", "zh-canary"), "zh-canary"],
                    ["历史", enc("问题二", "c2"), enc("答案二", "c2"), "c2"]])
    qs = questions(f"browsecomp-zh:{p}")
    assert [(q.question, q.answer, q.meta) for q in qs] == [(long_q, "答案一", {"topic": "艺术"}),
                                                           ("问题二", "答案二", {"topic": "历史"})]
    write_xlsx(p, ["Topic", "Question", "Answer"], [["a", "b", "c"]])
    with pytest.raises(ConfigError, match=r"xlsx:1: not a BrowseComp-ZH file \(missing columns: canary\)"):
        load_dataset(f"browsecomp-zh:{p}")
    write_xlsx(p, ["Topic", "Question", "Answer", "canary"], [["a", enc("q", "k"), enc("a", "k"), "k"], ["a", "b", "c", ""]])
    with pytest.raises(ConfigError, match=r"xlsx:3: empty 'canary'"):
        load_dataset(f"browsecomp-zh:{p}")
    (tmp_path / "bad.xlsx").write_text("not a zip")
    with pytest.raises(ConfigError, match="not a readable .xlsx file"):
        load_dataset(f"browsecomp-zh:{tmp_path / 'bad.xlsx'}")


HLE_ROWS = [
    {"id": "h1", "question": "HQ-one?", "image": "", "answer": "A1", "answer_type": "exactMatch", "category": "Math"},
    {"id": "h2", "question": "HQ-two?", "image": "", "answer": "B", "answer_type": "multipleChoice", "category": "Physics"},
    {"id": "h3", "question": "HQ-three?", "image": "", "answer": "C3", "answer_type": "exactMatch", "category": "Math"},
    {"id": "h4", "question": "HQ-four?", "image": "", "answer": "D4", "answer_type": "exactMatch", "category": "Other"},
    {"id": "h5", "question": "HQ-img?", "image": "data:image/png;base64,iVBO", "answer": "E", "answer_type": "exactMatch",
     "category": "Math"},
]


def test_hle_loader_parquet_and_jsonl(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(HLE_ROWS), tmp_path / "test.parquet")
    said: list[str] = []
    qs = questions(f"hle:{tmp_path / 'test.parquet'}", log=said.append)
    assert [q.id for q in qs] == ["h1", "h2", "h3", "h4"] and said == ["HLE: 4 text-only question(s) kept; 1 with an image dropped"]
    assert qs[1].meta == {"answer_type": "multipleChoice", "category": "Physics"}
    assert qs == questions(f"hle:{write_jsonl(tmp_path / 'hle.jsonl', HLE_ROWS)}")
    write_jsonl(tmp_path / "bad.jsonl", [HLE_ROWS[0], {"id": "x", "question": "q"}])
    with pytest.raises(ConfigError, match=r"bad.jsonl:2: not an HLE row \(missing image, answer, answer_type, category\)"):
        load_dataset(f"hle:{tmp_path / 'bad.jsonl'}")


def test_simpleqa_frames_webwalker_loaders(tmp_path: Path) -> None:
    p = tmp_path / "simple_qa_test_set.csv"
    with p.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["metadata", "problem", "answer"])
        w.writerow(["{'topic': 'Art', 'answer_type': 'Person', 'urls': ['https://a.example/']}", "Who painted X?", "Y"])
    (q,) = questions(f"simpleqa:{p}")
    assert (q.question, q.answer, q.meta) == ("Who painted X?", "Y", {"topic": "Art", "answer_type": "Person",
                                                                     "urls": ["https://a.example/"]})
    p.write_text("metadata,problem,answer\n{'topic': ,q,a\n")
    with pytest.raises(ConfigError, match=r"simple_qa_test_set.csv:2: 'metadata' is not a dict literal"):
        load_dataset(f"simpleqa:{p}")
    # a quoted cell spanning lines 2-3: the bad row after it starts on line 4
    p.write_text("metadata,problem,answer\n{},\"two\nlines\",a\n{},,a\n")
    with pytest.raises(ConfigError, match=r"simple_qa_test_set.csv:4: empty 'problem'"):
        load_dataset(f"simpleqa:{p}")

    t = tmp_path / "test.tsv"
    t.write_text("\tPrompt\tAnswer\twikipedia_link_1\twikipedia_link_2\twikipedia_link_11+\treasoning_types\n"
                 "0\tHow many?\t3\thttps://en.wikipedia.org/wiki/A\t\t\tNumerical reasoning | Multiple constraints\n")
    (q,) = questions(f"frames:{t}")
    assert q.meta == {"reasoning_types": ["Numerical reasoning", "Multiple constraints"],
                      "links": ["https://en.wikipedia.org/wiki/A"]}
    t.write_text("Prompt\tAnswer\twikipedia_link_1\treasoning_types\nQ\tA\tnot a url\tTemporal reasoning\n")
    with pytest.raises(ConfigError, match=r"test.tsv:2: wikipedia_link_\* is not an http\(s\) URL"):
        load_dataset(f"frames:{t}")

    w = write_jsonl(tmp_path / "silver.jsonl", [{"question": "When was the conference?", "answer": "May", "root_url":
                    "https://conf.example/", "info": {"difficulty_level": "easy", "lang": "en", "domain": "conference",
                                                      "type": "single_source", "golden_path": ["a"]}}])
    (q,) = questions(f"webwalkerqa:{w}")
    assert q.question == "When was the conference?\n\nStart from the website https://conf.example/ ."
    assert q.meta == {"root_url": "https://conf.example/", "difficulty": "easy", "lang": "en", "domain": "conference",
                      "type": "single_source"}
    write_jsonl(w, [{"question": "q", "answer": "a", "info": {}}])
    with pytest.raises(ConfigError, match=r"silver.jsonl:1: not a WebWalkerQA row \(missing root_url\)"):
        load_dataset(f"webwalkerqa:{w}")


# --- end to end -------------------------------------------------------------------------------------------
def test_gaia_bench_judge_report(tmp_path: Path) -> None:
    root = gaia_dir(tmp_path / "validation")
    out = tmp_path / "sweep"
    answers = {"Q-number": "<answer>$1,234.5</answer>", "Q-unit": "<answer>17 km</answer>",
               "Q-string": "<answer>st petersburg</answer>", "Q-list": "<answer>Apple,3.0, banana</answer>",
               "Q-short": "<answer>a</answer>", "Q-punct": "<answer>Mr A, B</answer>"}
    with ScriptedServer(policy=answering(answers)) as srv:
        said = bench(f"gaia:{root}", out, srv)
    assert "1 with an attached file dropped" in said
    r = runner.invoke(app, ["judge", str(out)])
    assert r.exit_code == 0 and "3/6 correct (6 judged now" in r.output, r.output
    verdicts = {qid: read_judgement(d)["gaia"] for d, _p, qid, _r in find_runs(out)}  # type: ignore[index]
    assert {q: v["correct"] for q, v in verdicts.items()} == {"t1": True, "t2": False, "t5": True, "t3": True,
                                                              "t4": False, "t7": False}
    assert {v["preset"] for v in verdicts.values()} == {"gaia"}
    metrics, md = report(out, tmp_path / "rep")
    # level 1: t1 yes, t2 no, t5 yes = 2/3; level 2: t3 yes, t4 no = 1/2; level 3: t7 no = 0/1; all 3/6
    levels = metrics["gaia_levels"]["fte"]
    assert levels == {"Level 1": {"judged": 3, "correct": 2, "accuracy": pytest.approx(2 / 3)},
                      "Level 2": {"judged": 2, "correct": 1, "accuracy": 0.5},
                      "Level 3": {"judged": 1, "correct": 0, "accuracy": 0.0}}
    assert metrics["profiles"][0]["accuracy"] == 0.5
    assert "## GAIA accuracy by level" in md and "| fte | Level 1 | 3 | 2 | 66.7% |" in md
    # graded again only when forced; the verdicts are cached otherwise
    r = runner.invoke(app, ["judge", str(out)])
    assert "3/6 correct (0 judged now, 6 cached" in r.output, r.output
    r = runner.invoke(app, ["judge", str(out), "--force"])
    assert "3/6 correct (6 judged now, 0 cached" in r.output, r.output


def test_hle_calibration_end_to_end(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "hle.jsonl", HLE_ROWS)
    out = tmp_path / "sweep"
    answers = {f"HQ-{k}": f"<answer>R-{k}</answer>" for k in ("one", "two", "three", "four")}
    with ScriptedServer(policy=answering(answers)) as srv:
        bench(f"hle:{src}", out, srv)
    # the grader: R-one yes 90, R-two no 80, R-three no 20, R-four yes 60
    judge_llm(out, {"R-one": ("yes", 90), "R-two": ("no", 80), "R-three": ("no", 20), "R-four": ("yes", 60)})
    metrics, md = report(out, tmp_path / "rep")
    # 4 runs < 100: one bin; mean confidence (0.9 + 0.8 + 0.2 + 0.6) / 4 = 0.625, accuracy 2/4 = 0.5 ->
    # RMS error |0.625 - 0.5| = 0.125, shown as 12.5 (percent)
    (row,) = metrics["hle_calibration"]
    assert row["judged"] == 4 and row["accuracy"] == 0.5 and row["with_confidence"] == 4
    assert row["calibration_error"] == pytest.approx(0.125)
    assert "| fte | 4 | 50.0% | 4 | 12.5 |" in md


def test_simpleqa_summary_end_to_end(tmp_path: Path) -> None:
    p = tmp_path / "simple_qa_test_set.csv"
    with p.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["metadata", "problem", "answer"])
        for i in range(5):
            w.writerow(["{'topic': 'T', 'answer_type': 'Number', 'urls': []}", f"SQ-{i}?", f"G{i}"])
    out = tmp_path / "sweep"
    with ScriptedServer(policy=answering({f"SQ-{i}": f"<answer>A{i}</answer>" for i in range(5)})) as srv:
        bench(f"simpleqa:{p}", out, srv)
    # graded three-way by the dataset's default preset (llm-three-way) through a loopback grader:
    # A0, A1, A4 CORRECT; A2 INCORRECT; A3 NOT_ATTEMPTED
    judge_llm(out, {"A0": ("yes", 100), "A1": ("yes", 100), "A2": ("no", 100), "A3": ("na", 100), "A4": ("yes", 100)})
    grades = {qid: read_judgement(d)["llm-three-way@g"]["grade"] for d, _p, qid, _r in find_runs(out)}  # type: ignore[index]
    assert sorted(grades.values()) == ["CORRECT", "CORRECT", "CORRECT", "INCORRECT", "NOT_ATTEMPTED"]
    metrics, md = report(out, tmp_path / "rep")
    # correct 3/5 = 60%, not attempted 1/5 = 20%, given attempted 3/4 = 75%, F = 2*.6*.75/1.35 = 66.7%
    (row,) = metrics["simpleqa"]
    assert row["n"] == 5 and row["correct"] == 0.6 and row["not_attempted"] == 0.2
    assert row["correct_given_attempted"] == pytest.approx(0.75) and row["f_score"] == pytest.approx(2 / 3)
    assert "| fte | 5 | 60.0% | 20.0% | 75.0% | 66.7% |" in md
    # a hand-made verdict of another preset (no three-way grade) made primary: left out of the summary, and said
    (d, *_rest) = next(r for r in find_runs(out) if r[2] == question_id("SQ-0?"))
    data = read_judgement(d) or {}
    data["llm-equivalence@g"] = {**data["llm-three-way@g"], "preset": "llm-equivalence", "grade": None}
    data["primary"] = "llm-equivalence@g"
    write_judgement(d, data)
    metrics, md = report(out, tmp_path / "rep2")
    (row,) = metrics["simpleqa"]
    # 2 CORRECT, 1 INCORRECT, 1 NOT_ATTEMPTED of 4: correct 50%, given attempted 2/3, F = 2*.5*(2/3)/(7/6) = 4/7
    assert row["n"] == 4 and row["f_score"] == pytest.approx(4 / 7)
    assert "1 judged run(s) have no three-way grade" in md


def test_frames_and_webwalker_groupings_end_to_end(tmp_path: Path) -> None:
    t = tmp_path / "test.tsv"
    t.write_text("Prompt\tAnswer\twikipedia_link_1\twikipedia_link_2\treasoning_types\n"
                 "FQ-1?\tF1\thttps://en.wikipedia.org/wiki/A\t\tNumerical reasoning | Temporal reasoning\n"
                 "FQ-2?\tF2\thttps://en.wikipedia.org/wiki/B\thttps://en.wikipedia.org/wiki/C\tNumerical reasoning\n"
                 "FQ-3?\tF3\thttps://en.wikipedia.org/wiki/C\t\tTabular reasoning\n")
    out = tmp_path / "frames"
    with ScriptedServer(policy=answering({f"FQ-{i}": f"<answer>X{i}</answer>" for i in (1, 2, 3)})) as srv:
        bench(f"frames:{t}", out, srv)
    judge_llm(out, {"X1": ("yes", 100), "X2": ("no", 100), "X3": ("yes", 100)})
    metrics, md = report(out, tmp_path / "rep")
    # numerical: FQ-1 yes, FQ-2 no = 1/2; temporal: FQ-1 = 1/1; tabular: FQ-3 = 1/1
    got = {g: (x["judged"], x["correct"]) for g, x in metrics["frames_reasoning_types"]["fte"].items()}
    assert got == {"Numerical reasoning": (2, 1), "Temporal reasoning": (1, 1), "Tabular reasoning": (1, 1)}
    assert "| fte | Numerical reasoning | 2 | 1 | 50.0% |" in md

    w = write_jsonl(tmp_path / "ww.jsonl", [
        {"question": f"WQ-{i}?", "answer": f"W{i}", "root_url": "https://site.example/",
         "info": {"difficulty_level": d, "lang": lang, "domain": dom}}
        for i, (d, lang, dom) in enumerate([("easy", "en", "conference"), ("hard", "zh", "conference"),
                                           ("easy", "zh", "game")])])
    out2 = tmp_path / "ww"
    with ScriptedServer(policy=answering({f"WQ-{i}": f"<answer>Y{i}</answer>" for i in range(3)})) as srv:
        bench(f"webwalkerqa:{w}", out2, srv)
    judge_llm(out2, {"Y0": ("yes", 100), "Y1": ("no", 100), "Y2": ("no", 100)})
    metrics, md = report(out2, tmp_path / "rep2")
    g = metrics["webwalkerqa_groups"]
    # difficulty: easy WQ-0 yes, WQ-2 no = 1/2, hard 0/1; language: en 1/1, zh 0/2; domain: conference 1/2, game 0/1
    assert {k: (x["judged"], x["correct"]) for k, x in g["Difficulty"]["fte"].items()} == {"easy": (2, 1), "hard": (1, 0)}
    assert {k: (x["judged"], x["correct"]) for k, x in g["Language"]["fte"].items()} == {"en": (1, 1), "zh": (2, 0)}
    assert {k: (x["judged"], x["correct"]) for k, x in g["Domain"]["fte"].items()} == {"conference": (2, 1), "game": (1, 0)}
    assert "| fte | zh | 2 | 0 | 0.0% |" in md
    assert "FRAMES" not in md and "GAIA" not in md  # another benchmark's sections stay out


def test_xbench_and_browsecomp_zh_end_to_end(tmp_path: Path) -> None:
    p = tmp_path / "DeepSearch-2505.csv"
    with p.open("w", newline="", encoding="utf-8-sig") as f:
        w = csv.writer(f)
        w.writerow(["id", "prompt", "answer", "canary"])
        w.writerow(["7", xor_cyclic("XQ-问题", "can"), xor_cyclic("金", "can"), "can"])
    out = tmp_path / "xb"
    with ScriptedServer(policy=answering({"XQ-": "<answer>金</answer>"})) as srv:
        bench(f"xbench:{p}", out, srv)
    judge_llm(out, {"金": ("yes", 100)})
    metrics, _ = report(out, tmp_path / "rep")
    assert metrics["profiles"][0]["accuracy"] == 1.0
    x = write_xlsx(tmp_path / "zh.xlsx", ["Topic", "Question", "Answer", "canary"],
                   [["t", encrypt("ZQ-问题", "k"), encrypt("银", "k"), "k"]])
    out2 = tmp_path / "zh"
    with ScriptedServer(policy=answering({"ZQ-": "<answer>铜</answer>"})) as srv:
        bench(f"browsecomp-zh:{x}", out2, srv)
    judge_llm(out2, {"铜": ("no", 100)})
    metrics, _ = report(out2, tmp_path / "rep2")
    assert metrics["profiles"][0]["accuracy"] == 0.0


def test_frames_closed_world_over_the_linked_pages_from_a_snapshot(tmp_path: Path) -> None:
    """--frames-closed: the linked pages, read from the snapshot, are the only world — a local corpus that
    search and fetch reach; an unlinked URL is refused without any request."""
    from fte_shell.benchmarks.frames import BENCHMARK as FRAMES
    from fte_shell.config import FetchPolicy, RunConfig
    from fte_shell.errors import FetchRefused
    from fte_shell.fetch import FetchService
    from fte_shell.fetch.pages import ClosedWorld
    from fte_shell.search import LocalCorpus
    from fte_shell.snapshot import Snapshot, open_store
    from fte_shell.workspace import Workspace
    from tests.servers import LoopbackServer

    web = LoopbackServer().start()
    web.route("/wiki/Tern_Quay", body="<html><head><title>Tern Quay</title></head><body><main><p>The Tern Quay "
                                      "harbour was dredged in 1887 by Lio Brand.</p></main></body></html>")
    web.route("/wiki/Lio_Brand", body="<html><head><title>Lio Brand</title></head><body><main><p>Lio Brand was an "
                                      "engineer born in 1851.</p></main></body></html>")
    web.route("/wiki/Elsewhere", body="<html><body><p>not linked</p></body></html>")
    a, b, other = web.url("/wiki/Tern_Quay"), web.url("/wiki/Lio_Brand"), web.url("/wiki/Elsewhere")
    never = web.url("/wiki/Never_recorded")
    snap = tmp_path / "snap"
    policy = FetchPolicy(allow_private=[web.host_port])
    try:  # record the linked pages once (the snapshot a closed FRAMES sweep reads)
        rec = Snapshot(open_store(snap), "record")
        for u in (a, b):
            FetchService(Workspace(tmp_path / "rec"), policy, page_cache=rec).get_document(u)
    finally:
        web.stop()
    t = tmp_path / "test.tsv"
    t.write_text("Prompt\tAnswer\twikipedia_link_1\twikipedia_link_2\twikipedia_link_3\treasoning_types\n"
                 f"How old was the engineer who dredged Tern Quay?\t36\t{a}\t{b}\t\tNumerical reasoning\n"
                 f"Who dredged Tern Quay?\tLio Brand\t{a}\t\t\tMultiple constraints\n"
                 f"Where is it?\tnowhere\t{never}\t\t\tTemporal reasoning\n")
    cfg = RunConfig.model_validate({"benchmark": {"frames_closed": True}, "snapshot": {"dir": str(snap), "mode": "replay"}})
    said: list[str] = []
    plan = FRAMES.world(t, tmp_path / "idx", said.append, cfg)
    assert plan.closed and plan.corpus is not None
    assert any("2 of 3 linked page(s) found in the snapshot" in s and "1 missing" in s for s in said)
    corpus = LocalCorpus(plan.corpus)
    try:
        hits = corpus.search("engineer born 1851", 5)
        assert hits and hits[0].url == b
        closed = FetchService(Workspace(tmp_path / "ws"), policy, local=ClosedWorld(corpus))
        assert "dredged in 1887" in closed.get_document(a).text
        with pytest.raises(FetchRefused, match="not in the local corpus"):
            closed.fetch(other)
    finally:
        corpus.close()
    # open web unless asked; asked without a snapshot: a one-line error naming --snapshot
    assert FRAMES.world(t, None, None, RunConfig()).corpus is None
    with pytest.raises(ConfigError, match="--frames-closed reads the linked pages from a snapshot: give --snapshot DIR"):
        FRAMES.world(t, None, None, RunConfig.model_validate({"benchmark": {"frames_closed": True}}))
    # through bench: the flag reaches the plugin and the sweep searches the closed corpus
    out = tmp_path / "sweep"
    with ScriptedServer(policy=answering({"engineer": "<answer>36</answer>", "Who": "<answer>Lio Brand</answer>",
                                          "Where": "<answer>?</answer>"})) as srv:
        r = runner.invoke(app, ["bench", f"frames:{t}", "--out", str(out), "--profiles", "fte", "--frames-closed",
                                "--snapshot", str(snap), "--snapshot-mode", "replay", "--corpus-dir", str(tmp_path / "idx2"),
                                "--base-url", srv.base_url, "--model", "m", "--api-key", "k", "--no-progress"])
    assert r.exit_code == 0, r.output
    manifest = json.loads((out / "sweep.json").read_text())
    assert manifest["config"]["search"]["backend"] == "local"
    assert Path(manifest["config"]["search"]["corpus"]).resolve() == (tmp_path / "idx2").resolve()
