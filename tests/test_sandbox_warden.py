"""The warden's error paths, run on the host (the same file is PID 1 of every sandbox): a sweep that fails
must neither end the warden (the container would go with it) nor leave the host waiting for ``SWEPT``."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import time
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def warden() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fte_warden", REPO / "sandbox" / "lib" / "warden.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_failing_action_is_logged_not_raised(
    warden: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    def sweep() -> None:
        raise RuntimeError("boom")

    warden._guarded(sweep)
    assert "fte-shell warden: sweep failed: RuntimeError('boom')" in capsys.readouterr().err


def test_start_time_of_a_gone_process_is_none(warden: ModuleType) -> None:
    proc = subprocess.Popen(["true"])
    proc.wait()
    assert warden._started_at(proc.pid) is None
    mine = warden._started_at(os.getpid())
    assert mine is not None and 0 < mine <= time.clock_gettime(time.CLOCK_BOOTTIME)


def test_sweep_reports_swept_even_when_the_kill_fails(
    warden: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tty = tmp_path / "tty"  # stands in for the session's terminal
    tty.write_bytes(b"")
    state = tmp_path / "state"
    state.write_text(f"999999999 {tty}\nrun 12.34\n")
    monkeypatch.setattr(warden, "STATE", str(state))
    calls: list[tuple[int, float]] = []

    def failing_kill(shell_pid: int, t0: float) -> None:  # never the real one: it would sweep the host
        calls.append((shell_pid, t0))
        raise OSError("proc vanished")

    monkeypatch.setattr(warden, "_kill_command", failing_kill)
    with pytest.raises(OSError):
        warden.sweep()
    assert calls == [(999999999, 12.34)]
    assert tty.read_bytes() == b"\n__FTE_SWEPT\n"
    # an idle shell: nothing is killed, the report still comes
    state.write_text(f"999999999 {tty}\nidle 0\n")
    tty.write_bytes(b"")
    warden.sweep()
    assert calls == [(999999999, 12.34)]
    assert tty.read_bytes() == b"\n__FTE_SWEPT\n"
