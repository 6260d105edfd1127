"""fte-shell view without a browser: which lines each call touched (hand-made trajectories, hand-computed
lines), verdicts, the server's confinement (loopback, no `..`, no symlinks out), the static site, the CLI."""

from __future__ import annotations

import http.client
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from fte_shell.cli import app
from fte_shell.metrics import RunMetrics, run_status
from fte_shell.record.events import typed_events
from fte_shell.stops import is_infra_failure
from fte_shell.viewer import Catalog, ViewerServer, write_static
from fte_shell.viewer.site import ASSETS, asset
from fte_shell.viewer.touches import touches

DOC_A = ["URL: https://a.example/", "Title: A", "Retrieved: 2026-01-01T00:00:00Z", "",
         "Alpha line one about owls.", "Beta line two about cats and owls.", "Gamma line three.",
         "Delta line four mentions owls again.", "Epsilon line five."]
DOC_B = ["Docid: b", "Title: B", "Retrieved: 2026-01-01T00:00:00Z", "", "Owls live in the forest of B.",
         "Nothing else here at all."]


def call(turn: int, name: str, args: dict[str, Any], obs: str, **meta: Any) -> dict[str, Any]:
    return {"type": "tool_call", "turn": turn, "id": f"c{turn}", "name": name, "arguments": args,
            "observation": obs, "error": False, "meta": meta}


def rec(name: str, state: str = "new") -> str:
    return f"/work/{name}  100 chars  {state}  src  \"T\""


def test_shell_lines_from_grep_and_sed() -> None:
    docs = {"a.txt": DOC_A, "b.txt": DOC_B}
    events = [
        call(1, "bash", {"command": "fetch https://a.example/"}, rec("a.txt")),
        call(1, "bash", {"command": "fetch b"}, rec("b.txt")),
        # grep -H -n over both: lines 5, 6, 8 of a and 5 of b; a context line of a (7) with "-"
        call(2, "bash", {"command": "grep -H -i -n -C0 owls /work/*.txt"},
             "/work/a.txt:5:Alpha line one about owls.\n/work/a.txt:6:Beta line two about cats and owls.\n"
             "/work/a.txt-7-Gamma line three.\n/work/a.txt:8:Delta line four mentions owls again.\n"
             "/work/b.txt:5:Owls live in the forest of B."),
        # sed prints lines 6-8 without numbers: found by text, one window
        call(3, "bash", {"command": "sed -n '6,8p' /work/a.txt"},
             "Beta line two about cats and owls.\nGamma line three.\nDelta line four mentions owls again."),
        # a grep line whose number does not hold that text is not attributed (line 9 is "Epsilon…")
        call(4, "bash", {"command": "grep -n owls /work/a.txt"}, "9:Owls are not on line nine."),
    ]
    t = touches(typed_events(events), docs)
    a = [(x.turn, x.op, x.hits, x.lines) for x in t["a.txt"]]
    assert a == [(1, "fetch", [], []), (2, "grep", [5, 6, 8], [7]), (3, "read", [], [6, 7, 8]), (4, "grep", [], [])]
    assert [(x.turn, x.op, x.hits) for x in t["b.txt"]] == [(1, "fetch", []), (2, "grep", [5])]


def test_shell_windows_filters_and_duplicates() -> None:
    doc = ["URL: https://c.example/", "Title: C", "Retrieved: x", "", "A first long line of text here.", "",
           "ok", "Repeated line of boilerplate.", "A second long line of text here.", "Repeated line of boilerplate.",
           "A third long line of text here."]
    docs = {"c.txt": doc}
    events = [
        call(1, "bash", {"command": "fetch https://c.example/"}, rec("c.txt")),
        # a window: the blank line 6 and the short line 7 are between matched lines 5 and 8 -> returned too
        call(2, "bash", {"command": "sed -n '5,9p' /work/c.txt"},
             "A first long line of text here.\n\nok\nRepeated line of boilerplate.\nA second long line of text here."),
        # a filter after the read: only the lines printed count, nothing in between
        call(3, "bash", {"command": "head -n 11 /work/c.txt | grep -i long"},
             "A first long line of text here.\nA second long line of text here.\nA third long line of text here."),
        # a duplicated line is placed where its window continues (10, not 8), from the line after or before
        call(4, "bash", {"command": "tail -n 2 /work/c.txt"}, "Repeated line of boilerplate.\nA third long line of text here."),
        call(5, "bash", {"command": "tail -n 3 /work/c.txt"},
             "A second long line of text here.\nRepeated line of boilerplate.\nA third long line of text here."),
    ]
    t = touches(typed_events(events), docs)["c.txt"]
    assert [(x.turn, x.op, x.lines) for x in t] == [
        (1, "fetch", []), (2, "read", [5, 6, 7, 8, 9]), (3, "read", [5, 9, 11]), (4, "read", [10, 11]),
        (5, "read", [9, 10, 11])]


