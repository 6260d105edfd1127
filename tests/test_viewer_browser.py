"""fte-shell view in a real browser (Debian's headless Chromium driven by Playwright): over a scripted
sweep of six profiles, what a person sees — the matrix, a run's turns, a highlighted grep hit in the
workspace view, the compare view — and that a hostile page's script does not run. A screenshot of each view
is saved under the test's tmp dir (and copied to $FTE_SCREENSHOT_DIR when set: that is how docs/img/ is made).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from fte_shell.cli import app

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

CHROMIUM = Path(os.environ.get("FTE_CHROMIUM", "/usr/bin/chromium"))
PROFILES = "shell,fte,open-find,snippet-only,visit-snippet,visit-summary"
HOSTILE = '<script>window.__pwned = 1; document.title = "PWNED"</script><img src=x onerror="window.__pwned = 2">'
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
READY = 'body[data-ready="1"][data-view="{}"]'
pytestmark = pytest.mark.timeout(300)


def _need(what: str, ok: bool) -> None:
    if not ok:
        if IN_CI:
            pytest.fail(f"{what} is missing (CI installs it: .ci/run)")
        pytest.skip(f"{what} is missing")


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    _need(str(CHROMIUM), CHROMIUM.exists())
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _need("the playwright package", False)
    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(str(profile), executable_path=str(CHROMIUM), args=FLAGS,
                                                   headless=True, viewport={"width": 1360, "height": 900})
        yield ctx
        ctx.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    here = tmp_path_factory.mktemp("screenshots")
    extra = os.environ.get("FTE_SCREENSHOT_DIR")

    def shot(page: Any, name: str) -> Path:
        path = here / f"{name}.png"
        page.screenshot(path=str(path))
        assert path.stat().st_size > 5_000  # a rendered page, not a blank one
        if extra:
            Path(extra).mkdir(parents=True, exist_ok=True)
            shutil.copy(path, Path(extra) / path.name)
        return path

    yield shot


def _events(run: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (run / "trajectory.jsonl").read_text().splitlines() if x.strip()]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory, hotpotqa_dir: Path, docker_ready: None) -> Path:
    """A scripted sweep of every profile over 2 questions, judged; then: two runs marked correct by an LLM
    verdict, one infrastructure failure, and hostile markup in a fetched page and in an observation."""
    out = tmp_path_factory.mktemp("sweep") / "hq"
    corpus = tmp_path_factory.mktemp("corpus") / "hotpotqa"
    runner = CliRunner()
    r = runner.invoke(app, ["bench", f"hotpotqa:{hotpotqa_dir}", "--profiles", PROFILES, "--limit", "2", "--out",
                            str(out), "--scripted", "--corpus-dir", str(corpus), "--no-progress", "-j", "4"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["judge", str(out)])
    assert r.exit_code == 0, r.output
    fte = min((out / "runs" / "fte").glob("*/r0"))
    for run in (fte, out / "runs" / "shell" / fte.parent.name / "r0"):  # both gave the same answer
        j = json.loads((run / "judgement.json").read_text())
        j["llm"] = {"method": "llm", "correct": True, "judge_model": "hand-made"}
        (run / "judgement.json").write_text(json.dumps(j))
    qid = fte.parent.name
    failed = out / "runs" / "shell" / qid / "r1"
    failed.mkdir(parents=True)
    question = json.loads((fte / "result.json").read_text())["question"]
    (failed / "result.json").write_text(json.dumps({"question": question, "answer": None, "profile": "shell",
                                                    "stop_reason": "failed", "error": "the sandbox did not start",
                                                    "qid": qid, "rep": 1}))
    doc = min((fte / "workspace").glob("*.txt"))
    doc.write_text(doc.read_text() + "\n" + HOSTILE + "\n")
    shell = out / "runs" / "shell" / qid / "r0"
    events = _events(shell)
    for e in events:
        if e["type"] == "tool_call" and e["arguments"]["command"].startswith("search"):
            e["observation"] += "\n" + HOSTILE
    (shell / "trajectory.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return out


@pytest.fixture(scope="module")
def served(sweep: Path) -> Iterator[tuple[str, str]]:
    """``fte-shell view SWEEP --reviewer carol`` as a user runs it; yields the server's URL and the URL it
    printed (which carries the session token of the hand check)."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    with socket.socket() as sock:  # a port that was free a moment ago, to exercise --port
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "fte_shell", "view", str(sweep), "--port", str(port),
                             "--reviewer", "carol"], stdout=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        m = re.search(rf"(http://127\.0\.0\.1:{port}/)(\?token=[A-Za-z0-9_-]{{20,}})", line)
        assert m, line
        yield m.group(1), m.group(0)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def server(served: tuple[str, str]) -> str:
    """The viewer's URL without the token: a read-only page."""
    return served[0]


