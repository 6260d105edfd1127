"""Metrics on hand-made run directories, with hand-computed expected values for both interfaces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fte_shell.metrics import (
    Action,
    collect,
    ngrams,
    revisited_docs,
    run_metrics,
    summarize,
)


def rec(name: str, chars: int, new: bool, url: str) -> str:
    """A fetch record line in the workspace's format."""
    return f'/work/{name}  {chars:,} chars  {"new" if new else "held"}  {url}  "Title {name}"'


def write_run(d: Path, profile: str, calls: list[tuple[str, dict, str, bool]], files: dict[str, str],
              answer: str | None = "42", tokens: int = 100) -> Path:
    """A run directory: start, one model_call + tool_call per call, end, result.json, workspace files."""
    d.mkdir(parents=True)
    ev = [{"type": "start", "t": 0, "question": "q?", "profile": profile, "model": "m", "config": {},
           "system_prompt": "", "tools": []}]
    for i, (name, args, obs, err) in enumerate(calls, start=1):
        ev.append({"type": "model_call", "t": i, "turn": i, "latency_s": 0.1,
                   "usage": {"prompt_tokens": 8, "completion_tokens": 2, "total_tokens": 10},
                   "message": {"role": "assistant", "content": None, "tool_calls": []}})
        ev.append({"type": "tool_call", "t": i + 0.5, "turn": i, "id": f"c{i}", "name": name,
                   "arguments": args, "raw_arguments": json.dumps(args), "observation": obs, "error": err,
                   "duration_s": 0.01, "meta": {}})
    ev.append({"type": "end", "t": 99, "stop_reason": "answer", "answer": answer})
    (d / "trajectory.jsonl").write_text("".join(json.dumps(e) + "\n" for e in ev))
    (d / "result.json").write_text(json.dumps({
        "question": "q?", "answer": answer, "profile": profile, "model": "m", "turns": len(calls) + 1,
        "stop_reason": "answer", "tool_calls": {}, "usage": {"prompt_tokens": tokens - 20,
        "completion_tokens": 20, "total_tokens": tokens}, "wall_s": 12.5, "run_id": "x",
        "started_at": "2026-11-30T13:00:00Z", "meta": {}}))
    ws = d / "workspace"
    ws.mkdir()
    for name, body in files.items():
        (ws / name).write_text(f"URL: https://x.org/{name}\nTitle: T\nRetrieved: 2026-11-30T13:00:00Z\n\n{body}")
    return d


FILES = {"a.txt": "a" * 1000, "b.txt": "b" * 250, "c.txt": "line\n" * 20}  # bodies: 1000 + 250 + 100 chars


def shell_run(tmp: Path) -> Path:
    b = "bash"
    calls = [
        (b, {"command": 'search "foo bar"'}, "1. Foo\n   https://x.org/a\n", False),
        (b, {"command": "fetch https://x.org/a && fetch https://x.org/b"},
         rec("a.txt", 1000, True, "https://x.org/a") + "\n" + rec("b.txt", 250, True, "https://x.org/b"), False),
        (b, {"command": "grep -n foo /work/a.txt | head -5"}, "3:foo", False),
        (b, {"command": "sed -n 1,20p /work/b.txt"}, "bbbb", False),
        (b, {"command": "grep -rn bar /work"}, "/work/a.txt:3:bar\n/work/b.txt:9:bar", False),
        (b, {"command": "fetch https://x.org/a; fetch https://x.org/c"},
         rec("a.txt", 1000, False, "https://x.org/a") + "\n" + rec("c.txt", 100, True, "https://x.org/c"), False),
        (b, {"command": "cd /work && head -n 5 c.txt && wc -l *.txt"}, "line\n", False),
        (b, {"command": "cat /work/a.txt | grep -i baz"}, "", False),
    ]
    return write_run(tmp / "runs" / "shell" / "q1" / "r0", "shell", calls, FILES, tokens=500)


def fte_run(tmp: Path) -> Path:
    calls = [
        ("search", {"query": "foo bar"}, "1. Foo", False),
        ("fetch", {"url": "https://x.org/a"}, rec("a.txt", 1000, True, "https://x.org/a"), False),
        ("fetch", {"url": "https://x.org/b"}, rec("b.txt", 250, True, "https://x.org/b"), False),
        ("grep", {"pattern": "foo"}, "/work/a.txt:\n3: foo", False),
        ("read", {"path": "/work/b.txt"}, "1: bbb\n(Showing lines 1-1 of 1.)", False),
        ("fetch", {"url": "https://x.org/a"}, rec("a.txt", 1000, False, "https://x.org/a"), False),
        ("grep", {"pattern": "b+", "path": "/work/b.txt"}, "/work/b.txt:\n1: bbb", False),
        ("read", {"path": "/work/a.txt", "offset": 1}, "1: aaa", False),
        ("list_fetched", {}, "/work/a.txt ...\n/work/b.txt ...", False),
        ("grep", {"pattern": "("}, "Error: bad regex", True),
    ]
    files = {k: v for k, v in FILES.items() if k != "c.txt"}
    return write_run(tmp / "runs" / "fte" / "q1" / "r0", "fte", calls, files, tokens=300)


