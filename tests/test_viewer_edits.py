"""The viewer shows where a run's context edits happened (in a real headless Chromium, as a static site):
the turn of each edit marked with what the strategy sent and which calls it cleared, each cleared call
flagged with the turn that cleared it, the arm in the run's line, and one matrix column per arm."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from fte_shell.cli import app
from fte_shell.viewer.data import Catalog
from tests.test_context_metrics import fte_keep_recent
from tests.test_metrics import fte_run
from tests.test_viewer_browser import READY, _open, browser  # noqa: F401 - the browser fixture

pytestmark = pytest.mark.timeout(300)


def test_catalog_rows_name_the_arm(tmp_path: Path) -> None:
    fte_keep_recent(tmp_path)  # first: it is moved to its arm's directory
    fte_run(tmp_path)
    rows = Catalog([tmp_path]).index()["runs"]
    assert [(r["arm"], r["context"], r["edits"]) for r in rows] == [("fte", "keep_all", 0),
                                                                    ("fte · keep_recent:2", "keep_recent:2", 2)]


def test_run_view_marks_the_edits(browser: Any, tmp_path: Path) -> None:  # noqa: F811
    fte_keep_recent(tmp_path)  # first: it is moved to its arm's directory
    fte_run(tmp_path)
    site = tmp_path / "site"
    r = CliRunner().invoke(app, ["view", str(tmp_path), "--static", str(site)])
    assert r.exit_code == 0, r.output
    page = _open(browser, site.joinpath("index.html").as_uri(), "sweep")
    assert page.locator("h2", has_text="Question × arm").count() == 1
    assert [t.split("\n")[0] for t in page.locator("#matrix thead th.prof").all_inner_texts()] == [
        "fte", "fte · keep_recent:2"]
    page.goto(site.joinpath("index.html").as_uri() + "#/run/1")
    page.wait_for_selector(READY.format("run"), timeout=30_000)
    assert "fte · keep_recent:2" in page.inner_text("p.metrics") and "2 context edit(s)" in page.inner_text("p.metrics")
    assert page.locator("#turns section.turn.edited").count() == 2
    assert page.locator("#turn-6 .note.context_edit").inner_text().startswith(
        "context edit (keep_recent): 20 → 10 messages, ~5,000 → ~3,000 tokens")
    assert page.locator("#turn-9 .note.context_edit a.cleared").all_inner_texts() == ["c3 (turn 3)", "c5 (turn 5)"]
    # each cleared call says when; the others do not
    assert page.locator("#turn-2 .flag.cleared").inner_text() == "cleared at turn 6"
    assert page.locator("#turn-5 .flag.cleared").inner_text() == "cleared at turn 9"
    assert page.locator(".flag.cleared").count() == 3
    page.click("#turn-2 .flag.cleared a")
    page.wait_for_selector("#turn-6.target", timeout=30_000)
    assert not page.errors
    page.close()
