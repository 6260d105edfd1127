"""The ablation arms (paper Table 5) over a real workspace: fte-no-grep, fte-no-read, fte-single-grep —
their tools, their refusals (one line, ``meta.refused``), and that the metrics count a refusal."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from fte_shell.config import RunConfig
from fte_shell.metrics import run_metrics
from fte_shell.profiles import PROFILES, QuestionContext, make_profile
from fte_shell.profiles.base import ToolProfile
from fte_shell.workspace import Document, Workspace

WHEN = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)


def arm(name: str, ws: Workspace) -> ToolProfile:
    p = make_profile(name, QuestionContext(config=RunConfig(), workspace_dir=ws.root))
    assert isinstance(p, ToolProfile)
    return p


def names(p: ToolProfile) -> list[str]:
    return [t["function"]["name"] for t in p.tools()]


def test_arms_are_registered_with_their_tools(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws")
    assert {"fte-no-grep", "fte-no-read", "fte-single-grep"} <= set(PROFILES)
    assert names(arm("fte-no-grep", ws)) == ["fetch", "read", "list_fetched"]
    assert names(arm("fte-no-read", ws)) == ["fetch", "grep", "list_fetched"]
    single = arm("fte-single-grep", ws)
    assert names(single) == ["fetch", "grep", "read", "list_fetched"]
    grep = next(t for t in single.tools() if t["function"]["name"] == "grep")["function"]
    assert "ONE cached page" in grep["description"] and "Required here" in grep["parameters"]["properties"]["path"]["description"]
    assert "ONE cached page at a time" in single.system_addendum()
    assert "grep" not in arm("fte-no-grep", ws).system_addendum()
    r = arm("fte-no-grep", ws).execute("grep", {"pattern": "x"})
    assert r.error and r.output.startswith("Error: unknown tool 'grep'")


def test_single_grep_refuses_all_but_one_fetched_file(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws")
    a = ws.store(Document(source="https://example.org/a", kind="url", title="A", text="alpha beta\ngamma",
                          retrieved_at=WHEN)).path
    ws.store(Document(source="https://example.org/b", kind="url", title="B", text="beta", retrieved_at=WHEN))
    p = arm("fte-single-grep", ws)
    for args, why in [({"pattern": "beta"}, "needs the path of one fetched file"),
                      ({"pattern": "beta", "path": "/work"}, "needs the path of one fetched file"),
                      ({"pattern": "beta", "path": "/work/*.txt"}, "not a pattern of paths"),
                      ({"pattern": "beta", "path": "/work/nope.txt"}, "is not a fetched file")]:
        r = p.execute("grep", args)
        assert r.error and r.meta["refused"] is True and why in r.output and "\n" not in r.output, args
    ok = p.execute("grep", {"pattern": "beta", "path": a, "context": 0})
    assert not ok.error and ok.output.startswith(f"{a}:\n5: alpha beta")
    rel = p.execute("grep", {"pattern": "gamma", "path": Path(a).name, "context": 0})  # relative to /work
    assert not rel.error and "6: gamma" in rel.output


def test_refused_calls_are_counted(tmp_path: Path) -> None:
    d = tmp_path / "run"
    d.mkdir()
    ev = [{"type": "start", "profile": "fte-single-grep", "model": "m"},
          {"type": "tool_call", "turn": 1, "name": "grep", "arguments": {"pattern": "x"}, "error": True,
           "observation": "Error: grep needs the path of one fetched file here", "meta": {"refused": True}},
          {"type": "tool_call", "turn": 2, "name": "read", "arguments": {"path": "/work/a.txt"}, "error": True,
           "observation": "Error: unknown tool 'read'. Available tools: fetch, grep, list_fetched.", "meta": {}},
          {"type": "tool_call", "turn": 3, "name": "grep", "arguments": {"pattern": "(", "path": "/work/a.txt"},
           "error": True, "observation": "Error: invalid regular expression", "meta": {}}]
    (d / "trajectory.jsonl").write_text("".join(json.dumps(e) + "\n" for e in ev))
    (d / "result.json").write_text(json.dumps({"stop_reason": "answer", "answer": "x", "profile": "fte-single-grep"}))
    m = run_metrics(d)
    # 2 refused (the refused grep and the unknown tool); the bad regex is an error, not a refusal
    assert (m.n_refused, m.n_grep, m.n_read, m.n_whole_cache_grep, m.grep_scopes) == (2, 2, 1, 0, {})


@pytest.mark.parametrize("name", ["fte-no-grep", "fte-no-read", "fte-single-grep"])
def test_run_cli_and_scripted_policy_with_each_arm(tmp_path: Path, name: str) -> None:
    """`fte-shell run --profile ARM` works, and so does `bench --scripted`'s policy: it uses only the tools
    offered (the real CLI, loop, model server and fetch pipeline over a local corpus)."""
    from typer.testing import CliRunner

    from fte_shell.cli import app
    from fte_shell.search.corpus import CorpusDoc, build_corpus
    from fte_shell.standins.research import ResearchPolicy
    from fte_shell.standins.server import ScriptedServer

    corpus = build_corpus([CorpusDoc(docid="eiffel", title="Eiffel Tower", text="The Eiffel Tower opened in 1889.\n"
                                     "It is in Paris.", url="https://en.wikipedia.org/wiki/Eiffel_Tower"),
                           CorpusDoc(docid="louvre", title="Louvre", text="The Louvre is a museum in Paris.")],
                          tmp_path / "corpus", name="t", source="t")
    env = {"OPENAI_BASE_URL": "", "OPENAI_API_KEY": "", "OPENAI_MODEL": "", "SERPER_API_KEY": "", "COLUMNS": "200"}
    with ScriptedServer(policy=ResearchPolicy()) as srv:
        res = CliRunner().invoke(app, ["run", "In what year did the Eiffel Tower open?", "--profile", name,
                                       "--base-url", srv.base_url, "--model", "policy", "--corpus", str(corpus),
                                       "--out", str(tmp_path / "out"), "--max-turns", "12", "-q"], env=env)
    assert res.exit_code == 0, res.output
    m = run_metrics(tmp_path / "out")
    result = json.loads((tmp_path / "out" / "result.json").read_text())
    assert result["stop_reason"] == "answer" and m.n_fetch >= 1 and m.profile == name, result
    assert result["answer"] == "1889" or name == "fte-no-grep", result["answer"]
    if name == "fte-single-grep":  # the whole-cache grep is refused, then one grep per fetched file
        assert m.n_refused == 1 and m.grep_scopes == {"one": m.n_unique_fetch}
    else:
        assert m.n_refused == 0
