"""The context arms' numbers on hand-made run directories with ``context_edit`` events, against
hand-computed values, for both interfaces: edits, the cached prompt share, the behaviour before/after the
first edit (re-fetches, whole-cache greps, greps/reads of cleared documents), stops per arm, rows per arm."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fte_shell.metrics import run_metrics, summarize
from fte_shell.metrics.arms import summarize_arm
from fte_shell.metrics.groups import group_runs
from fte_shell.record.rundir import arm_name, find_runs
from fte_shell.report.build import write_report
from tests.test_metrics import FILES, fte_run, shell_run, write_run


def edit(turn: int, cleared: list[str], before: int, after: int, strategy: str) -> dict[str, Any]:
    return {"type": "context_edit", "t": turn, "turn": turn, "strategy": strategy, "messages_before": 20,
            "messages_after": 10, "tokens_before": before, "tokens_after": after, "cleared": cleared}


def with_context(run: Path, context: dict[str, Any], edits: list[dict[str, Any]], cached: dict[int, int],
                 stop: str = "answer") -> Path:
    """Give a hand-made run its ``[agent.context]``, context edits (each before the model call of its turn),
    the cached prompt tokens the server reported per turn (turns not named report nothing), a stop reason."""
    events = [json.loads(line) for line in (run / "trajectory.jsonl").read_text().splitlines()]
    events[0]["config"] = {"agent": {"context": context}}
    out = []
    for ev in events:
        if ev["type"] == "model_call":
            out += [e for e in edits if e["turn"] == ev["turn"]]
            if ev["turn"] in cached:
                ev["usage_details"] = {**ev["usage"], "prompt_tokens_details": {"cached_tokens": cached[ev["turn"]]}}
        out.append(ev)
    (run / "trajectory.jsonl").write_text("".join(json.dumps(e) + "\n" for e in out))
    result = json.loads((run / "result.json").read_text())
    (run / "result.json").write_text(json.dumps({**result, "stop_reason": stop}))
    return run


def moved(run: Path, arm: str) -> Path:
    """The run moved to the arm's directory of its sweep (``runs/<arm>/q1/r0``)."""
    dest = run.parents[2] / arm / run.parent.name / run.name
    dest.parent.mkdir(parents=True)
    return run.rename(dest)


def fte_keep_recent(tmp: Path) -> Path:
    # fte_run's calls c1..c10 are turns 1..10: search, fetch a (new), fetch b (new), whole-cache grep (a.txt),
    # read b, fetch a (held), grep b.txt, read a, list_fetched, grep (error).
    # edit 1 at turn 6 clears c2 (fetch a) -> a.txt cleared; edit 2 at turn 9 clears c3, c5 -> b.txt cleared.
    run = moved(fte_run(tmp), arm_name("fte", "keep_recent:2"))
    return with_context(run, {"strategy": "keep_recent", "keep": 2},
                        [edit(6, ["c2"], 5000, 3000, "keep_recent"), edit(9, ["c3", "c5"], 4000, 3500, "keep_recent")],
                        cached={1: 6, 2: 6, 3: 6, 4: 6, 5: 6, 6: 0, 7: 0, 8: 0, 9: 0})


def shell_discard_all(tmp: Path) -> Path:
    # shell_run's turns: 1 search, 2 fetch a + b (new), 3 grep a.txt, 4 sed b.txt, 5 grep -rn /work (whole
    # cache), 6 fetch a (held) + c (new), 7 head c.txt, wc, 8 cat a.txt | grep. One edit at turn 6 clears c1..c5.
    run = moved(shell_run(tmp), arm_name("shell", "discard_all"))
    return with_context(run, {"strategy": "discard_all"},
                        [edit(6, ["c1", "c2", "c3", "c4", "c5"], 900, 100, "discard_all")], cached={}, stop="max_turns")


