"""fte-shell warden: the sandbox container's main process.

By default it is PID 1 (``SandboxConfig.protect_warden``): the kernel drops signals sent to a namespace's
PID 1 from inside the namespace unless it handles them, so nothing the agent runs can stop it, and it
reaps the zombies re-parented to it. Only the host reaches it (``docker kill``).

1. Dead-man timer: exits after TTL seconds, so the container stops (and is auto-removed) even when the
   harness that started it was SIGKILLed.
2. Fork-bomb breaker: every half second it reads the pids cgroup; when the container has used 90 % of its
   process limit for a second, it kills every process except the session shell, PID 1 and itself (a
   fork bomb left running in the background would otherwise make every later command fail to fork).
3. Timeout enforcer: on SIGUSR1 (sent by the host with ``docker kill --signal USR1``; no new process has
   to be created inside the container, so this works even when a fork bomb holds every pid) it freezes
   every process that started after the current command began (all but the session shell, PID 1 and
   itself), kills those that ignore SIGINT, sends SIGINT to the rest and to the shell together (like
   Ctrl-C: the shell abandons the rest of the command), kills whatever is left, interrupts a builtin
   loop in the shell (or kills the shell when it ignores SIGINT: the host then starts a new one), and
   writes a ``SWEPT`` line to the session's terminal so the host knows the sweep is over. A sweep that
   fails is logged and still reports ``SWEPT``; it never ends the warden.

The session shell describes the running command in ``/opt/fte/run/state``: ``SHELL_PID TTY`` on the first
line (written once per shell), ``run UPTIME`` or ``idle UPTIME`` on the second (written before and after
every command, with shell builtins only).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable

STATE = "/opt/fte/run/state"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def _read_state() -> tuple[int, str, str, float] | None:
    try:
        with open(STATE, encoding="ascii", errors="replace") as f:
            first = f.readline().split()
            second = f.readline().split()
        return int(first[0]), first[1], second[0], float(second[1])
    except (OSError, ValueError, IndexError):
        return None


def _started_at(pid: int) -> float | None:
    """Seconds since boot at which ``pid`` started (None if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        return int(data[data.rfind(b")") + 2 :].split()[19]) / CLK_TCK
    except (OSError, ValueError, IndexError):  # gone, or exiting while we read
        return None


def _ignores_sigint(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("SigIgn:"):
                    return bool(int(line.split()[1], 16) & (1 << (signal.SIGINT - 1)))
    except (OSError, ValueError, IndexError):
        pass
    return False


def _targets(t0: float, protect: set[int]) -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        if pid in protect:
            continue
        start = _started_at(pid)
        if start is not None and start >= t0 - 0.011:
            out.append(pid)
    return out


def _signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def _still_running(t0: float) -> bool:
    state = _read_state()
    return state is not None and state[2] == "run" and state[3] == t0


def sweep() -> None:
    """Kill the running command's processes, then report ``SWEPT`` on the session's terminal (also when
    the kill failed half-way: the host must never wait for a report that does not come)."""
    state = _read_state()
    if state is None:
        return
    shell_pid, tty, phase, t0 = state
    try:
        if phase == "run":  # else no command runs (it ended just now): background jobs are left alone
            _kill_command(shell_pid, t0)
    finally:
        _report_swept(tty)


def _kill_command(shell_pid: int, t0: float) -> None:
    protect = {1, os.getpid(), os.getppid(), shell_pid}
    pids = _targets(t0, protect)
    running = _still_running(t0)
    if pids:
        # Like Ctrl-C first: the shell and the command's processes get SIGINT together, so a foreground
        # child that dies of SIGINT makes the shell (and any bash in between) abandon the rest of the
        # command (later items of a list, a loop). Everything is frozen first, so nothing forks in
        # between; processes that ignore SIGINT (background jobs) are killed before anything resumes,
        # so a background subshell cannot go on to its next command.
        _signal_all(pids, signal.SIGSTOP)
        ignoring = [p for p in pids if _ignores_sigint(p)]
        _signal_all(ignoring, signal.SIGKILL)
        rest = [p for p in pids if p not in set(ignoring)]
        _signal_all(rest, signal.SIGINT)
        if running:
            _signal_all([shell_pid], signal.SIGINT)
        _signal_all(rest, signal.SIGCONT)
        time.sleep(0.03)
    elif running and _ignores_sigint(shell_pid):
        # a loop of builtins in a shell that ignores SIGINT (`trap '' INT`): nothing can interrupt it.
        # End the shell: the host sees it die and starts a fresh one in the same directory.
        _signal_all([shell_pid], signal.SIGKILL)
        return
    elif running:  # a loop of shell builtins in the shell itself
        _signal_all([shell_pid], signal.SIGINT)
    for _ in range(100):
        pids = _targets(t0, protect)
        if not pids:
            break
        _signal_all(pids, signal.SIGSTOP)  # freeze first, so a fork bomb cannot outrun the kill
        _signal_all(pids, signal.SIGKILL)
        time.sleep(0.01)
    time.sleep(0.03)
    if _still_running(t0):  # SIGINT was caught or came too early: once more
        _signal_all([shell_pid], signal.SIGINT)


def _report_swept(tty: str) -> None:
    """Tell the host, on the session's terminal, that the sweep is over."""
    try:
        fd = os.open(tty, os.O_WRONLY | os.O_NOCTTY)
        try:
            os.write(fd, b"\n__FTE_" + b"SWEPT\n")
        finally:
            os.close(fd)
    except OSError:
        pass


def _pids_usage() -> tuple[int, int] | None:
    for base in ("/sys/fs/cgroup/pids", "/sys/fs/cgroup"):
        try:
            with open(f"{base}/pids.current") as f:
                cur = int(f.read())
            with open(f"{base}/pids.max") as f:
                raw = f.read().strip()
            return cur, (int(raw) if raw.isdigit() else 0)
        except (OSError, ValueError):
            continue
    return None


def break_fork_bomb() -> None:
    """Kill everything but PID 1, the warden and the session shell."""
    state = _read_state()
    protect = {1, os.getpid(), os.getppid()}
    if state is not None:
        protect.add(state[0])
    for _ in range(100):
        usage = _pids_usage()
        if usage is not None and usage[1] > 0 and usage[0] < 0.5 * usage[1]:
            break  # the bomb is gone; leave the processes started since alone
        pids = _targets(0.0, protect)
        if not pids:
            break
        _signal_all(pids, signal.SIGSTOP)
        _signal_all(pids, signal.SIGKILL)
        time.sleep(0.01)


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _guarded(action: Callable[[], None]) -> None:
    """Run a sweep; an error in it is logged, never fatal: the warden's exit would end the container (and
    with it the question) while the session is still in use."""
    try:
        action()
    except Exception as e:  # noqa: BLE001
        print(f"fte-shell warden: {action.__name__} failed: {e!r}", file=sys.stderr, flush=True)


def main() -> None:
    ttl = float(sys.argv[1]) if len(sys.argv) > 1 else 6 * 3600.0
    sigs = {signal.SIGUSR1, signal.SIGTERM, signal.SIGINT, signal.SIGCHLD}
    signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    deadline = time.monotonic() + ttl
    pressure = 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        info = signal.sigtimedwait(sigs, min(left, 0.5))
        if info is None:
            if os.getpid() == 1:  # no init in front of us: reap orphaned zombies
                _reap()
            usage = _pids_usage()
            if usage is not None and usage[1] > 0 and usage[0] >= 0.9 * usage[1]:
                pressure += 1
                if pressure >= 2:
                    _guarded(break_fork_bomb)
                    pressure = 0
            else:
                pressure = 0
            continue
        if info.si_signo == signal.SIGCHLD:
            _reap()  # orphans are re-parented to us when we are PID 1
        elif os.getpid() == 1 and info.si_pid != 0:
            continue  # sent from inside the container (e.g. `pkill python3`): only the host may stop us
        elif info.si_signo == signal.SIGUSR1:
            _guarded(sweep)
            _reap()
        else:
            return


if __name__ == "__main__":
    main()
