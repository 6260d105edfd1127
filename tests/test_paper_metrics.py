"""The paper's numbers on hand-made runs, with hand-computed values for both interfaces: revisit rate of
the transient profiles (open-find, visit), the analysis tables (3, 7, 8, 9, 10), ``bash -c`` scripts,
infrastructure failures left out, the no-tool-call warning, model column, order and config digests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_metrics import fte_run, shell_run

from fte_shell.metrics import collect, run_metrics, summarize
from fte_shell.report.build import write_report


def mk_run(d: Path, profile: str, calls: list[tuple[str, dict[str, Any], str, bool, dict[str, Any]]], *,
           stop: str | None = "answer", model: str = "m", digest: str | None = None, correct: bool | None = None,
           qid: str | None = None) -> Path:
    """A run directory with tool_call events (name, arguments, observation, error, meta) and result.json."""
    d.mkdir(parents=True)
    ev: list[dict[str, Any]] = [{"type": "start", "t": 0, "profile": profile, "model": model}]
    for i, (name, args, obs, err, meta) in enumerate(calls, start=1):
        ev.append({"type": "tool_call", "t": i, "turn": i, "name": name, "arguments": args, "observation": obs,
                   "error": err, "meta": meta})
    (d / "trajectory.jsonl").write_text("".join(json.dumps(e) + "\n" for e in ev))
    if stop is not None:
        res: dict[str, Any] = {"stop_reason": stop, "answer": "x" if stop == "answer" else None, "profile": profile,
                               "model": model, "wall_s": 1.0}
        if digest:
            res["config_digest"] = digest
        (d / "result.json").write_text(json.dumps(res))
    if correct is not None:
        (d / "judgement.json").write_text(json.dumps({"match": {"correct": correct, "f1": float(correct)}}))
    return d


A, B, C = "https://x.org/a", "https://x.org/b", "https://x.org/c"
SEARCH_OBS = f'2 results for "q":\n[1] A\n    {A}\n    snippet a\n[2] B\n    {B}\n    snippet b'


def test_open_find_revisit(tmp_path: Path) -> None:
    calls = [
        ("search", {"query": "q"}, SEARCH_OBS, False, {}),
        ("open", {"url": A}, "Open page: A", False, {"source": A}),  # materializes A, extracts from A
        ("find", {"pattern": "foo"}, "5: foo", False, {"source": A}),  # paging A: not a revisit
        ("open", {"url": B}, "Open page: B", False, {"source": B}),  # touches B
        ("find", {"pattern": "bar"}, "7: bar", False, {}),  # no source in meta: the open page (B)
        ("scroll", {}, "…", False, {"source": B}),
        ("open", {"url": A, "line": 50}, "Open page: A", False, {"source": A}),  # A again after B: revisit
        ("open", {"url": C}, "Error: 404", True, {}),  # failed: materializes nothing
    ]
    m = run_metrics(mk_run(tmp_path / "r", "open-find", calls))
    assert m.ops == ["search", "open", "find", "open", "find", "other", "open", "open"]
    assert (m.materialized, m.revisited, m.revisit_rate) == (2, 1, 0.5)
    assert (m.n_select, m.n_extract) == (4, 2)
    assert m.fetched_sources == [A, B] and m.revisited_sources == [A] and m.seen_sources == [A, B]
    assert m.grep_patterns == []  # find patterns are not grep patterns


def test_visit_revisit(tmp_path: Path) -> None:
    calls = [
        ("visit", {"url": A, "goal": "g"}, "chunk", False, {"source": A}),
        ("visit", {"url": B, "goal": "g"}, "chunk", False, {"source": B}),
        ("visit", {"url": A, "goal": "g2"}, "chunk", False, {"source": A}),  # revisit of A
        ("visit", {"url": A, "goal": "g3"}, "chunk", False, {"source": A}),  # again A, nothing between
        ("visit", {"url": C, "goal": "g"}, "Error: refused", True, {}),
    ]
    m = run_metrics(mk_run(tmp_path / "r", "visit-snippet", calls))
    # materialized {A, B}; A revisited, B visited once → 1/2
    assert (m.materialized, m.revisited, m.revisit_rate) == (2, 1, 0.5)
    s = summarize([m])[0]
    assert s.revisit_rate == 0.5 and s.select == 5.0 and s.extract == 0.0


def test_bash_c_counts_inside_the_string(tmp_path: Path) -> None:
    calls = [("bash", {"command": "bash -c 'search \"foo bar\"'"}, SEARCH_OBS, False, {}),
             ("bash", {"command": "sh -c \"grep -n foo /work/a.txt && sed -n '3,7p' /work/a.txt\""}, "3:foo", False, {})]
    d = mk_run(tmp_path / "r", "shell", calls)
    (d / "workspace").mkdir()
    (d / "workspace" / "a.txt").write_text("URL: u\nTitle: t\nRetrieved: r\n\nfoo")
    m = run_metrics(d)
    assert m.ops == ["search", "grep", "read"] and m.n_search == 1 and m.n_other == 0
    assert m.seen_sources == [A, B] and m.grep_patterns == ["foo"] and m.read_windows == [(3, 5)]


def test_analysis_numbers_both_interfaces(tmp_path: Path) -> None:
    sh = run_metrics(shell_run(tmp_path), profile="shell")
    ft = run_metrics(fte_run(tmp_path), profile="fte")
    # shell: `grep -n foo /work/a.txt` (one file), `grep -rn bar /work` (whole cache); `cat … | grep -i baz` filters
    assert sh.grep_patterns == ["foo", "bar"] and sh.grep_scopes == {"one": 1, "all": 1}
    # sed -n 1,20p → (1, 20); head -n 5 → (–, 5); cat → (–, –)
    assert sh.read_windows == [(1, 20), (None, 5), (None, None)]
    assert (sh.n_unique_fetch, sh.n_fetch_repeat) == (3, 1)
    # fte: grep foo (whole cache), grep b+ in b (one file), grep "(" (an error: pattern kept, no scope)
    assert ft.grep_patterns == ["foo", "b+", "("] and ft.grep_scopes == {"all": 1, "one": 1}
    assert ft.read_windows == [(None, None), (1, None)] and (ft.n_unique_fetch, ft.n_fetch_repeat) == (2, 1)
    s = {p.profile: p for p in summarize([sh, ft])}
    S, F = s["shell"], s["fte"]
    assert S.grep_pattern_chars == {"p10": 3.0, "p25": 3.0, "p50": 3.0, "p75": 3.0, "p90": 3.0}
    assert S.grep_regex_share == 0.0 and S.grep_whole_cache_call_share == 0.5 and S.grep_single_file_call_share == 0.5
    # fte pattern lengths 3, 2, 1 → sorted 1,2,3: p25 = 1.5, p50 = 2, p90 = 2.8; "b+" and "(" are regexes
    assert F.grep_pattern_chars["p25"] == 1.5 and F.grep_pattern_chars["p90"] == pytest.approx(2.8)
    assert F.grep_regex_share == pytest.approx(2 / 3)
    # reads: shell offsets {1} of 3 reads, limits {20, 5}: p50 = 12.5, p90 = 5 + 0.9 × 15 = 18.5
    assert (S.read_offset_share, S.read_limit_share) == (pytest.approx(1 / 3), pytest.approx(2 / 3))
    assert S.read_limits["p50"] == 12.5 and S.read_limits["p90"] == pytest.approx(18.5) and S.read_offsets["p50"] == 1
    assert (F.read_offset_share, F.read_limit_share, F.read_limits) == (0.5, 0.0, {})
    # Table 10 and 3
    assert (S.fetch, S.unique_fetches, S.repeated_fetches, S.fetch_repeat_pct) == (4.0, 3.0, 1.0, 25.0)
    assert (F.fetch, F.unique_fetches, F.repeated_fetches) == (3.0, 2.0, 1.0)
    # Table 9: 14 shell actions → 13 bigrams, fetch→fetch twice = 15.38 %
    assert dict(S.bigram_pct)["fetch→fetch"] == pytest.approx(100 * 2 / 13)
    assert dict(F.trigram_pct)["fetch→grep→read"] == pytest.approx(100 * 2 / 8)


def test_infra_failures_left_out_and_counted(tmp_path: Path) -> None:
    root = tmp_path / "s" / "runs" / "fte"
    mk_run(root / "q1" / "r0", "fte", [("search", {"query": "q"}, "x", False, {})], correct=True)
    mk_run(root / "q2" / "r0", "fte", [("search", {"query": "q"}, "x", False, {})], stop="endpoint_unavailable",
           correct=False)  # judged, but not a result
    mk_run(root / "q3" / "r0", "fte", [], stop="sandbox_unavailable")
    mk_run(root / "q4" / "r0", "fte", [("search", {"query": "q"}, "x", False, {})], stop=None)  # no result.json
    mk_run(root / "q5" / "r0", "fte", [("search", {"query": "q"}, "x", False, {})], stop="max_turns", correct=False)
    rep = write_report([tmp_path / "s"], tmp_path / "out")
    p = rep.profiles[0]
    assert (p.runs, p.failed, p.judged, p.accuracy, p.search) == (5, 3, 2, 0.5, 1.0)
    assert any("3 of 5 run(s) failed (infrastructure)" in w for w in rep.warnings)
    assert "| fte | m | 5 | 3 | 2 | 50.0% |" in rep.markdown.read_text()
    rows = rep.per_question.read_text().splitlines()
    assert rows == ["question,fte", "q1,correct", "q2,failed", "q3,failed", "q4,failed", "q5,wrong"]


def test_warns_when_a_profile_made_no_tool_calls(tmp_path: Path) -> None:
    mk_run(tmp_path / "s" / "runs" / "shell" / "q1" / "r0", "shell", [])
    mk_run(tmp_path / "s" / "runs" / "fte" / "q1" / "r0", "fte", [("search", {"query": "q"}, "x", False, {})])
    rep = write_report([tmp_path / "s"], tmp_path / "out")
    assert [w for w in rep.warnings if "tool call" in w] == [rep.warnings[0]] and rep.warnings[0].startswith("shell:")
    assert "> **Warning:** shell: none of its 1 finished run(s) made a tool call" in rep.markdown.read_text()
    assert "class='warn'" in rep.html.read_text()
    assert json.loads(rep.metrics.read_text())["warnings"] == rep.warnings


def test_model_column_order_and_config_digests(tmp_path: Path) -> None:
    for i, (profile, model) in enumerate([("fte", "big"), ("shell", "big"), ("fte", "small"), ("shell", "small")]):
        mk_run(tmp_path / f"s{i}" / "runs" / profile / "q1" / "r0", profile, [], model=model)
    rep = write_report([tmp_path / f"s{i}" for i in range(4)], tmp_path / "out")
    assert [(p.profile, p.model) for p in rep.profiles] == [("shell", "big"), ("fte", "big"), ("shell", "small"),
                                                            ("fte", "small")]
    md = rep.markdown.read_text()
    assert "| Profile | Model | Runs |" in md and "| shell | small | 1 |" in md
    rep = write_report([tmp_path / f"s{i}" for i in range(4)], tmp_path / "out2", order=["fte", "shell"])
    assert [(p.profile, p.model) for p in rep.profiles][:2] == [("fte", "big"), ("shell", "big")]
    # the same profile and model with two config digests: two rows
    root = tmp_path / "d" / "runs" / "fte"
    mk_run(root / "q1" / "r0", "fte", [], digest="aaaa1111ffff")
    mk_run(root / "q2" / "r0", "fte", [], digest="bbbb2222ffff")
    runs = collect([tmp_path / "d"])
    assert [(s.label, s.config_digest, s.runs) for s in summarize(runs)] == [
        ("fte · cfg aaaa1111", "aaaa1111ffff", 1), ("fte · cfg bbbb2222", "bbbb2222ffff", 1)]
    same = tmp_path / "e" / "runs" / "fte"
    mk_run(same / "q1" / "r0", "fte", [], digest="aaaa1111ffff")
    mk_run(same / "q2" / "r0", "fte", [], digest="aaaa1111ffff")
    assert [(s.label, s.config_digest, s.runs) for s in summarize(collect([tmp_path / "e"]))] == [("fte", None, 2)]