def expect(locator: Any) -> Any:
    from playwright.sync_api import expect as _expect

    return _expect(locator)


def _open(browser: Any, url: str, view: str) -> Any:
    page = browser.new_page()
    page.errors = []
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.goto(url)
    page.wait_for_selector(READY.format(view), timeout=30_000)
    return page


def _rows(sweep: Path) -> dict[tuple[str, str, int], Path]:
    return {(d.parent.parent.name, d.parent.name, int(d.name[1:])): d for d in sweep.glob("runs/*/*/r*")}


def test_matrix_and_table(browser: Any, server: str, sweep: Path, shots: Any) -> None:
    page = _open(browser, server, "sweep")
    runs = _rows(sweep)
    profiles = sorted(PROFILES.split(","))
    assert page.locator("#matrix thead th.prof").all_inner_texts()[0].startswith(profiles[0])
    assert page.locator("#matrix tbody tr").count() == 2
    assert page.locator("#matrix a.sq").count() == len(runs) == 13
    assert page.locator("#matrix a.sq.correct").count() == 2
    assert page.locator("#matrix a.sq.failed").count() == 1
    assert page.locator("#matrix a.sq.wrong").count() + page.locator("#matrix a.sq.unjudged").count() == 10
    assert page.locator("#runs tbody tr").count() == 13
    shots(page, "sweep")
    page.fill('#runs input[data-col="profile"]', "shell")
    expect(page.locator("#count")).to_have_text(re.compile(r"^3 of 13 runs"), timeout=10_000)
    assert set(page.locator("#runs tbody tr td:nth-child(2)").all_inner_texts()) == {"shell"}
    page.fill('#runs input[data-col="profile"]', "")
    expect(page.locator("#count")).to_have_text(re.compile(r"^13 of 13 runs"), timeout=10_000)
    page.fill('#runs input[data-col="turns"]', ">4")
    long_runs = sum(1 for d in runs.values() if json.loads((d / "result.json").read_text()).get("turns", 0) > 4)
    assert 0 < long_runs < 13
    expect(page.locator("#count")).to_have_text(re.compile(rf"^{long_runs} of 13 runs"), timeout=10_000)
    turns = [int(x) for x in page.locator("#runs tbody tr td:nth-child(7)").all_inner_texts()]
    assert len(turns) == long_runs and all(t > 4 for t in turns)
    page.fill('#runs input[data-col="turns"]', "")
    expect(page.locator("#count")).to_have_text(re.compile(r"^13 of 13 runs"), timeout=10_000)
    page.click('#runs th[data-col="tokens"]')
    page.click('#runs th[data-col="tokens"]')  # descending
    expect(page.locator('#runs th[data-col="tokens"]')).to_have_class(re.compile("desc"))
    tokens = [int(x.replace(",", "")) for x in page.locator("#runs tbody tr td:nth-child(8)").all_inner_texts()]
    assert tokens == sorted(tokens, reverse=True) and len(tokens) == 13
    # a cell opens the run: the failed one says so and shows its error
    page.click("#matrix a.sq.failed")
    page.wait_for_selector(READY.format("run"), timeout=30_000)
    assert "failed" in page.inner_text(".facts") and "the sandbox did not start" in page.inner_text(".facts")
    assert "null" not in page.inner_text("#main")
    # every run of every profile opens, all its turns shown; the raw trajectory is one click away
    for k, (prof, q, rep) in enumerate(sorted(runs)):
        page.goto(server + f"#/run/{k}")
        # wait for THIS run's page (a hash change re-renders asynchronously)
        page.wait_for_selector(READY.format("run") + f' h2:has-text("runs/{prof}/{q}/r{rep}")', timeout=30_000)
        n = sum(1 for e in _events(runs[(prof, q, rep)]) if e["type"] == "model_call") if rep == 0 else 0
        assert page.locator("#turns section.turn").count() == n, (prof, q, rep)
    raw = page.locator("a.rawlink").first
    resp = page.request.get(server + raw.get_attribute("href"))
    assert resp.ok and resp.headers["content-type"].startswith("text/plain")
    assert not page.errors
    page.close()


