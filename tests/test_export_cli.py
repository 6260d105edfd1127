"""``fte-shell export``: one command path for every exporter of ``fte_shell.export.base.EXPORTERS``, on the
checked-in run records of tests/fixtures/v0 (a sweep of 3 profiles × 2 questions and a lone run).

The built-ins' command lines of before the registry write the same files (the names below are what the
hand-written commands wrote on these records); a third-party exporter (tests/thirdparty_plugins.py
``AnswersTable``, the text docs/export.md "Adding an exporter" shows) runs by ``module:attr`` with its
options as flags; a bad option is one line."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
from conftest import REPO
from typer.testing import CliRunner

from fte_shell.cli import app
from fte_shell.export.base import EXPORTERS, Exporter
from fte_shell.record.rundir import find_runs

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
FIXTURES = REPO / "tests" / "fixtures" / "v0"
REF = "tests.thirdparty_plugins:EXPORTER"
runner = CliRunner()


@pytest.fixture
def records(tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the fixture sweep (``sw``) and lone run (``run``)."""
    shutil.copytree(FIXTURES / "sweep", tmp_path / "sw")
    shutil.copytree(FIXTURES / "run", tmp_path / "run")
    return tmp_path / "sw", tmp_path / "run"


def _need(module: str) -> None:
    """Skip without the library on a developer machine; under CI the test extra installs it."""
    try:
        __import__(module)
    except ImportError:
        if IN_CI:
            pytest.fail(f"{module} is missing (the test extra installs it)")
        pytest.skip(f"{module} is missing")


def _files(d: Path) -> list[str]:
    return sorted(p.relative_to(d).as_posix() for p in d.rglob("*") if p.is_file())


def test_every_built_in_is_an_exporter_listed_with_its_summary() -> None:
    assert EXPORTERS.names() == ["inspect", "atif", "browsecomp-plus"]
    for name in EXPORTERS:
        ex = EXPORTERS.get(name)
        assert isinstance(ex, Exporter) and ex.name == name and ex.reads in ("runs", "sweep")
    r = runner.invoke(app, ["export", "--help"], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    for name in EXPORTERS:
        assert name in text and " ".join(EXPORTERS.get(name).summary.split()[:6]) in text


def test_the_old_command_lines_write_the_same_files(records: tuple[Path, Path], tmp_path: Path) -> None:
    _need("inspect_ai")
    _need("atif")
    sw, run = records
    cells = ["hotpotqa_fte_scripted", "hotpotqa_open-find_scripted", "hotpotqa_shell_scripted"]
    arms = [f"{a}/{q}/r0.json" for a in ("fte", "open-find", "shell")
            for q in ("5a85355a5542997b5ce3ffc8", "5a8c62945542996e8ac88a98")]
    for argv, out, want in (
        (["inspect", sw, run], "insp", [f"{c}.eval" for c in cells] + ["runs_shell_scripted-research-policy.eval"]),
        (["inspect", sw, "--format", "json"], "json", [f"{c}.json" for c in cells]),
        (["atif", sw, run], "atif", ["run/shell/run/r0.json"] + [f"sw/{a}" for a in arms]),
        (["atif", sw], "atif1", arms),
    ):
        r = runner.invoke(app, ["export", *map(str, argv), "--out", str(tmp_path / out), "--no-progress"])
        assert r.exit_code == 0, r.output
        assert _files(tmp_path / out) == want
    r = runner.invoke(app, ["export", "inspect", str(run), "--out", str(tmp_path / "one.eval"), "--no-progress"])
    assert r.exit_code == 0 and "wrote 1 eval log(s) for 1 run(s)" in r.output, r.output
    assert (tmp_path / "one.eval").is_file()
    r = runner.invoke(app, ["export", "inspect", str(sw), "--out", str(tmp_path / "two.eval"), "--no-progress"])
    assert r.exit_code == 2 and "3 (dataset, arm, model) cells" in r.output and not (tmp_path / "two.eval").exists()
    # a built-in's option is checked by its model, a sweep exporter takes one sweep
    r = runner.invoke(app, ["export", "inspect", str(sw), "--out", str(tmp_path / "x"), "--format", "xml"])
    assert r.exit_code == 2 and "export inspect: option format: Input should be 'eval' or 'json'" in r.output
    r = runner.invoke(app, ["export", "browsecomp-plus", str(sw), str(run), "--out", str(tmp_path / "x")])
    assert r.exit_code == 2 and "export browsecomp-plus reads one sweep directory, not 2 paths" in r.output
    assert not (tmp_path / "x").exists()


def test_a_third_party_exporter_runs_by_reference(records: tuple[Path, Path], tmp_path: Path) -> None:
    sw, run = records
    r = runner.invoke(app, ["export", REF, "--help"], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert "--gold" in r.output and "--file-name" in r.output and "as a last column" in r.output
    out = tmp_path / "out"
    r = runner.invoke(app, ["export", REF, str(sw), str(run), "--out", str(out), "--gold", "--file-name", "a.tsv",
                            "--no-progress"])
    assert r.exit_code == 0, r.output
    assert "wrote 1 table(s) for 7 run(s)" in r.output and _files(out) == ["a.tsv"]
    rows = [line.split("\t") for line in (out / "a.tsv").read_text().splitlines()]
    golds = {q["id"]: q["answer"] for q in map(json.loads, (sw / "questions.jsonl").read_text().splitlines())}
    want = []
    for d, profile, qid, rep in find_runs(sw):
        res = json.loads((d / "result.json").read_text())
        want.append([profile, qid, str(rep), res["stop_reason"], " ".join(res["answer"].split()), golds[qid]])
    res = json.loads((run / "result.json").read_text())
    want.append([res["profile"], "run", "0", res["stop_reason"], res["answer"], ""])
    assert rows == want
    r = runner.invoke(app, ["export", REF, str(run), "--out", str(out), "--no-progress"])  # the defaults
    assert r.exit_code == 0 and len((out / "answers.tsv").read_text().split("\t")) == 5
    r = runner.invoke(app, ["export", REF, str(sw), "--out", str(out), "--colour", "red"])
    assert r.exit_code == 2
    assert r.output.strip() == (f"error: export {REF}: no option --colour (its options: --gold, --file-name; "
                                "see --help)")
    r = runner.invoke(app, ["export", "tests.thirdparty_plugins:NOTHING", str(sw), "--out", str(out)])
    assert r.exit_code == 2 and "has no attribute 'NOTHING'" in r.output
    r = runner.invoke(app, ["export", "answers-table", str(sw), "--out", str(out)])
    assert r.exit_code == 2 and "unknown exporter 'answers-table' (known: inspect, atif, browsecomp-plus" in r.output


def test_the_docs_show_the_exporter_the_test_loads() -> None:
    """docs/export.md "Adding an exporter" holds tests/thirdparty_plugins.py's exporter as written there."""
    doc = (REPO / "docs" / "export.md").read_text()
    block = re.search(r"## Adding an exporter\n.*?```python\n(.*?)```", doc, re.DOTALL)
    assert block, "docs/export.md lost its example"
    source = (REPO / "tests" / "thirdparty_plugins.py").read_text()
    imports, _, body = block.group(1).partition("\n\n\n")
    assert all(line in source.splitlines() for line in imports.splitlines() if not line.startswith("#")), imports
    assert body.strip() and body in source
