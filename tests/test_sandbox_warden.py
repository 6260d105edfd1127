"""The warden's own logic, run on the host by bash (the same file is PID 1 of every sandbox): a sweep that
fails must still report ``SWEPT`` (the host must never wait for a report that does not come), a sweep
signal is acted on only with a new token from the host, the shell runs a command while its stdout is not
its stdout between commands, and a flood of signals cannot block the warden; and the host's reading of
the box's clock, which puts the command's start into the request."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from fte_shell.sandbox.ownership import box_clock_offset

REPO = Path(__file__).resolve().parent.parent
WARDEN = REPO / "sandbox" / "lib" / "warden.sh"


def warden(script: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in bash after sourcing the warden as a library (its main loop does not start)."""
    full = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "FTE_WARDEN_LIB": "1",
        "FTE_WARDEN_STATE": str(tmp_path / "state"),
        "FTE_WARDEN_REQUEST": str(tmp_path / "sweep"),
        **env,
    }
    return subprocess.run(
        ["bash", "-c", f"source {WARDEN}\n{script}"],
        env=full,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_warden_parses_as_bash() -> None:
    assert subprocess.run(["bash", "-n", str(WARDEN)], check=False).returncode == 0


def test_start_time_of_a_gone_process_fails(tmp_path: Path) -> None:
    proc = subprocess.Popen(["true"])
    proc.wait()
    res = warden(
        f'started_at {proc.pid} && echo "gone=$ST" || echo gone=none\n'
        'started_at $$ && echo "self=$ST"; uptime_cs; echo "up=$UP"',
        tmp_path,
    )
    out = dict(line.split("=", 1) for line in res.stdout.split())
    assert out["gone"] == "none"
    assert 0 < int(out["self"]) <= int(out["up"])  # hundredths of a second since boot


def test_sweep_reports_swept_even_when_the_kill_fails(tmp_path: Path) -> None:
    tty = tmp_path / "tty"  # stands in for the session's terminal
    tty.write_bytes(b"")
    (tmp_path / "state").write_text(f"999999999 {tty}\n")  # written once by the shell: pid, terminal
    # never the real kill_command here: it would sweep the host
    res = warden('kill_command() { echo "kill $1 $2 $3"; return 3; }\nsweep 01234 -; echo "rc=$?"', tmp_path)
    assert res.stdout.split("\n")[:2] == [f"kill 999999999 1234 {tty}", "rc=0"]  # "-": the terminal
    assert "sweep failed (status 3)" in res.stderr
    assert tty.read_bytes() == b"\n__FTE_SWEPT\n"
    # a request without a start time: nothing is killed, the report still comes
    tty.write_bytes(b"")
    res = warden('kill_command() { echo "kill $1"; }\nsweep "" /run/fte/sh-x.out', tmp_path)
    assert "kill" not in res.stdout and "without a start time" in res.stderr
    assert tty.read_bytes() == b"\n__FTE_SWEPT\n"


def test_no_state_no_sweep_and_no_report(tmp_path: Path) -> None:
    res = warden(
        'kill_command() { echo kill; }\nreport_swept() { echo report; }\nsweep 1234 -; echo "rc=$?"', tmp_path
    )
    assert res.stdout == "rc=0\n"


def test_a_sweep_needs_a_new_token_from_the_host(tmp_path: Path) -> None:
    script = (
        'sweep() { echo "sweep $LAST_REQUEST $1 $2"; }\n'
        "WANTED=1 handle_request\n"  # a signal but no request file: nothing
        f"echo tok1 1234 /run/fte/sh-a.out > {tmp_path / 'sweep'}; WANTED=1 handle_request\n"  # host asked
        'WANTED=1 handle_request; echo "wanted=[$WANTED]"\n'  # the same token again (the agent): nothing
        f"echo tok2 5678 > {tmp_path / 'sweep'}; handle_request\n"
    )
    res = warden(script, tmp_path)
    assert res.stdout.splitlines() == ["sweep tok1 1234 /run/fte/sh-a.out", "wanted=[]", "sweep tok2 5678 -"]


def test_the_shell_runs_a_command_while_its_stdout_is_not_its_idle_one(tmp_path: Path) -> None:
    idle, out = tmp_path / "idle", tmp_path / "o.1"
    os.mkfifo(idle)
    # stand-ins for the shell: one writes to its idle stdout (a FIFO, as the channel), one to a command's file
    reader = os.open(idle, os.O_RDONLY | os.O_NONBLOCK)
    with open(idle, "wb") as idle_w, open(out, "wb") as out_w:
        between = subprocess.Popen(["sleep", "60"], stdout=idle_w)
        running = subprocess.Popen(["sleep", "60"], stdout=out_w)
    try:
        res = warden(
            f"in_command {between.pid} {idle} && echo between-runs || echo between-idle\n"
            f"in_command {running.pid} {idle} && echo running-runs || echo running-idle\n"
            f"in_command 999999999 {idle} && echo gone-runs || echo gone-idle",  # unreadable: assume it runs
            tmp_path,
        )
        assert res.stdout.split() == ["between-idle", "running-runs", "gone-runs"], res.stderr
    finally:
        os.close(reader)
        for p in (between, running):
            p.kill()
            p.wait()


def test_the_box_clock_offset_is_exact_on_a_shared_clock_and_early_on_another() -> None:
    now = time.clock_gettime(time.CLOCK_BOOTTIME)
    assert box_clock_offset(int(now * 100) / 100, now - 0.005, now + 0.002) == 0.0  # read in between
    # gVisor: its own uptime (here 3.25 s) read somewhere between sent and received: the offset that makes
    # the box's time come out earliest
    assert box_clock_offset(3.25, 1000.0, 1000.2) == pytest.approx(3.25 - 1000.2)


def test_a_flood_of_signals_leaves_at_most_one_wake_up(tmp_path: Path) -> None:
    fifo = tmp_path / "tick"
    script = (
        f"mkfifo {fifo}; exec {{TICK_FD}}<>{fifo}\n"
        "for i in $(seq 70000); do on_usr1; done\n"  # would fill a 64 KiB pipe and block if unbounded
        'n=0; while read -r -t 0.05 -u "$TICK_FD" _; do n=$((n+1)); done; echo "wakeups=$n"\n'
        'WANTED=; on_usr1; read -r -t 1 -u "$TICK_FD" _ && echo woke'
    )
    res = warden(script, tmp_path)  # (a blocked warden would raise TimeoutExpired)
    assert res.stdout.splitlines() == ["wakeups=1", "woke"], res.stderr


def test_the_warden_starts_a_shell_only_as_pid_1_and_once_per_request(tmp_path: Path) -> None:
    """A spawn request is followed only by a warden that is PID 1 (its `kill -1` would otherwise end
    processes outside the box) and only once per token (the agent's signals repeat none)."""
    from fte_shell.sandbox.warden_shell import write_spawn_request

    marker = tmp_path / "started"
    write_spawn_request(tmp_path, "/dev/pts/0", ["touch", str(marker)])
    spawn = tmp_path / "spawn"
    r = warden("handle_spawn; handle_spawn; wait", tmp_path, FTE_WARDEN_SPAWN=str(spawn))
    assert not marker.exists()
    assert r.stderr.count("a spawn request it cannot follow") == 1, r.stderr
    bad = tmp_path / "bad"
    bad.write_bytes(b"tok /tmp/not-a-terminal\ntouch\0" + str(marker).encode() + b"\0")
    r = warden("handle_spawn", tmp_path, FTE_WARDEN_SPAWN=str(bad))
    assert not marker.exists() and "cannot follow" in r.stderr