def test_run_turns_and_hostile_text(browser: Any, server: str, sweep: Path, shots: Any) -> None:
    runs = _rows(sweep)
    qid = min((sweep / "runs" / "fte").iterdir()).name
    key = sorted(runs).index(("shell", qid, 0))  # the viewer lists runs in the sweep's sorted order
    events = _events(runs[("shell", qid, 0)])
    page = _open(browser, server + f"#/run/{key}", "run")
    turns = [e for e in events if e["type"] == "model_call"]
    assert page.locator("#turns section.turn").count() == len(turns)
    commands = [e["arguments"]["command"] for e in events if e["type"] == "tool_call"]
    shown = page.locator("#turns pre.args").all_inner_texts()
    assert shown == commands
    end = next(e for e in events if e["type"] == "end")
    assert page.inner_text("#answer") == end["answer"]
    assert page.locator("#turns .turnhead").first.inner_text().startswith("Turn 1 · ")
    # the search observation is long: collapsed, its size shown; opened, the hostile markup is plain text
    obs = page.locator("#turns details.big").first
    assert re.search(r"observation \([\d,]+ chars, \d+ lines\)", obs.locator("summary").inner_text())
    shots(page, "run")
    obs.locator("summary").click()
    full = obs.locator("pre.obs:not(.preview)")  # built when opened (the toggle event comes a moment later)
    full.wait_for(timeout=30_000)
    assert HOSTILE in full.inner_text()
    assert page.evaluate("window.__pwned") is None and page.title() != "PWNED"
    assert page.locator("#main script, #main img").count() == 0
    assert not page.errors
    page.close()


def test_workspace_grep_hit_and_hostile_page(browser: Any, server: str, sweep: Path, shots: Any) -> None:
    runs = _rows(sweep)
    qid = min((sweep / "runs" / "fte").iterdir()).name
    shell = runs[("shell", qid, 0)]
    key = sorted(runs).index(("shell", qid, 0))
    grep = next(e for e in _events(shell) if e["type"] == "tool_call" and e["arguments"]["command"].startswith("grep"))
    path, line, _ = grep["observation"].splitlines()[0].split(":", 2)  # grep -H -n: /work/x.txt:N:text
    docs = sorted(p.name for p in (shell / "workspace").glob("*.txt"))
    n = docs.index(path.rsplit("/", 1)[1])
    page = _open(browser, server + f"#/run/{key}/ws/{n}", "workspace")
    assert page.locator("#docs tbody tr").count() == len(docs)
    hit = page.locator(f"#doctext #L{line}")
    assert "hit" in (hit.get_attribute("class") or "")
    mark = hit.locator("a.mark.grep")
    assert mark.inner_text() == f"grep t{grep['turn']}" and mark.get_attribute("href") == f"#/run/{key}/turn/{grep['turn']}"
    assert page.locator("#doctext .ln.read").count() >= 1  # the sed window
    tl = page.locator("#docs tbody tr").nth(n).locator(".timeline a.tl")
    assert tl.count() >= 2  # fetched in one turn, grepped in another
    shots(page, "workspace")
    mark.click()  # linked back to the turn
    page.wait_for_selector(f'{READY.format("run")} #turn-{grep["turn"]}.target', timeout=30_000)
    # the fte run's first document had a <script> appended: shown as text, never run
    fte_key = sorted(runs).index(("fte", qid, 0))
    page.goto(server + f"#/run/{fte_key}/ws/0")
    page.wait_for_selector(READY.format("workspace") + " #doctext", timeout=30_000)
    assert HOSTILE in page.inner_text("#doctext")
    assert page.evaluate("window.__pwned") is None and page.title() != "PWNED"
    assert page.locator("#doctext script, #doctext img").count() == 0
    assert not page.errors
    page.close()