def test_structured_lines_from_grep_read_and_excerpts() -> None:
    docs = {"a.txt": DOC_A, "b.txt": DOC_B}
    events = [
        call(1, "fetch", {"url": "https://a.example/"}, rec("a.txt"), path="/work/a.txt", new=True),
        call(1, "fetch", {"url": "b"}, rec("b.txt"), path="/work/b.txt", new=True),
        # the structured grep: a header per file, "N: " matches, "N- " context, excerpts cut with "…"
        call(2, "grep", {"pattern": "owls", "context": 1},
             "/work/a.txt:\n4- \n5: Alpha line one about owls.\n6: …line two about cats and owls.\n--\n"
             "7- Gamma line three.\n8: Delta line four…\n\n/work/b.txt:\n5: Owls live in the forest of B.\n"
             "\n4 matching lines in 2 files"),
        call(3, "read", {"path": "/work/b.txt", "offset": 5, "limit": 2},
             "5: Owls live in the forest of B.\n6: Nothing else here at all.\n(Showing lines 5-6 of 6. End of file.)"),
        call(4, "read", {"path": "/work/a.txt", "offset": 2, "limit": 1}, "2: Title: A\n(Showing lines 2-2 of 9.)"),
    ]
    t = touches(typed_events(events), docs)
    assert [(x.turn, x.op, x.hits, x.lines) for x in t["a.txt"]] == [
        (1, "fetch", [], []), (2, "grep", [5, 6, 8], [4, 7]), (4, "read", [], [2])]
    assert [(x.turn, x.op, x.hits, x.lines) for x in t["b.txt"]] == [
        (1, "fetch", [], []), (2, "grep", [5], []), (3, "read", [], [5, 6])]


@pytest.mark.parametrize(("stop", "correct", "want"), [
    ("answer", True, "correct"), ("answer", False, "wrong"), ("max_turns", None, "unjudged"),
    ("max_turns", False, "wrong"), ("endpoint_unavailable", None, "failed"), ("sandbox_unavailable", False, "failed"),
    ("failed", None, "failed"), ("crashed", True, "failed"), ("incomplete", None, "failed"), (None, None, "failed"),
])
def test_status_keeps_infra_failures_apart(stop: str | None, correct: bool | None, want: str) -> None:
    m = RunMetrics(run_dir="r", profile="p", qid="q", stop_reason=stop or "incomplete", answered=False,
                   infra_failure=is_infra_failure(stop), correct=correct)
    assert run_status(m) == want


def make_run(d: Path, *, profile: str = "shell", docs: dict[str, list[str]] | None = None,
             stop: str = "answer", question: str = "Q?") -> Path:
    (d / "workspace").mkdir(parents=True)
    for name, lines in (docs or {}).items():
        (d / "workspace" / name).write_text("\n".join(lines))
    events = [{"type": "start", "t": 0.1, "question": question, "profile": profile, "model": "m"},
              {"type": "model_call", "turn": 1, "latency_s": 0.1, "usage": {"prompt_tokens": 10, "completion_tokens": 2,
               "total_tokens": 12}, "message": {"role": "assistant", "content": "hi"}},
              {"type": "end", "t": 1.0, "stop_reason": stop, "answer": "x", "turns": 1, "wall_s": 0.9}]
    (d / "trajectory.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    (d / "result.json").write_text(json.dumps({"question": question, "answer": "x", "profile": profile, "model": "m",
                                               "turns": 1, "stop_reason": stop, "wall_s": 0.9}))
    return d


def get(server: ViewerServer, path: str, host: str | None = None) -> tuple[int, bytes, dict[str, str]]:
    c = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=30)
    # sent as written: http.client does not normalise `..`
    c.request("GET", path, headers={"Host": host} if host else {})
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, body, {k.lower(): v for k, v in r.getheaders()}


