"""The readers' side of the typed run record: every event the repository's fixtures hold and every event a
fresh scripted sweep writes (every profile, the shell one in the real sandbox) is read by
``fte_shell.record.rundir.read_events`` as its KNOWN model — never the ``OtherEvent`` fallback, which is
what a reader gets for an unknown type or a known type whose fields do not fit — and the model holds every
key written (dumped back, it is the line on disk, the start's ``schema_version`` of an old run aside).
A reader that needs a field reads it from the model, so an event that fell back would be invisible to it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO
from typer.testing import CliRunner

from fte_shell.cli import app
from fte_shell.profiles import PROFILES
from fte_shell.record.events import EVENT_TYPES, OtherEvent, event_dict
from fte_shell.record.rundir import TRAJECTORY, find_runs, read_events
from fte_shell.stops import is_infra_failure

FIXTURES = REPO / "tests" / "fixtures"


def _raw(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (run_dir / TRAJECTORY).read_text().splitlines() if x.strip()]


def check_known(run_dir: Path) -> list[str]:
    """The run's event types, after checking each is read as its known model holding every key written."""
    events, raw = read_events(run_dir), _raw(run_dir)
    assert len(events) == len(raw), run_dir  # no line dropped
    fell_back = [(i, e.type) for i, e in enumerate(events) if isinstance(e, OtherEvent)]
    assert not fell_back, f"{run_dir}: events read as OtherEvent: {fell_back}"
    for e, line in zip(events, raw, strict=True):
        assert type(e) is EVENT_TYPES[line["type"]]
        old_start = line["type"] == "start" and "schema_version" not in line
        assert event_dict(e) == ({**line, "schema_version": 0} if old_start else line), (run_dir, line["type"])
    return [e.type for e in events]


def test_every_fixture_event_is_read_as_its_known_model() -> None:
    runs = sorted(p.parent for p in FIXTURES.rglob(TRAJECTORY))
    assert len(runs) >= 7  # the v0 sweep's six runs and the lone run
    for d in runs:
        check_known(d)


def test_the_checker_sees_an_event_whose_fields_do_not_fit(tmp_path: Path) -> None:
    (tmp_path / TRAJECTORY).write_text(json.dumps({"type": "start", "t": 0, "question": "q"}) + "\n"
                                       + json.dumps({"type": "tool_call", "t": 1, "turn": "two", "name": "x"}) + "\n")
    with pytest.raises(AssertionError, match=r"OtherEvent: \[\(1, 'tool_call'\)\]"):
        check_known(tmp_path)


def test_every_event_of_a_fresh_scripted_sweep_is_read_as_its_known_model(
        tmp_path: Path, hotpotqa_dir: Path, docker_ready: None) -> None:
    out = tmp_path / "sweep"
    r = CliRunner().invoke(app, ["bench", f"hotpotqa:{hotpotqa_dir}", "--profiles", ",".join(PROFILES),
                                 "--limit", "2", "--out", str(out), "--scripted", "--no-progress", "-j", "4"])
    assert r.exit_code == 0, r.output
    runs = find_runs(out)
    assert {p for _, p, _, _ in runs} == set(PROFILES) and len(runs) == 2 * len(PROFILES)
    seen: set[str] = set()
    for d, *_ in runs:
        assert not is_infra_failure(json.loads((d / "result.json").read_text())["stop_reason"]), d
        seen.update(check_known(d))
    assert {"start", "model_call", "tool_call", "end"} <= seen