def test_fte_edits_split_and_cleared_recalls(tmp_path: Path) -> None:
    m = run_metrics(fte_keep_recent(tmp_path), profile="fte", qid="q1")
    e = m.edits
    assert m.context == "keep_recent:2"
    assert (e.edits, e.first_edit_turn, e.tokens_cleared_max) == (2, 6, max(5000 - 3000, 4000 - 3500))
    # the held fetch of a.txt is at turn 6 (after); the whole-cache grep at turn 4 (before)
    assert (m.n_fetch_repeat, e.fetch_repeat_after) == (1, 1)
    assert (m.n_whole_cache_grep, e.whole_cache_grep_after) == (1, 0)
    # turn 7's grep of b.txt precedes b's clearing (turn 9): not a recall; turn 8's read of a.txt is one;
    # turn 10's grep failed
    assert e.cleared_recalls == 1
    # turns 1-5 served 6 of 8 prompt tokens from the cache, 6-9 none, turn 10 said nothing
    assert (e.cached_prompt_tokens, e.cache_known_prompt_tokens) == (30, 72)
    assert (e.cached_prompt_tokens_after, e.cache_known_prompt_tokens_after) == (0, 32)  # turns 6-9


def test_shell_edits_split_and_cleared_recalls(tmp_path: Path) -> None:
    m = run_metrics(shell_discard_all(tmp_path), profile="shell", qid="q1")
    e = m.edits
    assert (m.context, m.stop_reason) == ("discard_all", "max_turns")
    assert (e.edits, e.first_edit_turn, e.tokens_cleared_max) == (1, 6, 800)
    assert (m.n_fetch_repeat, e.fetch_repeat_after) == (1, 1)
    assert (m.n_whole_cache_grep, e.whole_cache_grep_after) == (1, 0)
    # a.txt and b.txt were cleared at turn 6; head c.txt (turn 7) is not a recall, cat a.txt (turn 8) is
    assert e.cleared_recalls == 1
    assert (e.cached_prompt_tokens, e.cache_known_prompt_tokens) == (0, 0)


def test_rows_per_arm_and_arm_numbers(tmp_path: Path) -> None:
    fte_keep_recent(tmp_path)
    shell_discard_all(tmp_path)
    plain = fte_run(tmp_path)  # fte, keep_all: runs/fte/q1/r0, no edits, no cache reported
    second = with_context(write_run(tmp_path / "runs" / arm_name("fte", "keep_recent:2") / "q2" / "r0", "fte",
                                    [("search", {"query": "x"}, "1. X", False)], FILES),
                          {"strategy": "keep_recent", "keep": 2}, [], cached={1: 4}, stop="context_overflow")
    assert {(p, q) for _d, p, q, _r in find_runs(tmp_path)} == {("fte", "q1"), ("fte", "q2"), ("shell", "q1")}
    runs = [run_metrics(d, profile=p, qid=q) for d, p, q, _r in find_runs(tmp_path)]
    groups = group_runs(runs)
    assert set(groups) == {"fte · keep_all", "fte · keep_recent:2", "shell · discard_all"}
    assert [r.run_dir for r in groups["fte · keep_all"]] == [str(plain)]
    assert {s.label: s.context for s in summarize(runs)} == {
        "fte · keep_all": "keep_all", "fte · keep_recent:2": "keep_recent:2", "shell · discard_all": "discard_all"}

    a = summarize_arm("fte · keep_recent:2", groups["fte · keep_recent:2"])
    assert second.exists() and a.results == 2
    assert a.overflow == 1
    assert (a.edited, a.edits, a.tokens_cleared) == (0.5, 1.0, 1000.0)
    assert a.turns == pytest.approx((11 + 2) / 2)  # result.json's turns: calls + 1
    assert a.cache_share == pytest.approx((30 + 4) / (72 + 8))
    assert a.cache_share_before == pytest.approx((30 + 4) / (40 + 8)) and a.cache_share_after == 0.0
    assert (a.fetch_repeat_before, a.fetch_repeat_after) == (0.0, 0.5)
    assert (a.whole_cache_grep_before, a.whole_cache_grep_after) == (0.5, 0.0)
    assert a.cleared_recalls == 0.5
    k = summarize_arm("fte · keep_all", groups["fte · keep_all"])
    assert (k.edited, k.cache_share, k.fetch_repeat_before, k.fetch_repeat_after) == (0.0, None, 1.0, 0.0)
    s = summarize_arm("shell · discard_all", groups["shell · discard_all"])
    assert s.overflow == 0
    rows = {p.label: p.stops for p in summarize(runs)}  # the arm table's Stops: the row's own counts
    assert rows["fte · keep_recent:2"] == {"answer": 1, "context_overflow": 1}
    assert rows["shell · discard_all"] == {"max_turns": 1}

    rep = write_report([tmp_path], tmp_path / "report")
    md = rep.markdown.read_text()
    assert "| fte · keep_recent:2 | 2 | 0 | – | – | 200 | 42.5% | – | 6.5 | 1 | answer 1, context_overflow 1 | 50.0% | 1.00 | 1,000 |" in md
    assert "| shell · discard_all | – | – | 0.00 | 1.00 | 1.00 | 0.00 | 1.00 |" in md
    assert "| fte · keep_recent:2 | 70.8% | 0.0% | 0.00 | 0.50 | 0.50 | 0.00 | 0.50 |" in md
    assert "| fte · keep_all | scripted" not in md and "| fte · keep_all | m |" in md  # the main table's rows
    arms = json.loads(rep.metrics.read_text())["arms"]
    assert [x["label"] for x in arms] == ["shell · discard_all", "fte · keep_all", "fte · keep_recent:2"]