def test_compare(browser: Any, server: str, sweep: Path, shots: Any) -> None:
    runs = _rows(sweep)
    qid = min((sweep / "runs" / "fte").iterdir()).name
    ks, kf = (sorted(runs).index((p, qid, 0)) for p in ("shell", "fte"))
    page = _open(browser, server + f"#/run/{ks}", "run")
    page.click(f'a.sib[href="#/compare/{ks}/{kf}"]')
    page.wait_for_selector(READY.format("compare"), timeout=30_000)
    head = page.locator("#cmp-metrics thead th").all_inner_texts()
    assert head[1].startswith("shell r0") and head[2].startswith("fte r0")
    n_shell, n_fte = (sum(1 for e in _events(runs[(p, qid, 0)]) if e["type"] == "model_call") for p in ("shell", "fte"))
    assert page.locator("#cmp-turns tr.aligned").count() == max(n_shell, n_fte)
    verdicts = page.locator("#cmp-metrics tbody tr").first.locator("td").all_inner_texts()
    assert verdicts == ["correct", "correct"]  # the hand-made LLM verdicts (shell, fte)
    shots(page, "compare")
    assert not page.errors
    page.close()


def test_static_site_and_a_300_turn_run(browser: Any, sweep: Path, tmp_path: Path) -> None:
    run = tmp_path / "long"
    (run / "workspace").mkdir(parents=True)
    (run / "workspace" / "a.txt").write_text("URL: https://a.example/\nTitle: A\nRetrieved: x\n\nowls live here, long line\n")
    ev: list[dict[str, Any]] = [{"type": "start", "t": 0, "question": "How long?", "profile": "shell", "model": "m"}]
    for i in range(1, 301):
        ev.append({"type": "model_call", "turn": i, "latency_s": 0.5, "usage": {"prompt_tokens": 100 * i, "completion_tokens": 9,
                   "total_tokens": 100 * i + 9}, "message": {"role": "assistant", "content": f"step {i}"}})
        obs = "/work/a.txt:5:owls live here, long line" if i % 2 else "x" * 20_000
        ev.append({"type": "tool_call", "turn": i, "id": f"c{i}", "name": "bash", "error": False,
                   "arguments": {"command": "grep -H -n owls /work/a.txt" if i % 2 else "yes | head -c 20000"},
                   "observation": obs, "meta": {"exit_code": 0, "timed_out": i == 2, "truncated": i == 2}})
    ev.append({"type": "end", "t": 9, "stop_reason": "max_turns", "answer": None, "turns": 300, "wall_s": 9})
    (run / "trajectory.jsonl").write_text("".join(json.dumps(e) + "\n" for e in ev))
    (run / "result.json").write_text(json.dumps({"question": "How long?", "answer": None, "profile": "shell",
                                                 "turns": 300, "stop_reason": "max_turns", "wall_s": 9}))
    out = tmp_path / "site"
    r = CliRunner().invoke(app, ["view", str(run), "--static", str(out)])
    assert r.exit_code == 0, r.output
    page = _open(browser, (out / "index.html").as_uri(), "run")  # one run: the page opens on it
    assert page.locator("#turns section.turn").count() == 300
    assert page.locator("#turns details.big summary").first.inner_text() == "observation (20,000 chars, 1 line)"
    assert page.locator("#turn-2 .flag").all_inner_texts() == ["timed out", "truncated"]
    page.goto((out / "index.html").as_uri() + "#/run/0/ws/0")
    page.wait_for_selector(READY.format("workspace") + " #doctext", timeout=30_000)
    assert page.locator("#docs .timeline a.tl.grep").count() == 150
    # the sweep as a static site works from file:// too
    r = CliRunner().invoke(app, ["view", str(sweep), "--static", str(tmp_path / "sweep-site")])
    assert r.exit_code == 0, r.output
    page.goto((tmp_path / "sweep-site" / "index.html").as_uri())
    page.wait_for_selector(READY.format("sweep"), timeout=30_000)
    assert page.locator("#matrix a.sq").count() == 13
    runs = _rows(sweep)
    qid = min((sweep / "runs" / "fte").iterdir()).name
    page.goto((tmp_path / "sweep-site" / "index.html").as_uri() + f"#/run/{sorted(runs).index(('fte', qid, 0))}/ws/0")
    page.wait_for_selector(READY.format("workspace") + " #doctext", timeout=30_000)
    assert HOSTILE in page.inner_text("#doctext") and page.evaluate("window.__pwned") is None
    assert not page.errors
    page.close()


