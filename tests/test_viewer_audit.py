"""The hand check: marks given through the viewer's real HTTP server (its token, origin and body checks),
kept append-only in the sweep's audit.jsonl, and the report's audited accuracy and judge–human agreement
on a hand-made sweep with hand-computed values."""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from typing import Any

import pytest
from test_paper_metrics import mk_run

from fte_shell.metrics import collect
from fte_shell.metrics.audit import audit_summary, marks_of
from fte_shell.record.audit import AUDIT, AuditMark, append_mark, audit_home, latest_marks, read_marks
from fte_shell.record.sweepdir import ManifestDataset, SweepDir, SweepManifest
from fte_shell.report.build import write_report
from fte_shell.viewer import Catalog, ViewerServer, write_static

TOKEN = "t0k3n-for-this-test"


def post(server: ViewerServer, body: Any, *, token: str | None = TOKEN, origin: str | None = "own",
         ctype: str = "application/json", path: str = "/api/audit", host: str | None = None,
         site: str | None = None) -> tuple[int, bytes]:
    port = server.server_address[1]
    headers = {"Content-Type": ctype}
    if token is not None:
        headers["X-FTE-Token"] = token
    if origin is not None:
        headers["Origin"] = f"http://127.0.0.1:{port}" if origin == "own" else origin
    if host:
        headers["Host"] = host
    if site:
        headers["Sec-Fetch-Site"] = site
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("POST", path, body=data, headers=headers)
    r = c.getresponse()
    out = r.status, r.read()
    c.close()
    return out


@pytest.fixture()
def sweep(tmp_path: Path) -> Path:
    """Seven runs of one profile: judged correct q1 q2 q5, wrong q3 q4, an infrastructure failure q6, and
    an unjudged q7."""
    root = tmp_path / "sweep"
    root.mkdir()
    SweepDir(root).write_manifest(SweepManifest(dataset=ManifestDataset(kind="jsonl")))
    verdicts = {"q1": True, "q2": True, "q3": False, "q4": False, "q5": True, "q6": None, "q7": None}
    for qid, correct in verdicts.items():
        mk_run(root / "runs" / "fte" / qid / "r0", "fte", [], correct=correct, qid=qid,
               stop="sandbox_unavailable" if qid == "q6" else "answer")
    return root


@pytest.fixture()
def served(sweep: Path):
    server = ViewerServer(Catalog([sweep]), refresh_s=0, token=TOKEN, reviewer="alice")
    server.start()
    yield server
    server.shutdown()
    server.server_close()


def keys(server: ViewerServer) -> dict[str, int]:
    return {r.qid: r.key for r in server.site.catalog.runs}


