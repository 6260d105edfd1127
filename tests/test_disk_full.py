"""A full disk (issue 16 item 11), for real: a small tmpfs mounted as root is the sweep's ``--out``, filled
with a file. ``bench`` stops starting runs, says in one line which path is full and how to resume, exits
non-zero, and leaves no file half-written; after space is freed the same command resumes and every run is
valid. Not root (or no mount permission) is a skip on a developer machine and a failure under CI."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import IN_CI, REPO, trajectory

from fte_shell.record.events import ModelCallEvent, StartEvent
from fte_shell.record.jsonio import DiskFull
from fte_shell.record.rundir import RunWriter, find_runs, read_result
from fte_shell.stops import RESULT_STOP_REASONS, stop_of_exception


def _mount_problem(target: Path) -> str | None:
    if os.geteuid() != 0:
        return "needs root (mounts a tmpfs)"
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(target)], capture_output=True, text=True, check=False)
    if r.returncode != 0:
        return f"cannot mount a tmpfs: {r.stderr.strip()}"
    return None


@contextlib.contextmanager
def small_fs(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    problem = _mount_problem(mnt)
    if problem:
        if IN_CI:
            pytest.fail(problem)
        pytest.skip(problem)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def fill(mnt: Path, leave: int = 0) -> Path:
    """Fill ``mnt`` completely, then free about ``leave`` bytes (whole pages). Returns the filler file."""
    filler = mnt / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        for size in (65536, 4096, 1):
            with contextlib.suppress(OSError):
                while os.write(fd, b"\0" * size):
                    pass
    finally:
        os.close(fd)
    if leave:
        os.truncate(filler, max(0, filler.stat().st_size - leave))
    return filler




def test_a_trajectory_write_on_a_full_disk_names_the_file_and_stops_disk_full(tmp_path: Path) -> None:
    with small_fs(tmp_path) as mnt:
        w = RunWriter(mnt / "run")
        w.write(StartEvent(question="q?"))
        fill(mnt)
        with pytest.raises(DiskFull) as e:
            w.write(ModelCallEvent(turn=1, message={"content": "x" * 100_000}))
        assert e.value.path == mnt / "run" / "trajectory.jsonl"
        assert stop_of_exception(e.value) == "disk_full" and "\n" not in str(e.value)
        w.close()  # closes although the buffer cannot be written


def bench(out: Path, hotpotqa_dir: Path, hotpotqa_corpus: Path) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, "-m", "fte_shell", "bench", f"hotpotqa:{hotpotqa_dir}", "--profiles", "fte,open-find",
            "--limit", "4", "--out", str(out), "--scripted", "--corpus-dir", str(hotpotqa_corpus), "--no-progress",
            "-j", "2"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "400"}
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=600, cwd=REPO, check=False)


def no_half_written_file(out: Path) -> None:
    assert not [p for p in out.rglob("*.tmp")], "a temporary file was left behind"
    for p in out.rglob("*.json"):
        json.loads(p.read_text())  # every JSON file whole
    if (out / "questions.jsonl").exists():
        for line in (out / "questions.jsonl").read_text().splitlines():
            json.loads(line)
    for d, *_ in find_runs(out):
        if read_result(d) is not None:  # a finished run: its trajectory is whole and ends
            lines = (d / "trajectory.jsonl").read_text().splitlines()
            assert [json.loads(x)["type"] for x in lines][-1] == "end"


@pytest.mark.parametrize("leave", [0, 200 * 1024], ids=["full-from-the-start", "fills-up-during-the-runs"])
def test_bench_on_a_full_disk_stops_in_one_line_and_resumes(
    tmp_path: Path, hotpotqa_dir: Path, hotpotqa_corpus: Path, leave: int
) -> None:
    with small_fs(tmp_path) as mnt:
        out = mnt / "sweep"
        out.mkdir()
        filler = fill(mnt, leave)
        r = bench(out, hotpotqa_dir, hotpotqa_corpus)
        assert r.returncode == 3, (r.returncode, r.stdout, r.stderr)  # a resource gave out (as when it gave up waiting)
        lines = [x for x in r.stderr.splitlines() if x.strip()]
        assert len(lines) == 1, r.stderr
        assert lines[0].startswith("error: disk full: no space left on the device holding " + str(mnt))
        assert "free space there, then rerun the same command to resume" in lines[0]
        assert "Traceback" not in r.stdout + r.stderr
        no_half_written_file(out)
        finished = [d for d, *_ in find_runs(out) if read_result(d) is not None]
        if leave:  # some runs finished before the disk filled up; the sweep started no more after that
            assert 1 <= len(finished) < 8 and len(find_runs(out)) < 8, find_runs(out)
        else:
            assert finished == []

        filler.unlink()
        r = bench(out, hotpotqa_dir, hotpotqa_corpus)
        assert r.returncode == 0, (r.stdout, r.stderr)
        runs = find_runs(out)
        assert len(runs) == 8
        for d, *_ in runs:
            res = read_result(d)
            assert res is not None and res["stop_reason"] in RESULT_STOP_REASONS, (d, res)
            assert trajectory(d)[-1]["type"] == "end"
        assert json.loads((out / "sweep.json").read_text())["status"] == "finished"
        no_half_written_file(out)
