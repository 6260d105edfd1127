"""An Episode driven by hand (no loop, no model): the shell profile in a real box and the fte profile,
pages served on loopback; error results for the model's mistakes; the named stop when it is left without
finish, by an exception or by SIGTERM (and the box gone); several episodes in one event loop; the run
directory read by `fte-shell report` and the viewer like any other."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from servers import LoopbackServer
from test_events_written import typed_events

from fte_shell import Episode, load_config
from fte_shell.config import RunConfig
from fte_shell.episode.host import EpisodeHost
from fte_shell.errors import SearchUnavailable
from fte_shell.record.rundir import read_result

Q = "Who built the Kestrel Bridge?"
HTML = """<!doctype html><html><head><title>Kestrel Bridge</title></head><body><main>
<h1>Kestrel Bridge</h1><p>Kestrel Bridge crosses the Alder river in seven stone arches.</p>
<p>It was completed in 1841 by the engineer Mara Vell.</p>
<p>Heavy traffic was banned from the bridge in 1978.</p></main></body></html>"""


@pytest.fixture(scope="module")
def web() -> LoopbackServer:
    with LoopbackServer() as srv:
        srv.route("/kestrel", body=HTML)
        srv.route("/slow", body=HTML, delay_s=1.0)
        yield srv


def config(web: LoopbackServer, profile: str) -> RunConfig:
    return load_config(None, {"agent": {"profile": profile}, "search": {"backend": "none"},
                              "sandbox": {"fetch_policy": {"allow_private": [web.host_port]}, "command_timeout_s": 20}},
                       environ={})


def events_of(run: Path) -> list[dict[str, Any]]:
    """Every trajectory line, each validated strictly against its own model (no fallback)."""
    return typed_events(run)


@pytest.mark.docker
def test_shell_by_hand_fetch_grep_finish(docker_ready: None, web: LoopbackServer, tmp_path: Path) -> None:
    run = tmp_path / "e1"
    with Episode.open(config(web, "shell"), Q, run) as ep:
        assert [t["function"]["name"] for t in ep.tools] == ["bash"]
        fetched = ep.call("bash", {"command": f"fetch {web.url('/kestrel')}"})
        assert not fetched.error and fetched.meta["exit_code"] == 0, fetched.output
        (fact,) = fetched.meta["fetches"]
        assert fact["ok"] and fact["new"] and fact["path"].startswith("/work/")
        grep = ep.call("bash", {"command": "grep -n 'Mara Vell' /work/*.txt"})
        assert re.search(r"^\d+:.*completed in 1841 by the engineer Mara Vell", grep.output, re.MULTILINE), grep.output
        box = ep.profile.sandbox.box  # type: ignore[attr-defined]
        assert box.is_running()
        result = ep.finish(answer="Mara Vell")
    assert not box.is_running()  # the provider says the box is gone
    assert (result.stop_reason, result.answer, result.turns, result.tool_calls) == ("answer", "Mara Vell", 2, {"bash": 2})
    events = events_of(run)
    assert [e["type"] for e in events] == ["start", "tool_call", "tool_call", "end"]
    assert [e["turn"] for e in events[1:3]] == [1, 2] and events[1]["id"] == "hand_1"
    assert events[0]["tools"] == ep.tools and events[0]["system_prompt"] == ep.system_prompt
    assert (run / "workspace" / Path(fact["path"]).name).is_file()
    r = read_result(run)
    assert r is not None and r["stop_reason"] == "answer" and r["run_id"] == ep.run_id and "config_digest" in r


def test_fte_by_hand_fetch_grep_read_finish(web: LoopbackServer, tmp_path: Path) -> None:
    run = tmp_path / "e2"
    with Episode.open(config(web, "fte"), Q, run, run_id="e2", meta={"qid": "k1"}) as ep:
        assert {t["function"]["name"] for t in ep.tools} >= {"fetch", "grep", "read", "list_fetched"}
        fetched = ep.call("fetch", {"url": web.url("/kestrel")})
        assert not fetched.error, fetched.output
        path = fetched.meta["path"]
        grep = ep.call("grep", {"pattern": "Mara Vell", "context": 0})
        line = int(re.search(r"^(\d+): .*Mara Vell", grep.output, re.MULTILINE).group(1))  # type: ignore[union-attr]
        read = ep.call("read", {"path": path, "offset": line, "limit": 1})
        assert read.output.startswith(f"{line}: It was completed in 1841 by the engineer Mara Vell.")
        ep.finish(answer="Mara Vell")
    events = events_of(run)
    assert [e.get("name") for e in events if e["type"] == "tool_call"] == ["fetch", "grep", "read"]
    r = read_result(run)
    assert r is not None and (r["stop_reason"], r["turns"], r["run_id"], r["meta"]) == ("answer", 3, "e2", {"qid": "k1"})
    assert r["tool_calls"] == {"fetch": 1, "grep": 1, "read": 1}


def test_model_mistakes_are_error_results_never_exceptions(web: LoopbackServer, tmp_path: Path) -> None:
    run = tmp_path / "e3"
    with Episode.open(config(web, "fte"), Q, run) as ep:
        unknown = ep.call("telepathy", {"x": 1})
        assert unknown.error and "unknown tool 'telepathy'" in unknown.output and "fetch" in unknown.output
        not_json = ep.call("fetch", "{not json")
        assert not_json.error and "are not valid JSON" in not_json.output
        extra = ep.call("grep", {"pattern": "x", "bogus": 1})
        assert extra.error and "unexpected argument 'bogus'" in extra.output
        missing = ep.call("read", {})
        assert missing.error and "missing required argument 'path'" in missing.output
        call_id, raw = ep.call_raw({"id": "m1", "function": {"name": "fetch", "arguments": "[1]"}}, turn=7)
        assert call_id == "m1" and raw.error and "must be a JSON object" in raw.output
        ep.finish(stop_reason="max_turns")
    calls = [e for e in events_of(run) if e["type"] == "tool_call"]
    assert all(c["error"] for c in calls) and [c["turn"] for c in calls] == [1, 2, 3, 4, 7]
    assert calls[1]["arguments"] is None and calls[1]["raw_arguments"] == "{not json"
    r = read_result(run)
    assert r is not None and r["stop_reason"] == "max_turns" and r["answer"] is None and r["turns"] == 7
    assert r["tool_calls"] == {"telepathy": 1, "fetch": 2, "grep": 1, "read": 1}


def test_finish_is_checked_and_final(web: LoopbackServer, tmp_path: Path) -> None:
    with Episode.open(config(web, "fte"), Q, tmp_path / "e4") as ep:
        with pytest.raises(ValueError, match="needs the answer"):
            ep.finish()
        with pytest.raises(ValueError, match="unknown stop reason 'gave_up'"):
            ep.finish(stop_reason="gave_up")
        ep.finish(answer="x")
        with pytest.raises(RuntimeError, match="already finished"):
            ep.finish(answer="y")
        with pytest.raises(RuntimeError, match="no more tool calls"):
            ep.call("fetch", {"url": web.url("/kestrel")})



@pytest.mark.parametrize(("how", "stop", "answer"), [
    ({"answer": "Mara Vell"}, "answer", "Mara Vell"), ({"stop_reason": "time_budget"}, "time_budget", None),
    ({"why": ValueError("bug")}, "crashed", None), ({"why": KeyboardInterrupt()}, "interrupted", None),
    ({}, "abandoned", None)])
def test_end_finishes_however_it_ended_and_closes(web: LoopbackServer, tmp_path: Path, how: dict[str, Any],
                                                  stop: str, answer: str | None) -> None:
    host = EpisodeHost(config(web, "fte"))
    ep = host.open(Q, tmp_path / "e8", meta={"qid": "k8"})
    result = ep.end(**how)
    assert (result.stop_reason, result.answer) == (stop, answer) and ep._owned is None  # closed
    r = read_result(tmp_path / "e8")
    assert r is not None and (r["stop_reason"], r["answer"], r["meta"]["qid"]) == (stop, answer, "k8")
    assert ep.end(answer="later").stop_reason == stop  # already ended: unchanged
    host.close()

@pytest.mark.docker
def test_left_without_finish_is_abandoned_and_the_box_gone(docker_ready: None, web: LoopbackServer, tmp_path: Path) -> None:
    run = tmp_path / "e5"
    with Episode.open(config(web, "shell"), Q, run) as ep:
        ep.call("bash", {"command": "echo started"})
        box = ep.profile.sandbox.box  # type: ignore[attr-defined]
    assert not box.is_running()
    events = events_of(run)
    assert [e["type"] for e in events] == ["start", "tool_call", "end"] and events[-1]["stop_reason"] == "abandoned"
    r = read_result(run)
    assert r is not None and r["stop_reason"] == "abandoned" and r["answer"] is None and r["turns"] == 1


@pytest.mark.docker
def test_an_exception_in_the_block_ends_with_its_stop_reason(docker_ready: None, web: LoopbackServer,
                                                             tmp_path: Path) -> None:
    run = tmp_path / "e6"
    with pytest.raises(SearchUnavailable), Episode.open(config(web, "shell"), Q, run) as ep:
        ep.call("bash", {"command": "echo started"})
        box = ep.profile.sandbox.box  # type: ignore[attr-defined]
        raise SearchUnavailable("the driver's search went away")
    assert not box.is_running()
    events = events_of(run)
    assert [e["type"] for e in events] == ["start", "tool_call", "error", "end"]
    assert events[2]["message"] == "SearchUnavailable: the driver's search went away" and events[2]["turn"] == 1
    r = read_result(run)
    assert r is not None and r["stop_reason"] == "search_unavailable"


@pytest.mark.parametrize(("exc", "stop"), [(ValueError("bug"), "crashed"), (KeyboardInterrupt(), "interrupted")])
def test_exceptions_name_their_stop(web: LoopbackServer, tmp_path: Path, exc: BaseException, stop: str) -> None:
    with pytest.raises(type(exc)), Episode.open(config(web, "fte"), Q, tmp_path / "e7"):
        raise exc
    r = read_result(tmp_path / "e7")
    assert r is not None and r["stop_reason"] == stop and r["turns"] == 0
    assert [e["type"] for e in events_of(tmp_path / "e7")] == ["start", "error", "end"]


def test_several_episodes_in_one_event_loop(web: LoopbackServer, tmp_path: Path) -> None:
    """Four episodes, each fetching a page the server answers after 1 s: the fetches overlap and the
    event loop keeps running meanwhile."""
    n = 4
    ticks = 0

    async def ticker(stop: asyncio.Event) -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0.02)

    async def one(i: int) -> str:
        async with await Episode.aopen(config(web, "fte"), Q, tmp_path / f"a{i}", run_id=f"a{i}") as ep:
            r = await ep.acall("fetch", {"url": web.url(f"/slow?i={i}")})
            assert not r.error, r.output
            g = await ep.acall("grep", {"pattern": "Mara Vell", "context": 0})
            return (await ep.afinish(answer=g.output.splitlines()[1])).stop_reason

    async def main() -> list[str]:
        stop = asyncio.Event()
        tick = asyncio.create_task(ticker(stop))
        try:
            return await asyncio.gather(*(one(i) for i in range(n)))
        finally:
            stop.set()
            await tick

    web.clear_log()
    t0 = time.monotonic()
    assert asyncio.run(main()) == ["answer"] * n
    took = time.monotonic() - t0
    arrived = sorted(r.time for r in web.requests if r.path.startswith("/slow"))
    assert len(arrived) == n and arrived[-1] - arrived[0] < 1.0, arrived  # all in flight at once
    assert ticks >= took / 0.02 / 4, (ticks, took)  # the loop was never blocked for long
    for i in range(n):
        r = read_result(tmp_path / f"a{i}")
        assert r is not None and r["tool_calls"] == {"fetch": 1, "grep": 1} and r["turns"] == 2
        events_of(tmp_path / f"a{i}")


def test_a_cancelled_driver_leaves_an_interrupted_run(web: LoopbackServer, tmp_path: Path) -> None:
    async def main() -> None:
        async with await Episode.aopen(config(web, "fte"), Q, tmp_path / "c1"):
            await asyncio.sleep(30)

    async def cancel_soon() -> None:
        task = asyncio.create_task(main())
        await asyncio.sleep(1.0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_soon())
    r = read_result(tmp_path / "c1")
    assert r is not None and r["stop_reason"] == "interrupted"


@pytest.mark.docker
def test_cancelled_while_opening_the_box_is_closed_when_it_comes(docker_ready: None, web: LoopbackServer,
                                                                 tmp_path: Path) -> None:
    """``aopen`` cancelled while the box starts: the caller gets the cancellation at once, and the episode
    opened meanwhile is closed when it comes (its run stopped, its container gone), never left running."""
    from fte_shell.sandbox.providers.docker import api as A

    run_id = f"cancel-{uuid.uuid4().hex[:8]}"

    def containers() -> list[dict[str, Any]]:
        return A.client().api.containers(all=True, filters={"label": f"fte-shell.run-id={run_id}"})

    async def main() -> None:
        task = asyncio.create_task(Episode.aopen(config(web, "shell"), Q, tmp_path / "c2", run_id=run_id))
        await asyncio.sleep(0.05)  # in the worker thread now: the box takes far longer to start
        assert not task.done()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(600):  # the open goes on in its thread, then the episode is closed
            if read_result(tmp_path / "c2") is not None and not containers():
                return
            await asyncio.sleep(0.1)

    asyncio.run(main())
    r = read_result(tmp_path / "c2")
    assert r is not None and r["stop_reason"] == "interrupted", r
    assert containers() == []


HANDLERS = """
import signal, sys
from pathlib import Path
from fte_shell import Episode, load_config
from fte_shell.episode.host import EpisodeHost
from fte_shell.episode import signals
cfg = load_config(None, {"agent": {"profile": "fte"}, "search": {"backend": "none"}}, environ={})
out = Path(sys.argv[1])
assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
with Episode.open(cfg, "q?", out / "a"):
    assert signal.getsignal(signal.SIGTERM) is signals._raise_while_open
assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
def host(signum, frame):
    pass
signal.signal(signal.SIGTERM, host)
with Episode.open(cfg, "q?", out / "b"):
    assert signal.getsignal(signal.SIGTERM) is host  # the host's own handler is left alone
assert signal.getsignal(signal.SIGTERM) is host
print("ok")
"""


def test_sigterm_handler_only_when_nobody_owns_it(tmp_path: Path) -> None:
    """A fresh process (this one's handlers are what earlier tests left): the episode's handler while
    SIGTERM's was the default, none over a host's own."""
    out = subprocess.run([sys.executable, "-c", HANDLERS, str(tmp_path)], check=False, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


CHILD = """
import sys, time
from pathlib import Path
from fte_shell import Episode, load_config
from fte_shell.episode.host import EpisodeHost
cfg = load_config(None, {"agent": {"profile": "shell"}, "search": {"backend": "none"}}, environ={})
with Episode.open(cfg, "q?", Path(sys.argv[1]), run_id=sys.argv[2]) as ep:
    print(ep.call("bash", {"command": "echo ready"}).output, flush=True)
    ep.call("bash", {"command": "sleep 30"})
"""


@pytest.mark.docker
def test_sigterm_to_a_script_records_interrupted_and_leaves_no_box(docker_ready: None, tmp_path: Path) -> None:
    import docker

    run, run_id = tmp_path / "k1", f"test-episode-{uuid.uuid4().hex[:8]}"
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(run), run_id], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().startswith("ready")
        time.sleep(0.5)  # into the sleep
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert rc != 0
    events = events_of(run)
    assert events[-2]["type"] == "error" and events[-1]["stop_reason"] == "interrupted"
    assert events[-3]["observation"] == "(the tool call was interrupted)"
    left = docker.from_env().containers.list(all=True, filters={"label": f"fte-shell.run-id={run_id}"})
    assert left == [], f"containers left behind: {[c.id[:12] for c in left]}"


def test_an_episodes_run_reads_like_any_other(web: LoopbackServer, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from fte_shell.cli import app
    from fte_shell.viewer.data import Catalog

    run = tmp_path / "e8"
    with Episode.open(config(web, "fte"), Q, run, meta={"qid": "kestrel"}) as ep:
        ep.call("fetch", {"url": web.url("/kestrel")})
        ep.call("grep", {"pattern": "Mara Vell"})
        ep.finish(answer="Mara Vell")
    catalog = Catalog([run])
    (row,) = catalog.index()["runs"]
    assert (row["profile"], row["stop"], row["answer"], row["turns"], row["docs"]) == ("fte", "answer", "Mara Vell", 2, 1)
    assert row["status"] == "unjudged" and row["qid"] == "kestrel" and row["select"] == 1
    detail = catalog.detail(catalog.runs[0])
    assert [d["fetched"] for d in detail["workspace"]] == [1]
    res = CliRunner().invoke(app, ["report", str(run), "--out", str(tmp_path / "rep")], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    data = json.loads((tmp_path / "rep" / "metrics.json").read_text())
    assert [p["profile"] for p in data["profiles"]] == ["fte"] and data["runs"][0]["stop_reason"] == "answer"
    assert data["runs"][0]["n_fetch"] == 1 and data["runs"][0]["n_grep"] == 1
