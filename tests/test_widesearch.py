"""WideSearch: loading the published layout, reading table answers, every metric, the judge model's
alignment steps (against the scripted server over loopback) and the scores — each expected value worked
out by hand in the comments."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from fte_shell.benchmarks.llmjudge import judge_model_config
from fte_shell.benchmarks.registry import load_dataset
from fte_shell.benchmarks.widesearch.align import ModelTableJudge
from fte_shell.benchmarks.widesearch.report import summarize, widesearch_section
from fte_shell.benchmarks.widesearch.score import NeedsJudge, score_table
from fte_shell.benchmarks.widesearch.spec import Evaluation, split_task_prompt
from fte_shell.benchmarks.widesearch.table import extract_markdown_table, read_gold_csv
from fte_shell.errors import ConfigError
from fte_shell.standins.server import ScriptedServer
from tests.widesearch_data import write_tasks

EN_EVAL = {
    "required": ["Name", "Year", "Revenue", "Founded", "Web Site", "City"],
    "unique_columns": ["name"],
    "eval_pipeline": {
        "name": {"preprocess": ["norm_str"], "metric": ["exact_match"]},
        "year": {"metric": ["exact_match"]},
        "revenue": {"preprocess": ["extract_number"], "metric": ["number_near"], "criterion": 0.1},
        "founded": {"preprocess": ["norm_date"], "metric": ["date_near"]},
        "website": {"metric": ["url_match"]},
        "city": {"metric": ["in_match"]},
    },
}
EN_GOLD = (
    "Name,Year,Revenue,Founded,Web Site,City\n"
    'Alpha,1990,"1,000",1990-03-15,https://alpha.com/about,"Paris, France"\n'
    "Beta,2001,50%,March 2001,https://www.beta.org,Berlin\n"
    "Gamma,1985,200,1985-01-01,https://gamma.io,Rome\n"
)
ZH_EVAL = {
    "required": ["城市", "人口（万人）", "成立日期", "省份"],
    "unique_columns": ["城市"],
    "eval_pipeline": {
        "城市": {"metric": ["exact_match"]},
        "人口（万人）": {"preprocess": ["extract_number"], "metric": ["number_near"], "criterion": 0.05},
        "成立日期": {"preprocess": ["norm_date"], "metric": ["date_near"]},
        "省份": {"metric": ["llm_judge"], "criterion": "省份名称含义相同即可（简称也算对）"},
    },
}
ZH_GOLD = "城市,人口（万人）,成立日期,省份\n北京,2189,1949年10月1日,北京市\n上海,2487,1949年5月27日,上海市\n"


def ev_of(raw: dict[str, Any]) -> Evaluation:
    return Evaluation.model_validate(raw)


def gold_of(ev: Evaluation, text: str):
    return read_gold_csv(text).select(ev.required)


def md(*lines: str) -> str:
    return "Here is the table.\n```markdown\n" + "\n".join(lines) + "\n```\nDone."


def judge_for(srv: ScriptedServer) -> ModelTableJudge:
    return ModelTableJudge(judge_model_config("grader", base_url=srv.base_url, api_key="k", max_retries=0))


def scripted_judge(keys: dict[str, str] | None = None, columns: dict[str, str] | None = None,
                   cells: str | None = None):
    """A judge policy answering by the kind of prompt it gets."""

    def reply(body: dict[str, Any]) -> str:
        prompt = body["messages"][0]["content"]
        if "List A (agent)" in prompt:
            return "Mapping:\n```json\n" + json.dumps(keys or {}, ensure_ascii=False) + "\n```"
        if "Required column names still missing" in prompt:
            return "```json\n" + json.dumps(columns or {}) + "\n```"
        return cells or "```json\n{}\n```"

    return reply


# --- loading --------------------------------------------------------------------------------------------
def test_load_published_layout(tmp_path: Path) -> None:
    write_tasks(tmp_path, [
        {"instance_id": "ws_en_001", "query": "List the companies.", "evaluation": EN_EVAL, "gold": EN_GOLD},
        {"instance_id": "ws_zh_001", "query": "列出城市。", "language": "zh", "evaluation": ZH_EVAL, "gold": ZH_GOLD},
    ])
    ds = load_dataset(f"widesearch:{tmp_path}")
    assert ds.kind == "widesearch" and [q.id for q in ds.questions] == ["ws_en_001", "ws_zh_001"]
    en, zh = ds.questions
    query, columns = split_task_prompt(en.question)
    assert query == "List the companies." and columns == ["Name", "Year", "Revenue", "Founded", "Web Site", "City"]
    assert "| Name | Year | Revenue | Founded | Web Site | City |" in en.question and "<answer>" in en.question
    assert en.evaluation["required"] == ["name", "year", "revenue", "founded", "website", "city"]
    assert en.answer == EN_GOLD and zh.meta == {"instance_id": "ws_zh_001", "language": "zh", "query": "列出城市。"}
    assert split_task_prompt(zh.question)[1] == ["城市", "人口（万人）", "成立日期", "省份"]
    assert [q.id for q in load_dataset(str(tmp_path), limit=1).questions] == ["ws_en_001"]  # a plain directory too
    assert split_task_prompt("What is 2+2?") == ("What is 2+2?", None)


@pytest.mark.parametrize("evaluation, message", [
    ("{not json", "'evaluation' is not valid JSON"),
    ({**EN_EVAL, "unique_columns": ["nope"]}, "subset of 'required'"),
    ({**EN_EVAL, "eval_pipeline": {**EN_EVAL["eval_pipeline"], "year": {"metric": ["fuzzy"]}}}, "unknown metric"),
    ({**EN_EVAL, "eval_pipeline": {k: v for k, v in EN_EVAL["eval_pipeline"].items() if k != "city"}}, "without a metric"),
])
def test_malformed_task_names_file_and_line(tmp_path: Path, evaluation: Any, message: str) -> None:
    write_tasks(tmp_path, [{"instance_id": "ws_en_001", "query": "q", "evaluation": EN_EVAL, "gold": EN_GOLD}])
    bad = {"instance_id": "ws_en_002", "query": "q", "language": "en",
           "evaluation": evaluation if isinstance(evaluation, str) else json.dumps(evaluation)}
    with (tmp_path / "widesearch.jsonl").open("a") as f:
        f.write(json.dumps(bad) + "\n")
    (tmp_path / "widesearch_gold" / "ws_en_002.csv").write_text(EN_GOLD)
    with pytest.raises(ConfigError, match=rf"widesearch.jsonl:2: .*{message}"):
        load_dataset(f"widesearch:{tmp_path}")


def test_missing_gold_file_or_column(tmp_path: Path) -> None:
    write_tasks(tmp_path, [{"instance_id": "ws_en_001", "query": "q", "evaluation": EN_EVAL, "gold": EN_GOLD}])
    (tmp_path / "widesearch_gold" / "ws_en_001.csv").write_text("Name,Year\nAlpha,1990\n")
    with pytest.raises(ConfigError, match=r"ws_en_001.csv: the gold table lacks required column"):
        load_dataset(f"widesearch:{tmp_path}")
    (tmp_path / "widesearch_gold" / "ws_en_001.csv").unlink()
    with pytest.raises(ConfigError, match=r"cannot read the gold table .*ws_en_001.csv"):
        load_dataset(f"widesearch:{tmp_path}")


# --- reading tables -------------------------------------------------------------------------------------
def test_table_extraction_as_the_benchmark_does() -> None:
    # the fenced markdown block wins over an earlier pipe table; headers lose case and spaces
    text = "| x | y |\n|---|---|\n| 1 | 2 |\n\n```markdown\n| Company Name | Year |\n| :--- | ---: |\n| A | 7 |\n```"
    t = extract_markdown_table(text)
    assert t is not None and t.columns == ["companyname", "year"] and t.rows == [["A", "7"]]
    # no fence: the run of | lines from the first |; text around it is ignored
    t = extract_markdown_table("Result:\n| A | B |\n|--|--|\n| x | y |\n| z |  |\nThanks")
    assert t is not None and t.columns == ["a", "b"] and t.rows == [["x", "y"], ["z", "nan"]]
    assert extract_markdown_table("no table | here |") is None  # fewer than four pipes
    assert extract_markdown_table(None) is None
    # pandas-style typing: an integer column with an empty cell becomes float, NA markers become nan
    t = read_gold_csv("k,n,s\na,12,N/A\nb,,x\nc,007,y\n")
    assert t.rows == [["a", "12.0", "nan"], ["b", "nan", "x"], ["c", "7.0", "y"]]


# --- scoring without a model ----------------------------------------------------------------------------
def test_every_cell_metric_with_duplicate_missing_and_extra_rows() -> None:
    ev = ev_of(EN_EVAL)
    answer = md(
        "| Name | Year | Revenue | Founded | Web Site | City |",
        "|---|---|---|---|---|---|",
        "| Alpha | 1990 | $1,050 | 1990-04-10 | http://alpha.com/x | Paris |",
        "| Alpha | 1999 | 1 | 2000-01-01 | https://other.com | Lyon |",  # duplicate key: the first row is kept
        "| Beta | 2002 | 0.5 | 2001-03-20 | https://beta.org | Berlin |",
        "| Delta | 2010 | 5 | 2010-01-01 | https://delta.com | Oslo |",  # not in the gold table
    )  # Gamma is missing
    with ScriptedServer(policy=scripted_judge(keys={})) as srv:
        r = score_table(ev, gold_of(ev, EN_GOLD), answer, judge_for(srv))
        # only the key not already in the gold column goes to the judge, which maps it to nothing
        assert len(srv.requests) == 1 and '["Delta"]' in srv.requests[0]["messages"][0]["content"]
    # Alpha: year 1990=1990 ✓; revenue 1050 vs 1000, |50| <= 0.1*1000 ✓; 1990-04-10 vs 1990-03-15 = 26 days ✓;
    #        host alpha.com = alpha.com ✓; "Paris" in "Paris, France" ✓ -> row 1, 6 items
    # Beta:  year 2002≠2001 ✗; 0.5 vs 50% = 0.5 ✓; 2001-03-20 vs March 2001 (= 2001-03-01) 19 days ✓;
    #        beta.org ≠ www.beta.org ✗; Berlin ✓ -> row 0, items 1 (key) + 3 = 4
    # rows: 3 answer rows (after de-dup), 3 gold rows; Σrow = 1; Σitem = 10 over 3×6 = 18 on each side
    assert (r.response_rows, r.gold_rows) == (3, 3)
    assert r.precision_by_row == pytest.approx(1 / 3) and r.recall_by_row == pytest.approx(1 / 3)
    assert r.f1_by_row == pytest.approx(1 / 3)
    assert r.precision_by_item == pytest.approx(10 / 18) and r.recall_by_item == pytest.approx(10 / 18)
    assert r.f1_by_item == pytest.approx(10 / 18) and r.score == 0.0 and r.key_map == {"name": {}}
    by = {(c.row_key, c.column, c.metric): c for c in r.cells}
    assert by[("beta", "year", "exact_match")].score == 0.0
    assert by[("beta", "website", "url_match")].score == 0.0
    assert by[("alpha", "revenue", "number_near")].response == "1050"
    assert {c.metric for c in r.cells if c.row_key == "gamma"} == {"missing"}
    assert {c.metric for c in r.cells if c.row_key == "delta"} == {"extra"}
    assert len(r.cells) == 6 * 4  # two joined rows, one missing, one extra: six columns each


def test_identical_table_succeeds_and_extra_column_fails() -> None:
    ev = ev_of(EN_EVAL)
    rows = [line.split(",") for line in ["Gamma,1985,200,1985-01-01,https://gamma.io,Rome",
                                          "Beta,2001,50%,March 2001,https://www.beta.org,Berlin"]]
    rows.insert(0, ["Alpha", "1990", "1,000", "1990-03-15", "https://alpha.com/about", "Paris, France"])
    head = "| name | YEAR | Revenue | founded | WebSite | City |"
    same = md(head, "|-|-|-|-|-|-|", *("| " + " | ".join(r) + " |" for r in rows))
    r = score_table(ev, gold_of(ev, EN_GOLD), same)
    assert r.score == 1.0 and r.f1_by_row == 1.0 and r.f1_by_item == 1.0 and r.msg == ""
    # an extra column: the columns are not the required ones, so the whole table scores 0 (as the public
    # scorer does); no name is missing, so there is nothing for the judge to map and no model is needed
    extra = md(head[:-1] + "| Notes |", "|-|-|-|-|-|-|-|", *("| " + " | ".join(r) + " | n |" for r in rows))
    r = score_table(ev, gold_of(ev, EN_GOLD), extra)
    assert (r.score, r.f1_by_row, r.f1_by_item) == (0.0, 0.0, 0.0) and "not the required" in r.msg
    r = score_table(ev, gold_of(ev, EN_GOLD), "I could not find anything.")
    assert r.msg == "no Markdown table in the answer" and r.f1_by_item == 0.0
    assert score_table(ev, gold_of(ev, EN_GOLD), None).msg == "no answer"


# --- the judge model (scripted server over loopback) ---------------------------------------------------------
def test_chinese_key_mapping_and_llm_judge_column() -> None:
    ev = ev_of(ZH_EVAL)
    answer = md(
        "| 城市 | 人口（万人） | 成立日期 | 省份 |",
        "| --- | --- | --- | --- |",
        "| 北京市 | 2,200万 | 1949-10-01 | 北京 |",  # key written differently: the judge maps 北京市 -> 北京
        "| 上海 | 2300 | 1949-06-30 | 沪 |",
    )
    cells = "分析……\n```json\n{\"idx_0\": 1, \"idx_1\": 0}\n```"
    with ScriptedServer(policy=scripted_judge(keys={"北京市": "北京"}, cells=cells)) as srv:
        r = score_table(ev, gold_of(ev, ZH_GOLD), answer, judge_for(srv))
        bodies = list(srv.requests)
    # 北京 row: 2200 vs 2189, |11| <= 0.05*2189 ✓; 1949-10-01 vs 1949年10月1日 0 days ✓; judge 1 -> row 1, 4 items
    # 上海 row: 2300 vs 2487, |187| > 124.35 ✗; 1949-06-30 vs 1949-05-27 = 34 days > 31 ✗; judge 0 -> row 0, 1 item
    # Σrow = 1 over 2 and 2 rows; Σitem = 5 over 2×4 = 8
    assert (r.precision_by_row, r.recall_by_row, r.f1_by_row) == (0.5, 0.5, 0.5)
    assert (r.precision_by_item, r.recall_by_item, r.f1_by_item) == (0.625, 0.625, 0.625) and r.score == 0.0
    assert r.key_map == {"城市": {"北京市": "北京"}}
    assert [c.step for c in r.judge_calls] == ["keys", "llm_judge"]
    assert len(bodies) == 2 and all(b["temperature"] == 0 for b in bodies) and bodies[0]["model"] == "grader"
    assert '["北京市"]' in bodies[0]["messages"][0]["content"]  # only the value not already in the gold column
    assert "简称也算对" in bodies[1]["messages"][0]["content"]  # the column's criterion reaches the judge
    key = next(c for c in r.cells if c.column == "城市" and c.row_key == "北京")
    assert key.note == "key mapped from '北京市'"


def test_misspelt_column_mapped_and_unreadable_judge_reply() -> None:
    raw = {"required": ["Title", "Author"], "unique_columns": ["title"],
           "eval_pipeline": {"title": {"preprocess": ["norm_str"], "metric": ["exact_match"]},
                             "author": {"metric": ["llm_judge"], "criterion": "same person"}}}
    ev = ev_of(raw)
    gold = gold_of(ev, "Title,Author\nDune,Frank Herbert\nEmma,Jane Austen\n")
    answer = md("| Title | Auther |", "|---|---|", "| Dune | F. Herbert |", "| Emma | J. Austen |")
    policy = scripted_judge(columns={"auther": "author", "bogus": "title"}, cells="I think both are right.")
    with ScriptedServer(policy=policy) as srv:
        r = score_table(ev, gold, answer, judge_for(srv))
        assert len(srv.requests) == 2
    # the misspelt column is mapped (the pair naming an unknown column is ignored); the llm_judge reply has
    # no JSON: every cell of that column scores 0, so both rows score 0 and items are 2 keys out of 4
    assert r.column_map == {"auther": "author"} and r.msg == ""
    assert (r.f1_by_row, r.precision_by_item, r.recall_by_item, r.score) == (0.0, 0.5, 0.5, 0.0)
    assert [c.note for c in r.cells if c.column == "author"] == ["judge reply unreadable"] * 2
    with pytest.raises(NeedsJudge, match="--judge-model"):
        score_table(ev, gold, answer, judge=None)


# --- repetitions -------------------------------------------------------------------------------------------
def test_avg_max_min_over_repetitions(tmp_path: Path) -> None:
    from fte_shell.metrics import RunMetrics

    runs = []
    values = {("t1", 0): (1.0, 1.0), ("t1", 1): (0.0, 0.5), ("t2", 0): (0.0, 0.2), ("t2", 1): (0.0, 0.4)}
    for (qid, rep), (score, f1) in values.items():
        d = tmp_path / qid / f"r{rep}"
        d.mkdir(parents=True)
        entry = {k: f1 for k in ("precision_by_row", "recall_by_row", "f1_by_row", "precision_by_item",
                                 "recall_by_item", "f1_by_item")}
        (d / "judgement.json").write_text(json.dumps({"widesearch": {**entry, "score": score}}))
        runs.append(RunMetrics(run_dir=str(d), profile="fte", qid=qid, rep=rep, stop_reason="answer", answered=True))
    failed = tmp_path / "t2" / "r2"
    failed.mkdir()
    runs.append(RunMetrics(run_dir=str(failed), profile="fte", qid="t2", rep=2, stop_reason="failed", answered=False))
    (g,) = summarize(runs)
    # success: t1 {1, 0} t2 {0, 0}: avg (0.5 + 0) / 2; max (1 + 0) / 2; min 0
    assert g["score"] == {"avg_n": 0.25, "max_n": 0.5, "min_n": 0.0}
    # f1: t1 {1, .5} t2 {.2, .4}: avg (.75 + .3) / 2; max (1 + .4) / 2; min (.5 + .2) / 2
    assert g["f1_by_row"] == pytest.approx({"avg_n": 0.525, "max_n": 0.7, "min_n": 0.35})
    assert (g["tasks"], g["scored"], g["not_scored"], g["max_reps"]) == (2, 4, 1, 2)
    ((_name, (head, body)),) = widesearch_section(runs, tmp_path)
    assert head[4:7] == ["Success", "Row-F1", "Item-F1"] and "Success max_n" in head and "Item-F1 min_n" in head
    assert body == [["fte", "2", "4", "1", "25.0%", "52.5%", "52.5%", "25.0%", "50.0%", "0.0%", "52.5%", "70.0%",
                     "35.0%", "52.5%", "70.0%", "35.0%"]]
    assert json.loads((tmp_path / "widesearch.json").read_text())["profiles"][0]["score"]["max_n"] == 0.5


def test_cells_csv_columns(tmp_path: Path) -> None:
    from fte_shell.benchmarks.widesearch.runs import CELLS_CSV, write_cells

    ev = ev_of(EN_EVAL)
    r = score_table(ev, gold_of(ev, EN_GOLD), md("| name | year | revenue | founded | website | city |", "|-|-|-|-|-|-|",
                                                  "| Beta | 2001 | 50% | 2001-03-01 | https://www.beta.org | Berlin |"))
    write_cells(tmp_path / CELLS_CSV, r)
    rows = list(csv.DictReader((tmp_path / CELLS_CSV).open(encoding="utf-8")))
    assert list(rows[0]) == ["row_key", "column", "response", "gold", "metric", "score", "note"]
    assert [(x["row_key"], x["metric"]) for x in rows][:2] == [("beta", "key"), ("beta", "exact_match")]
    assert sum(x["metric"] == "missing" for x in rows) == 12 and r.recall_by_row == pytest.approx(1 / 3)