def test_shell_run_metrics(tmp_path: Path) -> None:
    m = run_metrics(shell_run(tmp_path), profile="shell", qid="q1")
    assert m.ops == ["search", "fetch", "fetch", "grep", "other", "read", "grep", "fetch", "fetch",
                     "other", "read", "list", "read", "other"]
    assert (m.calls, m.n_search, m.n_select, m.n_extract) == (8, 1, 4, 5)
    assert (m.n_grep, m.n_read, m.n_list, m.n_other) == (2, 3, 1, 3)
    assert (m.n_fetch, m.n_fetch_repeat, m.n_whole_cache_grep) == (4, 1, 1)
    # a: grep(3) … read b(4) … grep -r(5) → revisited; b: read(4), grep(5) adjacent → not; c: read once
    assert (m.materialized, m.revisited) == (3, 1)
    assert m.revisit_rate == pytest.approx(1 / 3)
    assert (m.cache_files, m.cache_chars) == (3, 1350)
    assert (m.total_tokens, m.prompt_tokens, m.wall_s, m.answered) == (500, 480, 12.5, True)


def test_fte_run_metrics(tmp_path: Path) -> None:
    m = run_metrics(fte_run(tmp_path), profile="fte", qid="q1")
    assert m.ops == ["search", "fetch", "fetch", "grep", "read", "fetch", "grep", "read", "list", "grep"]
    assert (m.calls, m.n_search, m.n_select, m.n_extract) == (10, 1, 3, 5)
    assert (m.n_grep, m.n_read, m.n_list, m.n_fetch, m.n_fetch_repeat) == (3, 2, 1, 3, 1)
    assert m.n_whole_cache_grep == 1
    # a: grep(4), read b(5), read a(8) → revisited; b: read(5), fetch a(6), grep b(7) → revisited
    assert (m.materialized, m.revisited, m.revisit_rate) == (2, 2, 1.0)
    assert (m.cache_files, m.cache_chars) == (2, 1250)


def test_summary_and_ngrams(tmp_path: Path) -> None:
    shell_run(tmp_path)
    fte_run(tmp_path)
    runs = collect([tmp_path])
    s = {p.profile: p for p in summarize(runs)}
    assert set(s) == {"shell", "fte"}
    sh, ft = s["shell"], s["fte"]
    assert (sh.runs, sh.failed, sh.search, sh.select, sh.extract) == (1, 0, 1.0, 4.0, 5.0)
    assert sh.grep_read_ratio == pytest.approx(2 / 3)
    assert sh.fetch_repeat_pct == pytest.approx(25.0)
    assert sh.whole_cache_grep_share == 1.0
    assert dict(sh.bigrams)["fetch→fetch"] == 2 and dict(sh.bigrams)["other→read"] == 2
    assert sh.distribution["fetch"] == pytest.approx(4 / 14)
    assert ft.grep_read_ratio == pytest.approx(1.5)
    assert ft.fetch_repeat_pct == pytest.approx(100 / 3)
    assert ft.accuracy is None and ft.judged == 0
    assert dict(ft.trigrams)["search→fetch→fetch"] == 1
    assert ngrams(["a", "b", "a", "b"], 2)[("a", "b")] == 2


def A(*docs: str, op: str = "read") -> Action:
    return Action(turn=0, call=0, op=op, tool=op, docs=list(docs))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("seq", "expected"),
    [
        ([A("a"), A("a"), A("a")], set()),  # paging through one document is not a revisit
        ([A("a"), A("b"), A("a")], {"a"}),  # the basic revisit
        ([A("a", op="fetch"), A("b", op="fetch"), A("a")], set()),  # one extraction only
        ([A("a"), A("b", op="fetch"), A("a")], {"a"}),  # a fetch of another document is a touch
        ([A("a", "b", op="grep"), A("a")], set()),  # nothing strictly in between
        ([A("a"), A("a", "b", op="grep"), A("a")], set()),  # b touched together with a, never between
        ([A("a"), A("x"), A("a")], {"a"}),  # x (never materialized) still counts as a touch
        ([A("a"), A(op="search"), A("a")], set()),  # a search touches no document
        ([A("a"), A("b"), A("a"), A("b")], {"a", "b"}),
    ],
)
def test_revisit_edge_cases(seq: list[Action], expected: set[str]) -> None:
    assert revisited_docs(seq, {"a", "b"}) == expected


def test_revisit_needs_materialized(tmp_path: Path) -> None:
    assert revisited_docs([A("z"), A("b"), A("z")], {"b"}) == set()
    d = write_run(tmp_path / "r", "snippet-only", [("search", {"query": "x"}, "1. X", False)], {})
    m = run_metrics(d)
    assert m.revisit_rate is None and m.materialized == 0 and m.profile == "snippet-only"


def test_incomplete_run_and_torn_line(tmp_path: Path) -> None:
    d = write_run(tmp_path / "runs" / "shell" / "q9" / "r1", "shell",
                  [("bash", {"command": "ls /work"}, "", False)], {})
    (d / "result.json").unlink()
    with (d / "trajectory.jsonl").open("a") as f:
        f.write('{"type": "tool_ca')  # killed mid-write
    runs = collect([tmp_path])
    assert len(runs) == 1 and runs[0].stop_reason == "incomplete" and runs[0].rep == 1
    s = summarize(runs)[0]
    assert (s.runs, s.failed, s.search) == (1, 1, None)


def test_judgement_prefers_llm(tmp_path: Path) -> None:
    d = fte_run(tmp_path)
    (d / "judgement.json").write_text(json.dumps({"match": {"correct": False, "f1": 0.5},
                                                  "llm": {"correct": True}}))
    m = run_metrics(d)
    assert (m.correct, m.f1) == (True, 0.5)
