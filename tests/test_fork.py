"""Fork a run at turn K (fte_shell.episode.fork, ``fte-shell fork``, ``bench --fork-from``): the child replays
its parent's first K turns without a model call — the loopback model server counts every request — against
the parent's WARC snapshot of loopback pages (the page server is stopped first), its state equals the
parent's (observations byte for byte, workspace sha256, the shell's cwd and environment), then it goes on
live; the parent's directory is never written; a parent without a snapshot is refused."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import trajectory
from test_events_known import check_known
from typer.testing import CliRunner

from fte_shell import Episode
from fte_shell.cli import app
from fte_shell.config import RunConfig
from fte_shell.errors import ConfigError
from fte_shell.record.rundir import find_runs
from fte_shell.runner import fork_run, run_question
from fte_shell.standins.server import ScriptedServer, ScriptToolCall, ScriptTurn
from fte_shell.viewer import Catalog
from tests.servers import FakeSerper, LoopbackServer

Q = "Who dredged the Tern Quay harbour?"
HARBOUR = """<html><head><title>Tern Quay harbour</title></head><body><main>
<p>The Tern Quay harbour was dredged in 1887 by the engineer Lio Brand.</p>
<p>Its breakwater is 640 metres long.</p></main></body></html>"""
BREAKWATER = """<html><head><title>Breakwaters of Tern Quay</title></head><body><article>
<p>The breakwater of the Tern Quay harbour was rebuilt after the storm of 1903.</p></article></body></html>"""
CLEAN_ENV = {"OPENAI_BASE_URL": "", "OPENAI_API_KEY": "", "OPENAI_MODEL": "", "SERPER_API_KEY": ""}


def call(name: str, **args: Any) -> ScriptTurn:
    return ScriptTurn(tool_calls=[ScriptToolCall(name=name, arguments=args)])


def fte_script(base: str) -> list[ScriptTurn]:
    return [call("search", query="Tern Quay harbour"), call("fetch", url=f"{base}/tern-quay"),
            ScriptTurn(content="Let me look closer."),  # no tool call: a nudge, replayed too
            call("grep", pattern="dredged"), call("fetch", url=f"{base}/breakwater"),
            ScriptTurn(content="<answer>Lio Brand</answer>")]


def shell_script(base: str) -> list[ScriptTurn]:
    return [call("bash", command=f"cd /tmp && export FORK_X=one && fetch {base}/tern-quay"),
            call("bash", command="grep -c dredged /work/*.txt; mkdir -p notes && cd notes && export FORK_Y=two"),
            call("bash", command="pwd; \\builtin export -p | grep FORK_"),
            call("bash", command=f"fetch {base}/breakwater"),
            ScriptTurn(content="<answer>Lio Brand</answer>")]


def config(model_url: str, profile: str, snap: Path | None, web: dict[str, Any]) -> RunConfig:
    return RunConfig.model_validate({
        "model": {"base_url": model_url, "model": "scripted", "max_retries": 0, "backoff_s": 0.01},
        "agent": {"profile": profile, "max_turns": 20},  # no current_date: the fork takes the parent's
        "search": {"backend": "serper", "serper_url": web["serper"].url, "num_results": 2, "serper_api_key": "k"},
        "sandbox": {"fetch_policy": {"allow_private": [web["pages"].host_port]}},
        **({"snapshot": {"dir": str(snap)}} if snap is not None else {}),
    })


def tree(d: Path) -> dict[str, str]:
    """sha256 of every file under ``d`` (the parent must be left as it was)."""
    return {p.relative_to(d).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.rglob("*")) if p.is_file()}


def workspace(d: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted((d / "workspace").glob("*"))}


def tool_calls(d: Path, upto: int | None = None) -> list[tuple[int, str, str]]:
    return [(e["turn"], e["raw_arguments"], e["observation"]) for e in trajectory(d)
            if e["type"] == "tool_call" and (upto is None or e["turn"] <= upto)]


@pytest.fixture(scope="module")
def parents(tmp_path_factory: pytest.TempPathFactory, docker_ready: None) -> dict[str, Any]:
    """One parent per profile recorded with a WARC snapshot of loopback pages (and a loopback Serper),
    each server's requests kept; then the page server and Serper are stopped."""
    root = tmp_path_factory.mktemp("parents")
    pages = LoopbackServer().start()
    pages.route("/tern-quay", body=HARBOUR)
    pages.route("/breakwater", body=BREAKWATER)
    serper = FakeSerper([{"title": "Tern Quay harbour", "link": pages.url("/tern-quay"), "snippet": "dredged", "position": 1}])
    web = {"pages": pages, "serper": serper}
    out: dict[str, Any] = {"root": root, "web": web, "requests": {}}
    try:
        out["base"] = pages.base_url
        for profile, script in (("fte", fte_script(pages.base_url)), ("shell", shell_script(pages.base_url))):
            with ScriptedServer(script) as srv:
                res = run_question(Q, config(srv.base_url, profile, root / "snap", web), root / profile)
                assert res.stop_reason == "answer", profile
                out["requests"][profile] = srv.requests
        with ScriptedServer(fte_script(pages.base_url)) as srv:  # the same, without a snapshot
            run_question(Q, config(srv.base_url, "fte", None, web), root / "unsnapped")
    finally:
        pages.stop()
        serper.close()
    return out


