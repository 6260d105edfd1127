"""Opt-in JavaScript rendering through chromium: scripts run, and every request the page makes goes
through the policy-checked downloader (a private address the page tries to reach gets nothing)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fte_shell.config import FetchPolicy
from fte_shell.errors import ConfigError
from fte_shell.fetch import FetchService
from fte_shell.fetch import render as render_mod
from fte_shell.workspace import Workspace
from tests.servers import LoopbackServer


@pytest.fixture(scope="module")
def chromium() -> Iterator[str]:
    try:
        path = render_mod.find_chromium()
    except ConfigError as e:
        pytest.skip(f"opt-in JS rendering not testable here: {e}")
    yield path
    render_mod.shutdown_renderer()


def test_scripts_run_and_subrequests_obey_the_policy(tmp_path: Path, chromium: str) -> None:
    with LoopbackServer() as site, LoopbackServer() as private:
        private.route("/secret", body="SECRET", content_type="text/plain")
        page = (
            "<html><head><title>App</title></head><body><main><p id='m'>static text</p>"
            "<img src='/pic.png'></main><script src='/app.js'></script></body></html>"
        )
        script = f"""
            const m = document.getElementById('m');
            m.textContent = 'rendered by javascript';
            fetch('/data').then(r => r.text()).then(t => {{ m.textContent += ' ' + t; }});
            fetch('{private.url("/secret")}').then(r => r.text()).then(t => {{ m.textContent += ' ' + t; }},
                                                 () => {{ m.textContent += ' blocked'; }});
            fetch('http://169.254.169.254/latest/meta-data/').catch(() => {{}});
        """
        site.route("/app", body=page)
        site.route("/app.js", body=script, content_type="application/javascript")
        site.route("/data", body="DATA42", content_type="text/plain")
        site.route("/pic.png", body=b"\x89PNG", content_type="image/png")
        svc = FetchService(
            Workspace(tmp_path), FetchPolicy(allow_private=[site.host_port], render_js=True, timeout_s=20)
        )
        rec = svc.fetch(site.url("/app"))
        body = svc.workspace.body(rec.path)
        assert "rendered by javascript" in body and "DATA42" in body and "blocked" in body
        assert "static text" not in body and "SECRET" not in body
        assert rec.title == "App"
        assert private.count() == 0
        assert site.count("/app") == 1 and site.count("/pic.png") == 0 and site.count("/data") == 1
        svc.close()
