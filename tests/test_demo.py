"""``fte-shell demo``: the whole pipeline offline over the stdlib-docstring corpus, scripted policy."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from fte_shell.cli import app
from fte_shell.demo import DEMO_QUESTIONS, run_demo


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache") / "pydoc-corpus"


def test_demo_structured_profile_finds_the_real_answers(tmp_path: Path, corpus_dir: Path) -> None:
    buf = io.StringIO()
    results = run_demo(DEMO_QUESTIONS, tmp_path, profile="fte", corpus_dir=corpus_dir, console=Console(file=buf, width=200))
    assert [r.answer for r in results] == [a for _, a in DEMO_QUESTIONS]
    text = buf.getvalue()
    assert "SCRIPTED" in text and "not a language model" in text
    assert text.count("(matches the expected answer)") == len(DEMO_QUESTIONS)
    assert (corpus_dir / "meta.json").is_file()  # built on the fly into the cache dir
    for r in results:
        assert r.run_dir is not None and (r.run_dir / "result.json").is_file()
        assert list((r.run_dir / "workspace").glob("*.txt"))


@pytest.mark.docker
def test_demo_cli_shell_profile_end_to_end(tmp_path: Path, corpus_dir: Path, docker_ready: None) -> None:
    import docker

    out = tmp_path / "demo"
    res = CliRunner().invoke(
        app, ["demo", "--out", str(out), "--corpus-dir", str(corpus_dir)], env={"COLUMNS": "200"}
    )
    assert res.exit_code == 0, res.output
    text = res.output
    assert "SCRIPTED" in text and "hardened Docker sandbox" in text
    assert "$ search " in text and "$ fetch " in text and "$ grep -H -i -n -E" in text and "$ sed -n" in text
    assert text.count("(matches the expected answer)") == len(DEMO_QUESTIONS)
    runs = sorted(p for p in out.iterdir() if p.is_dir())
    assert len(runs) == len(DEMO_QUESTIONS)
    for run, (_, expected) in zip(runs, DEMO_QUESTIONS):
        r = json.loads((run / "result.json").read_text())
        assert r["answer"] == expected and r["profile"] == "shell" and r["tool_calls"]["bash"] >= 4
        kept = list((run / "workspace").glob("*.txt"))
        assert kept and all(p.read_text().startswith("Docid: ") for p in kept)
        assert "kept workspace" in text and kept[0].name in text
        left = docker.from_env().containers.list(all=True, filters={"label": f"fte-shell.run-id={r['run_id']}"})
        assert left == []