def test_hand_check_marks_a_run_and_keeps_it(browser: Any, served: tuple[str, str], sweep: Path, shots: Any) -> None:
    base, review = served
    runs = _rows(sweep)
    qid = min((sweep / "runs" / "fte").iterdir()).name
    key = sorted(runs).index(("fte", qid, 0))  # judged correct (hand-made LLM verdict)
    # without the token the page is read-only: no controls, and a forged request is refused
    page = _open(browser, base + f"#/run/{key}", "run")
    assert page.locator("#mark-correct").count() == 0 and page.locator("#hand-readonly").count() == 1
    forged = page.evaluate("""async (k) => (await fetch('api/audit', {method: 'POST',
        headers: {'Content-Type': 'application/json'}, body: JSON.stringify({key: k, mark: 'wrong'})})).status""", key)
    assert forged == 403
    page.close()
    assert not (sweep / "audit.jsonl").exists()
    # with it: mark the answer wrong with a hostile note, see it, reload, see it again
    page = _open(browser, review + f"#/run/{key}", "run")
    assert "token" not in page.url  # taken out of the address bar, kept for the tab
    assert page.inner_text("#hand-mark") == "not checked by hand"
    page.fill("#hand-note-input", HOSTILE)
    page.click("#mark-wrong")
    expect(page.locator("#hand-mark .badge.wrong")).to_have_count(1, timeout=30_000)
    assert "by carol" in page.inner_text("#hand-mark") and "the judge said correct" in page.inner_text("#hand-mark")
    assert page.inner_text("#hand-note") == HOSTILE
    assert page.evaluate("window.__pwned") is None and page.locator("#main script, #main img").count() == 0
    shots(page, "hand-check")
    page.reload()
    page.wait_for_selector(READY.format("run"), timeout=30_000)
    expect(page.locator("#hand-mark .badge.wrong")).to_have_count(1, timeout=30_000)
    assert page.locator("#mark-correct").count() == 1  # still the reviewer's tab
    lines = [json.loads(x) for x in (sweep / "audit.jsonl").read_text().splitlines()]
    assert [(x["run"], x["mark"], x["who"], x["note"]) for x in lines] == [(f"runs/fte/{qid}/r0", "wrong", "carol", HOSTILE)]
    # the sweep table shows it
    page.goto(base + "#/")
    page.wait_for_selector(READY.format("sweep"), timeout=30_000)
    expect(page.locator(f'#runs tr[data-key="{key}"] td.hand .badge.wrong')).to_have_count(1, timeout=30_000)
    assert not page.errors
    page.close()
    (sweep / "audit.jsonl").unlink()  # leave the module's sweep as it was
