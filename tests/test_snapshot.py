"""Reproducible web (fte_shell.snapshot): record from loopback servers, stop them, replay byte for byte;
the archives open with warcio's own tools; misses, fail-run, pins, concurrent writers, a lost index."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from warcio.archiveiterator import ArchiveIterator

from fte_shell.config import RunConfig
from fte_shell.errors import FetchRefused
from fte_shell.fetch import FetchService
from fte_shell.policies import ResearchPolicy
from fte_shell.recorder import read_trajectory
from fte_shell.runner import run_question
from fte_shell.scripted import ScriptedServer
from fte_shell.snapshot import Snapshot, SnapshotMiss, SnapshotStore, open_store
from fte_shell.workspace import Workspace
from tests.servers import FakeSerper, LoopbackServer

Q = "Who dredged the Tern Quay harbour?"
HARBOUR = """<html><head><title>Tern Quay harbour</title></head><body><main>
<h1>Tern Quay harbour</h1>
<p>The Tern Quay harbour was dredged in 1887 by the engineer Lio Brand.</p>
<p>Its breakwater is 640 metres long. Ferries leave for the outer islands every morning.</p>
</main></body></html>"""
BREAKWATER = """<html><head><title>Breakwaters of Tern Quay</title></head><body><article>
<p>The breakwater of the Tern Quay harbour was rebuilt after the storm of 1903.</p>
</article></body></html>"""


class Web:
    """The loopback web of these tests: two pages (one behind a redirect), a 404, and a Serper."""

    def __init__(self) -> None:
        self.pages = LoopbackServer().start()
        self.set_harbour(HARBOUR)
        self.pages.route("/breakwater", body=BREAKWATER)
        self.pages.redirect("/old-breakwater", "/breakwater", 301)
        self.pages.route("/gone", status=404, body="no such page")
        self.serper = FakeSerper([
            {"title": "Tern Quay harbour", "link": self.pages.url("/tern-quay"), "snippet": "dredged in 1887", "position": 1},
            {"title": "Breakwaters", "link": self.pages.url("/old-breakwater"), "snippet": "the breakwater", "position": 2},
            {"title": "Gone", "link": self.pages.url("/gone"), "snippet": "Tern Quay harbour dredged", "position": 3},
        ])

    def set_harbour(self, html: str) -> None:
        self.pages.route("/tern-quay", body=html)

    def close(self) -> None:
        self.pages.stop()
        self.serper.close()


def config(model_url: str, web: Web | None, profile: str, snap: Path, mode: str, **snapshot: Any) -> RunConfig:
    allow = [web.pages.host_port] if web is not None else []
    serper_url = web.serper.url if web is not None else SERPER_URL[0]
    return RunConfig.model_validate({
        "model": {"base_url": model_url, "model": "scripted", "max_retries": 0, "backoff_s": 0.01},
        "agent": {"profile": profile, "current_date": "2026-11-30", "max_turns": 20},
        "search": {"backend": "serper", "serper_url": serper_url, "num_results": 3,
                   **({"serper_api_key": "serper-key"} if web is not None else {})},  # a replay needs no key
        "sandbox": {"fetch_policy": {"allow_private": allow}},
        "snapshot": {"dir": str(snap), "mode": mode, **snapshot},
    })


SERPER_URL: list[str] = [""]


def run(profile: str, snap: Path, mode: str, out: Path, web: Web | None = None, **snapshot: Any) -> Any:
    with ScriptedServer(policy=ResearchPolicy()) as srv:
        return run_question(Q, config(srv.base_url, web, profile, snap, mode, **snapshot), out, qid="q1")


def observations(run_dir: Path) -> list[tuple[str, str]]:
    return [(e["name"], e["observation"]) for e in read_trajectory(run_dir) if e["type"] == "tool_call"]


def files(run_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((run_dir / "workspace").glob("*.txt"))}


STRUCTURED = ["fte", "open-find", "visit-snippet", "visit-summary", "snippet-only"]


def test_record_stop_replay_is_byte_identical_for_every_structured_profile(tmp_path: Path) -> None:
    snap = tmp_path / "snap"
    web = Web()
    SERPER_URL[0] = web.serper.url
    try:
        recorded = {p: run(p, snap, "record", tmp_path / "rec" / p, web) for p in STRUCTURED}
    finally:
        web.close()
    assert all(r.stop_reason == "answer" for r in recorded.values()), {p: r.stop_reason for p, r in recorded.items()}
    for p in STRUCTURED:
        replayed = run(p, snap, "replay", tmp_path / "rep" / p)
        assert replayed.answer == recorded[p].answer
        assert observations(tmp_path / "rep" / p) == observations(tmp_path / "rec" / p), p
        assert files(tmp_path / "rep" / p) == files(tmp_path / "rec" / p), p
    fte_files = files(tmp_path / "rec" / "fte")
    assert len(fte_files) >= 2  # the harbour and the breakwater (behind its redirect)
    result = json.loads((tmp_path / "rep" / "fte" / "result.json").read_text())
    assert result["meta"]["snapshot"]["mode"] == "replay" and result["meta"]["snapshot"]["replayed"] is True
