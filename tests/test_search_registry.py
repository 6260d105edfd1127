"""The search backend registry: docs/search.md's "Adding a search backend" example, loaded exactly as
written there as ``[search] backend = "module:Class"`` (no change to fte-shell), searched, probed, described,
recorded in a real snapshot and replayed without it; its secret travels like the built-in ones; bad
references are one-line errors naming the setting."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fte_shell.config import RunConfig, SearchConfig
from fte_shell.errors import ConfigError
from fte_shell.search import CachedSearch, backend_name, make_search
from fte_shell.search.registry import BACKENDS, plugin, secrets, selected
from fte_shell.sweep.outage import SearchProbe

DOC = Path(__file__).resolve().parents[1] / "docs" / "search.md"
REF = "notes_search:NotesBackend"


@pytest.fixture()
def notes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The documented example as its own module on the path, and a notes file."""
    section = DOC.read_text().split("## Adding a search backend", 1)[1]
    code = re.search(r"```python\n# notes_search\.py\n(.*?)```", section, re.DOTALL)
    assert code, "docs/search.md lost its example"
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "notes_search.py").write_text(code.group(1))
    monkeypatch.syspath_prepend(str(tmp_path / "mods"))
    path = tmp_path / "notes.jsonl"
    path.write_text("".join(json.dumps(n) + "\n" for n in [
        {"id": "n1", "title": "Garden plan", "text": "The saltmarsh garden was laid out by Ada Reed in 1921."},
        {"id": "n2", "title": "Quay", "text": "Tern Quay was dredged in 1880 by the harbour board."},
        {"id": "n3", "title": "Garden visitors", "text": "The garden opens in May."}]))
    return path


def test_the_documented_backend_plugs_in_by_reference(notes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = SearchConfig(backend=REF, options={"path": str(notes)})
    assert selected(cfg).name == "notes" and backend_name(cfg) == "notes:notes.jsonl"
    search = make_search(cfg)
    assert isinstance(search, CachedSearch) and search.name == "notes:notes.jsonl"
    results = search.search("saltmarsh garden", 5)
    assert [(r.rank, r.url, r.score) for r in results] == [(1, "n1", 2.0), (2, "n3", 1.0)]
    assert SearchProbe(cfg).check() is None
    assert "missing" in (SearchProbe(SearchConfig(backend=REF, options={"path": str(notes) + ".gone"})).check() or "")

    from fte_shell.cli.run import describe_search

    assert describe_search(RunConfig(search=cfg)) == f"search: the notes in {notes}"
    # its secret travels like the built-in ones: into a Ray worker's environment, and into a fork
    assert {s.env for s in secrets(cfg)} >= {"SERPER_API_KEY", "NOTES_TOKEN"}
    from fte_shell.distributed.runenv import strip_secrets

    monkeypatch.setenv("NOTES_TOKEN", "t0k")
    _, env = strip_secrets(RunConfig(search=cfg))
    assert env["NOTES_TOKEN"] == "t0k"


def test_recorded_in_a_snapshot_and_replayed_without_the_backend(notes: Path, tmp_path: Path) -> None:
    from fte_shell.world import World

    def world(mode: str) -> World:
        cfg = RunConfig.model_validate({"search": {"backend": REF, "options": {"path": str(notes)}},
                                        "snapshot": {"dir": str(tmp_path / "snap"), "mode": mode}})
        return World.from_config(cfg, manifest=tmp_path / f"{mode}.jsonl")

    with world("record") as w, w.bind("r1", tmp_path / "run1") as rw:
        assert rw.search is not None
        recorded = [r.to_dict() for r in rw.search.search("tern quay", 3)]
    assert recorded and recorded[0]["url"] == "n2"
    notes.unlink()  # the backend could not answer now
    with world("replay") as w, w.bind("r2", tmp_path / "run2") as rw:
        assert rw.search is not None
        assert [r.to_dict() for r in rw.search.search("tern quay", 3)] == recorded


@pytest.mark.parametrize(("backend", "message"), [
    ("notes_search:Nothing", r"\[search\] backend = 'notes_search:Nothing'.*no attribute"),
    ("json:dumps", r"is no search backend plugin"),
    ("nosuch", r"unknown search backend 'nosuch'"),
])
def test_bad_backends_name_the_setting(notes: Path, backend: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make_search(SearchConfig(backend=backend))


def test_the_config_refuses_what_is_no_backend_name() -> None:
    with pytest.raises(ValueError, match="module:Class"):
        SearchConfig(backend="not a backend")
    assert BACKENDS.names() == ["serper", "local", "none"]
    assert plugin("serper").search_params("q", 500) == {"num": 100, "q": "q"}  # Serper's body, as recorded before
    assert plugin("local").search_params("q", 5) == {"n": 5, "q": "q"}