@pytest.mark.parametrize(("profile", "k"), [("fte", 4), ("shell", 2)])
def test_fork_replays_without_the_model_and_its_state_equals_the_parents(
        parents: dict[str, Any], tmp_path: Path, profile: str, k: int) -> None:
    parent = parents["root"] / profile
    before = tree(parent)
    live = (fte_script if profile == "fte" else shell_script)(parents["base"])[k:]  # the parent's own later turns
    with ScriptedServer(live) as srv:
        res = fork_run(parent, k, tmp_path / "child", overrides={"model": {"base_url": srv.base_url}})
        # the prefix made no model call: the server saw only the live turns, and the first of them got
        # exactly the messages the parent's model got at turn K+1 (the conversation equals the parent's)
        assert len(srv.requests) == len(live)
        assert srv.requests[0]["messages"] == parents["requests"][profile][k]["messages"]
    child = tmp_path / "child"
    assert tree(parent) == before  # the parent was only read
    result = json.loads((child / "result.json").read_text())
    assert result["stop_reason"] == "answer" and result["answer"] == "Lio Brand"
    assert result["forked_from"]["run_dir"] == str(parent.resolve()) and result["forked_from"]["turn"] == k
    assert result["forked_from"]["equal"] is True
    events = trajectory(child)
    assert [e["turn"] for e in events if e["type"] == "model_call" and e.get("replayed")] == list(range(1, k + 1))
    fork = next(e for e in events if e["type"] == "fork")
    assert fork["equal"] and fork["mismatches"] == [] and fork["turn"] == k
    # the same observations, byte for byte, and (the parent followed the same script) the same files
    assert tool_calls(child) == tool_calls(parent)
    assert workspace(child) == workspace(parent)
    assert fork["checks"]["workspace"]["sha256"] == {n: h for n, h in workspace(parent).items()
                                                     if n in fork["checks"]["workspace"]["sha256"]}
    if profile == "shell":
        # the parent's turn 3 printed its cwd and environment; the child's probe at turn 2 found the same
        obs3 = next(o for t, _a, o in tool_calls(parent) if t == 3)
        shell = fork["checks"]["shell"]
        assert shell["cwd"] == shell["parent_cwd"] == "/tmp/notes" == obs3.splitlines()[0]
        assert {n: v for n, v in shell["env"].items() if n.startswith("FORK_")} == {"FORK_X": "one", "FORK_Y": "two"}
        assert 'declare -x FORK_X="one"' in obs3 and 'declare -x FORK_Y="two"' in obs3
    check_known(child)