def test_no_arms_section_without_strategies(tmp_path: Path) -> None:
    fte_run(tmp_path)
    rep = write_report([tmp_path], tmp_path / "report")
    assert "## Context arms" not in rep.markdown.read_text() and rep.arms == []
    assert [s.label for s in rep.profiles] == ["fte"]


def test_exports_name_the_strategy_and_carry_the_edits(tmp_path: Path) -> None:
    from inspect_ai.log import read_eval_log

    from fte_shell.export.atif_trajectory import export_atif, loads
    from fte_shell.export.inspect_log import export_inspect

    fte_keep_recent(tmp_path)
    fte_run(tmp_path)  # the same question, keep_all: another arm, another eval log
    logs = export_inspect([tmp_path], tmp_path / "inspect", fmt="json")
    assert sorted(p.name for p in logs) == ["runs_fte-keep_recent-2_m.json", "runs_fte_m.json"]
    log = read_eval_log(str(tmp_path / "inspect" / "runs_fte-keep_recent-2_m.json"))
    assert log.eval.solver == "fte" and log.eval.solver_args["context"] == "keep_recent:2"
    assert log.eval.solver_args["context_config"] == {"strategy": "keep_recent", "keep": 2}
    assert log.plan.steps[0].params == {"profile": "fte", "context": "keep_recent:2"}
    (s,) = log.samples or []
    assert s.metadata["fte_shell"]["context"] == "keep_recent:2"
    edits = [e for e in s.events if e.event == "info" and e.source == "fte-shell:context_edit"]
    assert [(e.data["turn"], e.data["cleared"], e.data["tokens_before"]) for e in edits] == [
        (6, ["c2"], 5000), (9, ["c3", "c5"], 4000)]
    plain = read_eval_log(str(tmp_path / "inspect" / "runs_fte_m.json"))
    assert plain.eval.solver_args["context"] == "keep_all"
    assert not [e for e in (plain.samples or [])[0].events if e.event == "info" and "context_edit" in (e.source or "")]

    files = export_atif([tmp_path], tmp_path / "atif")
    assert sorted(str(p.relative_to(tmp_path / "atif")) for p in files) == ["fte-keep_recent-2/q1/r0.json",
                                                                            "fte/q1/r0.json"]
    traj = loads((tmp_path / "atif" / "fte-keep_recent-2" / "q1" / "r0.json").read_text())
    assert traj.agent.extra["context"] == "keep_recent:2"
    notes = [st.message for st in traj.steps if st.source == "system" and "context edit" in str(st.message)]
    assert notes == ["context edit (keep_recent) before turn 6: 20 → 10 messages, ~5,000 → ~3,000 tokens; "
                     "cleared 1 tool call(s): c2",
                     "context edit (keep_recent) before turn 9: 20 → 10 messages, ~4,000 → ~3,500 tokens; "
                     "cleared 2 tool call(s): c3, c5"]


def test_an_event_that_takes_nothing_out_is_not_an_edit(tmp_path: Path) -> None:
    run = moved(fte_run(tmp_path), arm_name("fte", "discard_all"))
    note_only = {**edit(1, [], 100, 120, "discard_all"), "messages_before": 2, "messages_after": 2}
    with_context(run, {"strategy": "discard_all"}, [note_only, edit(6, ["c2"], 900, 300, "discard_all")], cached={})
    e = run_metrics(run, profile="fte", qid="q1").edits
    assert (e.edits, e.first_edit_turn, e.tokens_cleared_max, e.fetch_repeat_after) == (1, 6, 600, 1)