def test_marks_need_the_token_and_the_own_origin(served: ViewerServer, sweep: Path) -> None:
    k = keys(served)["q1"]
    port = served.server_address[1]
    good = {"key": k, "mark": "correct"}
    refused = [
        (post(served, good, token=None), 403),  # no token
        (post(served, good, token="wrong"), 403),
        (post(served, good, origin="https://evil.example"), 403),  # a cross-site script
        (post(served, good, site="cross-site"), 403),
        (post(served, good, host=f"evil.example:{port}"), 403),  # DNS rebinding
        (post(served, b"key=0&mark=correct", ctype="application/x-www-form-urlencoded"), 415),  # a cross-site form
        (post(served, good, ctype="text/plain"), 415),
        (post(served, good, path="/api/other"), 404),
        (post(served, {"key": 999, "mark": "correct"}), 400),
        (post(served, {"key": True, "mark": "correct"}), 400),
        (post(served, {"key": k, "mark": "maybe"}), 400),
        (post(served, {"key": k, "mark": "correct", "who": "mallory"}), 400),  # the name is the server's
        (post(served, {"key": k, "mark": "correct", "note": "x" * 2001}), 400),
        (post(served, b"{not json"), 400),
    ]
    for (status, body), want in refused:
        assert status == want, body
    assert not (sweep / AUDIT).exists()  # nothing refused was written
    # a refusal leaves the body unread: the connection is closed, never parsed on as a next request
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("POST", "/api/audit", body=json.dumps(good).encode(), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    r.read()
    assert r.status == 403 and r.getheader("Connection") == "close"
    c.close()
    status, body = post(served, {"key": k, "mark": "wrong", "note": " <img src=x onerror=alert(1)> "})
    assert status == 200, body
    mark = json.loads(body)["mark"]
    assert (mark["run"], mark["mark"], mark["who"], mark["judge_correct"], mark["judge"]) == (
        "runs/fte/q1/r0", "wrong", "alice", True, "match")
    assert mark["note"] == "<img src=x onerror=alert(1)>"  # kept as text, trimmed
    read_only = ViewerServer(Catalog([sweep]), token=None)
    read_only.start()
    try:
        assert post(read_only, good)[0] == 403
    finally:
        read_only.shutdown()
        read_only.server_close()


def test_marks_are_appended_and_the_latest_counts(served: ViewerServer, sweep: Path, tmp_path: Path) -> None:
    k = keys(served)
    assert post(served, {"key": k["q2"], "mark": "correct"})[0] == 200
    assert post(served, {"key": k["q2"], "mark": "wrong", "note": "the year is off"})[0] == 200
    lines = (sweep / AUDIT).read_text().splitlines()
    assert len(lines) == 2 and all(json.loads(x)["run"] == "runs/fte/q2/r0" for x in lines)
    assert latest_marks(sweep)["runs/fte/q2/r0"].mark == "wrong"
    index = served.site.index()["runs"]
    row = next(r for r in index if r["key"] == k["q2"])
    assert (row["hand"], row["hand_by"]) == ("wrong", "alice")
    detail = served.site.data(f"run/{k['q2']}")
    assert [m["mark"] for m in detail["audit"]] == ["correct", "wrong"]
    # a torn last line (a crash while appending) loses only itself
    with (sweep / AUDIT).open("a") as f:
        f.write('{"run": "runs/fte/q3/r0", "mark": "wro')
    assert [m.mark for m in read_marks(sweep)] == ["correct", "wrong"]
    # the static site carries the marks (read-only: the page has no token there)
    out = tmp_path / "site"
    write_static(Catalog([sweep]), out)
    data = (out / "data" / f"run/{k['q2']}.js").read_text()
    assert '"the year is off"' in data
    # a run viewed on its own keeps its marks in its sweep
    assert audit_home(sweep / "runs" / "fte" / "q2" / "r0") == sweep.resolve()
    alone = tmp_path / "alone"
    mk_run(alone, "fte", [], correct=True)
    assert audit_home(alone) == alone.resolve()


def _mark(sweep: Path, qid: str, mark: str) -> None:
    append_mark(sweep, AuditMark(run=f"runs/fte/{qid}/r0", mark=mark, who="bob", at="2026-12-01T00:00:00+00:00"))  # type: ignore[arg-type]


def test_audited_accuracy_and_agreement_by_hand(sweep: Path, tmp_path: Path) -> None:
    # marks: q1 correct (judge correct: agree), q2 correct then wrong (judge correct: disagree; the latest
    # counts), q3 wrong (judge wrong: agree), q6 correct (an infrastructure failure: not a result, ignored),
    # q7 correct (not judged: audited, not compared).
    for qid, mark in (("q1", "correct"), ("q2", "correct"), ("q2", "wrong"), ("q3", "wrong"), ("q6", "correct"),
                      ("q7", "correct")):
        _mark(sweep, qid, mark)
    runs = collect([sweep])
    s = audit_summary("fte", runs, marks_of(runs))
    # scored: q1-q5 (judged) + q7 (marked) = 6; audited: q1 q2 q3 q7 = 4
    # judge accuracy: q1 q2 q5 of q1-q5 = 3/5
    # audited accuracy: q1 T (mark), q2 F (mark), q3 F (mark), q4 F (judge), q5 T (judge), q7 T (mark) = 3/6
    # compared: q1 q2 q3, agree q1 q3 = 2/3
    # kappa over (judge, human) = (T,T) (T,F) (F,F): p_o = 2/3, p_judge = 2/3, p_human = 1/3,
    #   p_e = 2/3*1/3 + 1/3*2/3 = 4/9, kappa = (2/3 - 4/9) / (5/9) = 0.4
    assert (s.scored, s.audited, s.compared, s.agree) == (6, 4, 3, 2)
    assert s.judge_accuracy == pytest.approx(0.6)
    assert s.audited_accuracy == pytest.approx(0.5)
    assert s.agreement == pytest.approx(2 / 3)
    assert s.kappa == pytest.approx(0.4)
    rep = write_report([sweep], tmp_path / "report")
    md = rep.markdown.read_text()
    assert "## Hand check" in md
    assert "| fte | 6 | 4 | 60.0% | 50.0% | 66.7% (2/3) | 0.40 |" in md
    metrics = json.loads(rep.metrics.read_text())
    assert metrics["audit"][0]["audited_accuracy"] == pytest.approx(0.5)


def test_no_hand_check_section_without_marks(sweep: Path, tmp_path: Path) -> None:
    rep = write_report([sweep], tmp_path / "report")
    assert "Hand check" not in rep.markdown.read_text()
    assert "audit" not in json.loads(rep.metrics.read_text())