def test_a_parent_without_a_snapshot_is_refused_and_says_how_to_record_one(parents: dict[str, Any], tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--snapshot DIR"):
        Episode.fork(parents["root"] / "unsnapped", 1, tmp_path / "child")
    r = CliRunner().invoke(app, ["fork", str(parents["root"] / "unsnapped"), "--at-turn", "1", "--out",
                                 str(tmp_path / "child2"), "--base-url", "http://127.0.0.1:9/v1"], env=CLEAN_ENV)
    assert r.exit_code == 2 and "--snapshot" in r.output and not (tmp_path / "child2").exists()
    with pytest.raises(ConfigError, match="ran 6 turn"):
        Episode.fork(parents["root"] / "fte", 7, tmp_path / "child3")


def test_a_prefix_that_differs_from_the_parents_stops_the_fork_before_any_model_call(
        parents: dict[str, Any], tmp_path: Path) -> None:
    import shutil

    bent = tmp_path / "bent"  # a copy of the fte parent whose recorded grep observation was altered
    shutil.copytree(parents["root"] / "fte", bent)
    lines = (bent / "trajectory.jsonl").read_text().splitlines()
    for i, line in enumerate(lines):
        ev = json.loads(line)
        if ev["type"] == "tool_call" and ev["name"] == "grep":
            ev["observation"] += "\nan extra line"
            lines[i] = json.dumps(ev)
    (bent / "trajectory.jsonl").write_text("\n".join(lines) + "\n")
    with ScriptedServer(["<answer>never asked</answer>"]) as srv:
        res = fork_run(bent, 4, tmp_path / "child", overrides={"model": {"base_url": srv.base_url}})
        assert srv.requests == []
    assert res.stop_reason == "fork_mismatch" and res.forked_from is not None and res.forked_from["equal"] is False
    fork = next(e for e in trajectory(tmp_path / "child") if e["type"] == "fork")
    assert fork["mismatches"] == ["turn 4: the observation of grep (call_4_0) differs from the parent's"]
    error = next(e for e in trajectory(tmp_path / "child") if e["type"] == "error")
    assert "differ from its parent's" in error["message"] and str(bent) in error["message"]


def test_bench_fork_from_forks_every_run_of_a_sweep(tmp_path: Path) -> None:
    """A tiny recorded sweep (two questions × fte, the scripted research policy, a WARC snapshot of loopback
    pages), then two fork sweeps of it with the page server stopped: at turn 2 (replayed, then live) and at
    turn 99 (past every run's end: each fork replays its parent whole and ends as it did, no model call)."""
    pages = LoopbackServer().start()
    pages.route("/tern-quay", body=HARBOUR)
    pages.route("/breakwater", body=BREAKWATER)
    serper = FakeSerper([{"title": "Tern Quay harbour", "link": pages.url("/tern-quay"), "snippet": "dredged", "position": 1},
                         {"title": "Breakwaters", "link": pages.url("/breakwater"), "snippet": "rebuilt", "position": 2}])
    qs = tmp_path / "qs.jsonl"
    qs.write_text(json.dumps({"id": "q1", "question": Q, "answer": "Lio Brand"}) + "\n"
                  + json.dumps({"id": "q2", "question": "When was the Tern Quay breakwater rebuilt?", "answer": "1903"}) + "\n")
    toml = tmp_path / "c.toml"
    toml.write_text(f'[search]\nbackend = "serper"\nserper_url = "{serper.url}"\nnum_results = 2\n'
                    f'[sandbox.fetch_policy]\nallow_private = ["{pages.host_port}"]\n')
    common = ["--scripted", "--no-progress", "--no-judge"]
    cli = CliRunner()
    try:
        r = cli.invoke(app, ["bench", f"jsonl:{qs}", "--profiles", "fte", "--config", str(toml), "--snapshot",
                             str(tmp_path / "snap"), "--out", str(tmp_path / "parent"), *common],
                       env={**CLEAN_ENV, "SERPER_API_KEY": "k"})
        assert r.exit_code == 0, r.output
    finally:
        pages.stop()
        serper.close()
    parent = tmp_path / "parent"
    before = tree(parent)
    forks = [*common, "--snapshot-mode", "replay", "--endpoint-wait", "0"]  # the rest replayed too: no web, no key
    r = cli.invoke(app, ["bench", "--fork-from", str(parent), "--at-turn", "2", "--out", str(tmp_path / "k2"),
                         "--max-turns", "30", *forks], env=CLEAN_ENV)
    assert r.exit_code == 0, r.output
    assert "2 run(s) finished now (2 answered" in r.output
    r = cli.invoke(app, ["bench", "--fork-from", str(parent), "--at-turn", "99", "--out", str(tmp_path / "k99"),
                         *forks], env=CLEAN_ENV)
    assert r.exit_code == 0, r.output
    # --context: every arm forks the parent's run of its profile (the parent has keep_all only)
    r = cli.invoke(app, ["bench", "--fork-from", str(parent), "--at-turn", "2", "--out", str(tmp_path / "kc"),
                         "--context", "keep_all,discard_all", *forks], env=CLEAN_ENV)
    assert r.exit_code == 0, r.output
    assert "4 run(s) finished now" in r.output
    for arm in ("fte", "fte@discard_all"):
        forked = json.loads((tmp_path / "kc" / "runs" / arm / "q1" / "r0" / "result.json").read_text())["forked_from"]
        assert forked["run_dir"] == str((parent / "runs" / "fte" / "q1" / "r0").resolve()) and forked["equal"] is True
    assert tree(parent) == before
    for qid in ("q1", "q2"):
        p_run = parent / "runs" / "fte" / qid / "r0"
        p_result = json.loads((p_run / "result.json").read_text())
        for name, turn in (("k2", 2), ("k99", p_result["turns"])):
            c_run = tmp_path / name / "runs" / "fte" / qid / "r0"
            result = json.loads((c_run / "result.json").read_text())
            assert result["forked_from"]["run_dir"] == str(p_run.resolve()), (name, qid)
            assert result["forked_from"]["turn"] == turn and result["forked_from"]["equal"] is True, (name, qid)
            assert result["meta"]["qid"] == qid and result["meta"]["fork_at_turn"] == int(name[1:])
            # the research policy is deterministic: continued from the same prefix, the same run again
            assert (result["answer"], result["turns"]) == (p_result["answer"], p_result["turns"]), (name, qid)
            assert tool_calls(c_run) == tool_calls(p_run) and workspace(c_run) == workspace(p_run)
            calls = [e for e in trajectory(c_run) if e["type"] == "model_call"]
            assert [e["turn"] for e in calls if e.get("replayed")] == list(range(1, turn + 1)), (name, qid)
    manifest = json.loads((tmp_path / "k2" / "sweep.json").read_text())
    assert manifest["bench"]["fork_from"] == str(parent) and manifest["bench"]["at_turn"] == 2
    assert manifest["profiles"] == ["fte"] and manifest["status"] == "finished"
    bad = cli.invoke(app, ["bench", "--fork-from", str(parent), "--out", str(tmp_path / "nok"), *common], env=CLEAN_ENV)
    assert bad.exit_code == 2 and "--at-turn" in bad.output
    # the viewer links parent and forks (fte_shell.viewer: the run view's data)
    from fte_shell.viewer.data import Catalog

    cat = Catalog([parent, tmp_path / "k2"])
    by_dir = {r.dir.resolve(): r for r in cat.runs}
    p_run, c_run = by_dir[(parent / "runs/fte/q1/r0").resolve()], by_dir[(tmp_path / "k2/runs/fte/q1/r0").resolve()]
    assert cat.detail(c_run)["forks"] == {"parent": {"run_dir": str(p_run.dir.resolve()), "turn": 2, "equal": True,
                                                     "key": p_run.key}, "children": []}
    assert cat.detail(p_run)["forks"] == {"parent": None, "children": [
        {"key": c_run.key, "turn": 2, "equal": True, "path": "runs/fte/q1/r0"}]}


def test_a_local_corpus_document_keeps_the_parents_retrieval_time(tmp_path: Path) -> None:
    """A corpus is not in the snapshot and its documents are stamped when materialized: the fork's copy of a
    document the parent fetched carries the parent's ``Retrieved:`` line (here set far in the past), so the
    files are the same bytes; and the parent's searches of the corpus are replayed from its snapshot."""
    from fte_shell.search.corpus import CorpusDoc, build_corpus

    corpus = build_corpus([CorpusDoc(docid="tern-quay", title="Tern Quay harbour",
                                     text="The Tern Quay harbour was dredged in 1887 by the engineer Lio Brand."),
                           CorpusDoc(docid="gulls", title="Gulls", text="Gulls nest on the breakwater.")], tmp_path / "corpus")
    script = [call("search", query="Tern Quay harbour dredged"), call("fetch", url="tern-quay"),
              call("grep", pattern="Retrieved|dredged"),
              ScriptTurn(content="<answer>Lio Brand</answer>")]
    cfg = {"model": {"model": "scripted", "max_retries": 0}, "agent": {"profile": "fte"},
           "search": {"backend": "local", "corpus": str(corpus)}, "snapshot": {"dir": str(tmp_path / "snap")}}
    with ScriptedServer(script) as srv:
        cfg["model"]["base_url"] = srv.base_url
        assert run_question(Q, RunConfig.model_validate(cfg), tmp_path / "parent").stop_reason == "answer"
    (doc,) = (tmp_path / "parent" / "workspace").glob("tern-quay-*.txt")
    text = doc.read_text()
    assert "\nRetrieved: 20" in text
    doc.write_text("\n".join("Retrieved: 2001-02-03T04:05:06Z" if line.startswith("Retrieved:") else line
                             for line in text.split("\n")))  # as if the parent had run long ago
    with ScriptedServer(script[2:]) as srv:
        res = fork_run(tmp_path / "parent", 2, tmp_path / "child", overrides={"model": {"base_url": srv.base_url}})
        assert len(srv.requests) == 2
    assert res.forked_from is not None and res.forked_from["equal"] is True, trajectory(tmp_path / "child")[-3:]
    assert workspace(tmp_path / "child") == workspace(tmp_path / "parent")
    grep = next(e for e in trajectory(tmp_path / "child") if e["type"] == "tool_call" and e["name"] == "grep")
    assert "2001-02-03T04:05:06Z" in grep["observation"]  # the live turn sees the parent's stamp, too


def test_fork_command_makes_n_forks(parents: dict[str, Any], tmp_path: Path) -> None:
    with ScriptedServer(["<answer>Lio Brand</answer>"] * 2) as srv:
        r = CliRunner().invoke(app, ["fork", str(parents["root"] / "fte"), "--at-turn", "5", "--out", str(tmp_path / "f"),
                                     "-n", "2", "--base-url", srv.base_url, "--max-turns", "6", "--context",
                                     "discard_all", "--quiet"], env=CLEAN_ENV)
        assert r.exit_code == 0, r.output
        assert len(srv.requests) == 2  # one live turn each
    assert r.output.count("at turn 5: its state equals the parent's") == 2
    for c in ("c1", "c2"):
        result = json.loads((tmp_path / "f" / c / "result.json").read_text())
        assert (result["answer"], result["turns"], result["forked_from"]["turn"]) == ("Lio Brand", 6, 5)
        assert result["context"] == "discard_all"  # the run flag --context, as docs/run.md "Fork a run" says
        assert result["config_digest"] != json.loads((parents["root"] / "fte" / "result.json").read_text())["config_digest"]
    # the forks' directory is one the viewer and report take, as a sweep's (c1 … cN, one run each)
    assert [(d.name, rep) for d, _p, _q, rep in find_runs(tmp_path / "f")] == [("c1", 0), ("c2", 1)]
    assert [r.dir.name for r in Catalog([tmp_path / "f"]).runs] == ["c1", "c2"]


def test_the_viewer_page_links_a_fork_and_its_parent(tmp_path: Path) -> None:
    """The static site of a parent and its fork (hand-made run directories): each run page names the other
    and links to it (a real browser)."""
    import os

    from playwright.sync_api import sync_playwright

    def run_dir(d: Path, forked_from: dict[str, Any] | None) -> None:
        d.mkdir(parents=True)
        ev = [{"type": "start", "t": 0, "question": Q, "profile": "fte", "model": "m"},
              {"type": "model_call", "turn": 1, "message": {"role": "assistant", "content": "<answer>Lio Brand</answer>"},
               "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}},
              {"type": "end", "stop_reason": "answer", "answer": "Lio Brand", "turns": 1, "wall_s": 1}]
        (d / "trajectory.jsonl").write_text("".join(json.dumps(e) + "\n" for e in ev))
        (d / "result.json").write_text(json.dumps({"question": Q, "answer": "Lio Brand", "profile": "fte", "turns": 1,
                                                   "stop_reason": "answer", "wall_s": 1,
                                                   **({"forked_from": forked_from} if forked_from else {})}))

    run_dir(tmp_path / "parent", None)
    run_dir(tmp_path / "child", {"run": "p1", "run_dir": str((tmp_path / "parent").resolve()), "turn": 1, "equal": True})
    r = CliRunner().invoke(app, ["view", str(tmp_path / "parent"), str(tmp_path / "child"), "--static", str(tmp_path / "site")])
    assert r.exit_code == 0, r.output
    site = (tmp_path / "site" / "index.html").as_uri()
    chromium = os.environ.get("FTE_CHROMIUM", "/usr/bin/chromium")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--headless", "--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(site + "#/run/1")
        page.wait_for_selector('body[data-ready="1"][data-view="run"] #forks', timeout=30_000)
        assert page.inner_text("#forks") == (f"forked from {(tmp_path / 'parent').resolve()} at turn 1: turns 1–1 replayed "
                                             "without the model, state equal to the parent's")
        assert page.get_attribute("#forks a", "href") == "#/run/0"
        page.goto(site + "#/run/0")
        page.wait_for_selector('body[data-ready="1"][data-view="run"] #forks', timeout=30_000)
        assert page.inner_text("#forks").strip() == f"forks: {(tmp_path / 'child').resolve()} (turn 1)"
        assert page.get_attribute("#forks a", "href") == "#/run/1"
        assert not errors
        browser.close()