@pytest.fixture()
def served(tmp_path: Path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET outside the viewed directory")
    run = make_run(tmp_path / "run", docs={"a.txt": DOC_A})
    (run / "workspace" / "leak.txt").symlink_to(secret)  # a symlink that leaves the viewed directory
    (run / "workspace" / "inside.txt").symlink_to(run / "workspace" / "a.txt")  # one that stays inside
    server = ViewerServer(Catalog([run]))
    server.start()
    yield server, run
    server.shutdown()
    server.server_close()


def test_server_is_confined(served: tuple[ViewerServer, Path]) -> None:
    server, _run = served
    assert server.server_address[0] == "127.0.0.1" and server.url.startswith("http://127.0.0.1:")
    st, body, headers = get(server, "/")
    assert st == 200 and b"<title>fte-shell view</title>" in body
    csp = headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "default-src 'none'" in csp
    assert headers["x-content-type-options"] == "nosniff"
    st, body, headers = get(server, "/files/0/trajectory.jsonl")
    assert st == 200 and headers["content-type"].startswith("text/plain") and b'"type": "start"' in body
    assert headers["content-security-policy"].startswith("sandbox")
    for bad in ("/files/0/../secret.txt", "/files/0/workspace/../../secret.txt", "/files/0/%2e%2e/secret.txt",
                "/files/0/workspace/%2E%2E/%2E%2E/secret.txt", "/static/../../secret.txt", "/files/0//etc/passwd",
                "/files/0/workspace/leak.txt", "/files/0/..%2Fsecret.txt", "/files/0/workspace\\..\\..\\secret.txt"):
        st, body, _ = get(server, bad)
        assert st in (403, 404), bad
        assert b"TOP SECRET" not in body, bad
    port = server.server_address[1]
    assert get(server, "/files/0/trajectory.jsonl", host=f"localhost:{port}")[0] == 200
    for host in (f"evil.example:{port}", "evil.example", "127.0.0.1:1"):  # DNS rebinding
        st, body, _ = get(server, "/files/0/trajectory.jsonl", host=host)
        assert st == 403 and b'"type": "start"' not in body, host
    st, body, _ = get(server, "/files/0/workspace/inside.txt")
    assert st == 200 and b"Alpha line one" in body
    for missing in ("/files/9/result.json", "/data/run/7.js", "/data/nope.js", "/static/other.js"):
        assert get(server, missing)[0] == 404, missing
    # the data the page loads never contains the symlinked file's text either
    st, body, _ = get(server, "/data/run/0.js")
    assert st == 200 and body.startswith(b'FTE.got("run/0",')
    detail = json.loads(body[len(b'FTE.got("run/0",'):-3])
    assert [d["name"] for d in detail["workspace"]] == ["a.txt", "inside.txt"]
    for n in range(3):
        assert b"TOP SECRET" not in get(server, f"/data/doc/0/{n}.js")[1]


def test_static_site_is_self_contained(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", docs={"a.txt": DOC_A + ["<script>window.__pwned = 1</script>\u2028x"]})
    out = tmp_path / "site"
    n = write_static(Catalog([run]), out)
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert n == len(files) and "index.html" in files and "data/index.js" in files and "data/doc/0/0.js" in files
    for name in ASSETS:  # nothing is loaded from elsewhere: no absolute URL in any asset
        text = asset(name).decode()
        assert not re.search(r"(src|href)\s*=\s*[\"']?(https?:)?//", text), name
        assert "@import" not in text and "url(" not in text, name
        assert "innerHTML" not in text and "insertAdjacentHTML" not in text and "document.write" not in text, name
        assert "eval(" not in text and "new Function" not in text, name
    doc = (out / "data/doc/0/0.js").read_text()
    assert "<script>window.__pwned = 1</script>" in doc and "\u2028" not in doc  # a string literal, escaped


def test_cli_view(tmp_path: Path) -> None:
    runner = CliRunner()
    run = make_run(tmp_path / "sweep" / "runs" / "fte" / "q1" / "r0", profile="fte")
    make_run(tmp_path / "sweep" / "runs" / "shell" / "q1" / "r0", stop="endpoint_unavailable")
    r = runner.invoke(app, ["view", str(tmp_path / "sweep"), "--static", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    assert "2 run(s)" in r.output and (tmp_path / "out" / "index.html").is_file()
    index = json.loads((tmp_path / "out/data/index.js").read_text()[len('FTE.got("index",'):-3])
    assert {(x["profile"], x["status"]) for x in index["runs"]} == {("fte", "unjudged"), ("shell", "failed")}
    assert run.exists()
    other = make_run(tmp_path / "sweep2" / "runs" / "fte" / "q1" / "r0", profile="fte")  # a second sweep
    (other / "judgement.json").write_text(json.dumps({"match": {"correct": False}}))
    r = runner.invoke(app, ["view", str(tmp_path / "sweep"), str(tmp_path / "sweep2"), "--static", str(tmp_path / "o2")])
    assert r.exit_code == 0 and "3 run(s)" in r.output, r.output
    index = json.loads((tmp_path / "o2/data/index.js").read_text()[len('FTE.got("index",'):-3])
    assert [(x["root"], x["profile"], x["status"]) for x in index["runs"]] == [
        (0, "fte", "unjudged"), (0, "shell", "failed"), (1, "fte", "wrong")]
    r = runner.invoke(app, ["view", str(tmp_path / "nothing-here")])
    assert r.exit_code == 2 and "not a directory" in r.output
    os.makedirs(tmp_path / "empty")
    r = runner.invoke(app, ["view", str(tmp_path / "empty")])
    assert r.exit_code == 2 and "no run directories" in r.output


def test_server_picks_up_a_running_sweep(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    make_run(sweep / "runs" / "fte" / "q1" / "r0", profile="fte")
    server = ViewerServer(Catalog([sweep]), refresh_s=0)
    server.start()
    try:
        def index() -> list[dict[str, Any]]:
            st, body, _ = get(server, "/data/index.js")
            assert st == 200
            return json.loads(body[len(b'FTE.got("index",'):-3])["runs"]

        assert [(r["key"], r["profile"], r["status"]) for r in index()] == [(0, "fte", "unjudged")]
        make_run(sweep / "runs" / "shell" / "q1" / "r0", stop="sandbox_unavailable")  # a run finished since
        (sweep / "runs" / "fte" / "q1" / "r0" / "judgement.json").write_text(json.dumps({"match": {"correct": True}}))
        assert [(r["key"], r["profile"], r["status"]) for r in index()] == [(0, "fte", "correct"), (1, "shell", "failed")]
    finally:
        server.shutdown()
        server.server_close()


def test_detail_marks_revisited_documents(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", profile="fte", docs={"a.txt": DOC_A, "b.txt": DOC_B})
    events = [json.loads(x) for x in (run / "trajectory.jsonl").read_text().splitlines()]
    calls = [  # read a, read b, read a: a is revisited, b is not
        call(1, "fetch", {"url": "https://a.example/"}, rec("a.txt"), path="/work/a.txt", new=True),
        call(1, "fetch", {"url": "b"}, rec("b.txt"), path="/work/b.txt", new=True),
        call(2, "read", {"path": "/work/a.txt", "offset": 5, "limit": 1}, "5: Alpha line one about owls."),
        call(3, "read", {"path": "/work/b.txt", "offset": 5, "limit": 1}, "5: Owls live in the forest of B."),
        call(4, "read", {"path": "/work/a.txt", "offset": 8, "limit": 1}, "8: Delta line four mentions owls again."),
    ]
    (run / "trajectory.jsonl").write_text("".join(json.dumps(e) + "\n" for e in [*events[:2], *calls, events[2]]))
    catalog = Catalog([run])
    detail = catalog.detail(catalog.runs[0])
    ws = {d["name"]: d for d in detail["workspace"]}
    assert ws["a.txt"]["revisited"] is True and ws["b.txt"]["revisited"] is False
    assert ws["a.txt"]["fetched"] == 1 and ws["a.txt"]["title"] == "A" and ws["a.txt"]["source"] == "https://a.example/"
    assert [(t["turn"], t["lines"]) for t in ws["a.txt"]["touches"]] == [(1, []), (2, [5]), (4, [8])]
    assert detail["row"]["revisit"] == 0.5  # the metrics' own rate agrees: 1 of 2 materialized documents
    assert catalog.document(catalog.runs[0], 1)["lines"] == DOC_B
