"""The persistent bash session in a real box (issue 2, section 4), for every provider case of
tests/providers.py (the module's sandbox takes ``provider_case``: these are guarantee probes; the two tests
that make their own sandbox stay Docker-only).

One sandbox is shared by the tests of this module where state allows (module-scoped fixture); tests that
kill or restart the shell use their own cwd/variables, so order does not matter.
"""

from __future__ import annotations

import hashlib
import re
import time
from pathlib import Path

import pytest

from fte_shell import Sandbox, SandboxConfig
from tests.providers import ProviderCase, holds

pytestmark = pytest.mark.docker

CAP = 4000


@pytest.fixture(scope="module")
def sb(provider_case: ProviderCase):
    cfg = provider_case.config(
        command_timeout_s=20, output_cap_bytes=CAP, memory="384m", tmpfs_size="64m", pids_limit=128
    )
    with Sandbox(cfg) as box:
        yield box


def omitted(text: str) -> int:
    m = re.search(r"\[\.\.\. output truncated: ([\d,]+) bytes omitted", text)
    assert m is not None, text[:500]
    return int(m.group(1).replace(",", ""))


# --- state ---------------------------------------------------------------------------------------------
def test_state_persists_cwd_exports_functions_aliases(sb: Sandbox) -> None:
    assert sb.run("mkdir -p /tmp/st/sub && cd /tmp/st/sub").exit_code == 0
    assert sb.run("export ST_VAR='a b'; ST_LOCAL=7").exit_code == 0
    assert sb.run('st_fn() { echo "fn:$1"; }').exit_code == 0
    assert sb.run("alias st_alias='echo aliased'").exit_code == 0
    obs = sb.run('pwd; echo "$ST_VAR|$ST_LOCAL"; st_fn x; st_alias; bash -c \'echo "child:$ST_VAR"\'')
    assert obs.output.splitlines() == ["/tmp/st/sub", "a b|7", "fn:x", "aliased", "child:a b"]
    assert obs.exit_code == 0 and not obs.restarted
    sb.run("cd /work")


def test_declare_in_a_command_is_global(sb: Sandbox) -> None:
    sb.run("declare -A st_map=([k]=v); declare st_d=5")
    assert sb.run('echo "${st_map[k]}$st_d"').output == "v5\n"


# --- exit codes ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("command", "code"),
    [
        ("true", 0),
        ("false", 1),
        ("(exit 42)", 42),
        ("no_such_command_xyz", 127),
        ("sh -c 'kill -INT $$'", 130),
        ("sh -c 'kill -KILL $$'", 137),
        ("sh -c 'kill -TERM $$'", 143),
    ],
)
def test_exit_codes(sb: Sandbox, command: str, code: int) -> None:
    obs = sb.run(command)
    assert obs.exit_code == code
    assert not obs.timed_out and not obs.restarted
    if code:
        assert f"[exit code {code}]" in obs.render()


def test_unknown_command_message(sb: Sandbox) -> None:
    obs = sb.run("no_such_command_xyz")
    assert "command not found" in obs.output


def test_everyday_tools_list_and_stat_the_workspace(sb: Sandbox) -> None:
    # coreutils' ls and stat call statx with AT_NO_AUTOMOUNT, which Debian 12's gVisor refused (EINVAL):
    # "ls: cannot access '/work': Invalid argument" in every runsc box until the image's preload
    obs = sb.run("ls -l /work; ls -ld /work /tmp; stat -c '%n %F %a' /work /etc/passwd; "
                 "stat -L -c %F /proc/self/fd/0 >/dev/null; echo ok")
    assert obs.exit_code == 0 and "Invalid argument" not in obs.output, obs.output
    lines = obs.output.splitlines()
    assert lines[0].startswith("total ")
    assert any(x.startswith("drwx") and x.endswith(" /work") for x in lines)
    assert "/work directory 755" in lines and "/etc/passwd regular file 644" in lines, obs.output
    assert lines[-1] == "ok"


# --- timeout -------------------------------------------------------------------------------------------
def test_timeout_kills_the_whole_tree_and_keeps_partial_output(sb: Sandbox, provider_case: ProviderCase) -> None:
    holds(provider_case, "timeout background jobs")
    sb.run("TO_KEEP=still-here")
    obs = sb.run(
        "echo partial-1; (sleep 311; echo never) & bash -c 'sleep 312 & sleep 313'; echo never-2", timeout=1
    )
    assert obs.timed_out and obs.exit_code is None
    assert "partial-1" in obs.output and "never" not in obs.output
    assert "timed out after 1 s; the process was killed; partial output above" in obs.render()
    assert not obs.restarted
    ps = sb.run("ps -eo args")
    assert not re.search(r"sleep 31[123]", ps.output), ps.output
    assert sb.run("echo $TO_KEEP").output == "still-here\n"


@pytest.mark.parametrize("loop", ["while :; do :; done", "{ while :; do :; done; } >/tmp/loop.out 2>&1"])
def test_timeout_of_a_builtin_loop_keeps_the_shell(
    sb: Sandbox, provider_case: ProviderCase, loop: str
) -> None:
    holds(provider_case, "timeout kill")
    sb.run("LOOP_VAR=kept")
    obs = sb.run(f"echo before; {loop}", timeout=1)
    assert obs.timed_out and "before" in obs.output
    assert not obs.restarted
    assert sb.run("echo $LOOP_VAR").output == "kept\n"


def test_timeout_spares_the_jobs_of_earlier_commands(sb: Sandbox, provider_case: ProviderCase) -> None:
    # the command's start is the host's, on the box's clock (the shell writes nothing per command)
    holds(provider_case, "timeout kill")
    assert sb.run("sleep 1301 >/dev/null 2>&1 & EARLY=$!").exit_code == 0
    sb.run("sleep 0.1")  # so the next command starts well after that job (start times are in 1/100 s)
    obs = sb.run("sleep 1302 >/dev/null 2>&1 & sleep 1303", timeout=1)
    assert obs.timed_out and not obs.restarted
    ps = sb.run("ps -eo args").output
    assert "sleep 1301" in ps and not re.search(r"sleep 130[23]", ps), ps
    sb.run("kill $EARLY")


def test_timeout_when_the_command_ignores_sigint_restarts_in_cwd(sb: Sandbox) -> None:
    sb.run("mkdir -p /tmp/trap && cd /tmp/trap")
    obs = sb.run("echo started; trap '' INT; while :; do :; done", timeout=1)
    assert obs.timed_out and obs.restarted
    assert "started" in obs.output
    assert "the shell was restarted" in obs.render()
    assert sb.run("pwd").output == "/tmp/trap\n"
    sb.run("cd /work")


def test_per_call_timeout_overrides_default(sb: Sandbox) -> None:
    obs = sb.run("sleep 2; echo done", timeout=10)
    assert not obs.timed_out and obs.output == "done\n"


# --- output cap ----------------------------------------------------------------------------------------
def test_output_cap_head_tail_and_omitted_count(sb: Sandbox) -> None:
    obs = sb.run("seq 1 200000")
    total = sum(len(f"{i}\n") for i in range(1, 200001))
    assert obs.truncated and obs.exit_code == 0
    assert obs.output.startswith("1\n2\n3\n")
    assert obs.output.endswith("199999\n200000\n")
    m = re.search(r"\n\[\.\.\. output truncated: [\d,]+ bytes omitted \.\.\.\]\n", obs.output)
    assert m is not None
    shown = len(obs.output) - (m.end() - m.start()) + 1
    assert shown + omitted(obs.output) == total  # every byte is shown or counted
    assert shown <= CAP


def test_stdout_and_stderr_merged_in_order(sb: Sandbox) -> None:
    obs = sb.run("echo one; echo two >&2; echo three; echo four >&2")
    assert obs.output == "one\ntwo\nthree\nfour\n"


def test_binary_output_is_decoded_and_cleaned(sb: Sandbox) -> None:
    obs = sb.run("printf '\\033[31mred\\033[0m\\001\\007\\000x\\r\\n'; head -c 20000 /dev/urandom")
    assert obs.output.startswith("redx\n")
    assert obs.truncated
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", obs.output)


def test_an_output_of_only_nul_bytes_keeps_its_truncation_line(sb: Sandbox) -> None:
    # bash's read drops NUL bytes: such an output once came back empty, its size and truncation lost
    obs = sb.run("head -c 100000 /dev/zero")
    assert obs.truncated and obs.exit_code == 0
    assert omitted(obs.output) == 100000 - CAP
    assert sb.run("head -c 10 /dev/zero; echo after").output == "after\n"


def test_no_output_file_is_left_per_command(sb: Sandbox) -> None:
    # each command's output goes to its own file on the box's tmpfs (a background job of an earlier one
    # keeps writing to its own); once read it is removed, not only emptied
    for cmd in ("echo one", "true", "head -c 5000 /dev/zero", "seq 100000 >/dev/null"):
        sb.run(cmd)
    files = sb.run("ls -a /opt/fte/run").output.split()
    assert len([f for f in files if f.startswith("o.")]) == 1, files  # the ls's own


def test_one_huge_line_without_newline(sb: Sandbox) -> None:
    obs = sb.run("head -c 3000000 /dev/zero | tr '\\0' a")
    assert obs.truncated and len(obs.output) < CAP + 200
    assert obs.output.startswith("a" * 100) and obs.output.rstrip("\n").endswith("a" * 100)
    assert omitted(obs.output) == 3_000_000 - CAP


@pytest.mark.parametrize("command", ["yes", "cat /dev/urandom"])
def test_unbounded_output_is_bounded(sb: Sandbox, command: str) -> None:
    obs = sb.run(command, timeout=15)
    assert obs.truncated
    assert not obs.timed_out  # the output buffer filled up, the writer got ENOSPC and stopped
    assert "output buffer" in obs.render()
    assert omitted(obs.output) > 10_000_000
    assert len(obs.output) < 3 * CAP
    # the buffer was freed: the next command's output is complete
    assert sb.run("seq 3").output == "1\n2\n3\n"
    usage = sb.run("df -k /opt/fte/run | tail -1").output.split()
    assert int(usage[2]) < 1024  # KiB used by the output buffer


# --- stdin, pagers, interactive programs -----------------------------------------------------------------
def test_stdin_is_at_eof(sb: Sandbox) -> None:
    obs = sb.run('cat; echo "cat=$?"; read x; echo "read=$?"; python3; echo "py=$?"', timeout=10)
    assert not obs.timed_out
    assert obs.output == "cat=0\nread=1\npy=0\n"


def test_pagers_and_help_do_not_hang(sb: Sandbox) -> None:
    obs = sb.run("seq 300 > /tmp/pg; less /tmp/pg | tail -1; more /tmp/pg | tail -1", timeout=10)
    assert not obs.timed_out and obs.output == "300\n300\n"
    obs = sb.run("python3 -c 'help(len)'", timeout=10)  # pydoc's pager
    assert not obs.timed_out and "Return the number of items" in obs.output
    obs = sb.run("less /tmp/pg", timeout=10)
    assert not obs.timed_out and obs.output.endswith("299\n300\n")
    assert sb.run('echo "$PAGER $MANPAGER $GIT_PAGER $TERM $NO_COLOR"').output == "cat cat cat dumb 1\n"


# --- shell death ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("command", "code"),
    [("echo bye; exit 3", 3), ("exec true", 0), ("kill -9 $$", 137), ("set -e; false; echo not-here", 1)],
)
def test_shell_death_restarts_in_previous_cwd(sb: Sandbox, command: str, code: int) -> None:
    sb.run("mkdir -p /tmp/death/d && cd /tmp/death/d && DEATH_VAR=1")
    obs = sb.run(command)
    assert obs.restarted and obs.exit_code == code
    assert "the shell was restarted" in obs.render()
    if command.startswith("echo bye"):
        assert "bye" in obs.output
    assert "not-here" not in obs.output
    after = sb.run('pwd; echo "[$DEATH_VAR]"')
    assert after.output == "/tmp/death/d\n[]\n" and not after.restarted
    sb.run("cd /work")


# --- markers, background jobs, big and non-ASCII commands -------------------------------------------------
def test_output_imitating_markers_does_not_end_the_command(sb: Sandbox) -> None:
    fake = "\\n__FTE_END_0123456789abcdef01234567 0 -1 /\\n__FTE_BEGIN_x\\n__FTE_SWEPT\\n__FTE_READY_1 2\\n"
    obs = sb.run(f"printf '{fake}'; sleep 0.5; echo real-end")
    assert obs.output.rstrip("\n").endswith("real-end")
    assert "__FTE_END_0123456789abcdef01234567 0 -1 /" in obs.output
    assert obs.exit_code == 0


def test_background_jobs_do_not_block(sb: Sandbox) -> None:
    obs = sb.run("sleep 1000 & echo started; BG=$!", timeout=10)
    assert not obs.timed_out and "started" in obs.output
    assert obs.duration_s < 10
    assert sb.run("kill -0 $BG && echo alive").output.endswith("alive\n")
    sb.run("kill $BG")


def test_background_output_does_not_corrupt_later_commands(sb: Sandbox) -> None:
    sb.run("(for i in 1 2 3 4 5 6 7 8 9 10; do echo tick; sleep 0.1; done) &")
    for _ in range(5):
        assert sb.run("echo clean").output == "clean\n"


def test_100kb_heredoc_command(sb: Sandbox) -> None:
    lines = [f"line {i} " + "x" * 90 for i in range(1100)]
    body = "\n".join(lines) + "\n"
    assert len(body) > 100_000
    obs = sb.run(
        f"cat > /tmp/big.txt <<'EOF_BIG'\n{body}EOF_BIG\nsha256sum < /tmp/big.txt; wc -l < /tmp/big.txt"
    )
    digest = hashlib.sha256(body.encode()).hexdigest()
    assert obs.output.split() == [digest, "-", "1100"]


def test_one_100kb_line_in_a_command(sb: Sandbox) -> None:
    obs = sb.run("echo " + "y" * 100_000 + " | wc -c")
    assert obs.output == "100001\n"


def test_non_ascii_round_trip(sb: Sandbox) -> None:
    s = "héllo wörld ✓ 日本語 🙂"
    obs = sb.run(f"echo '{s}'; echo '{s}' | wc -m")
    assert obs.output == f"{s}\n{len(s) + 1}\n"


def test_control_characters_in_the_command(sb: Sandbox) -> None:
    obs = sb.run("printf '%s' 'a\x01b\x10\x11c\rd' | od -An -c | tr -s ' '")
    assert obs.output.split() == ["a", "001", "b", "020", "021", "c", "\\r", "d"]
    assert sb.run("echo still-here").output == "still-here\n"


def test_nul_in_command_is_refused_clearly(sb: Sandbox) -> None:
    obs = sb.run("echo a\x00b")
    assert obs.exit_code is None and "NUL" in obs.output


# --- resource bombs ------------------------------------------------------------------------------------
def _until_recovered(sb: Sandbox) -> None:
    """The warden breaks a fork bomb within seconds; poll until forks work and few processes remain."""
    for _ in range(60):
        obs = sb.run('n=$(ps -e --no-headers | wc -l) && echo "procs=$n"', timeout=5)
        m = re.search(r"procs=(\d+)", obs.output)
        if m and int(m.group(1)) < 20:
            return
        time.sleep(0.5)
    raise AssertionError("the sandbox did not recover from the fork bomb")


def test_fork_bomb_is_contained(sb: Sandbox, provider_case: ProviderCase) -> None:
    holds(provider_case, "pids limit")
    sb.run("BOMB_VAR=survives")
    sb.run(":(){ :|:& };:", timeout=5)
    assert sb.run("echo alive", timeout=10).output.startswith("alive")
    _until_recovered(sb)
    assert sb.run("ls -d /work").output == "/work\n"
    assert sb.run("echo $BOMB_VAR").output == "survives\n"
    sb.run("unset -f :")


def test_memory_bomb_is_contained(sb: Sandbox, provider_case: ProviderCase) -> None:
    holds(provider_case, "memory limit")
    marker = Path.cwd() / "oom"  # podman's conmon drops an empty "oom" into its working directory
    had = marker.exists()
    obs = sb.run("python3 -c 'a = []\nwhile True: a.append(bytearray(10**7))'", timeout=60)
    assert obs.exit_code not in (0, None)
    assert sb.run("echo alive").output == "alive\n"
    assert had or not marker.exists(), "the engine wrote into the caller's working directory"


def test_disk_fill_is_contained(sb: Sandbox) -> None:
    obs = sb.run("dd if=/dev/zero of=/tmp/fill bs=1M", timeout=60)
    assert obs.exit_code == 1 and "No space left on device" in obs.output
    assert sb.run("echo after-fill; seq 2").output == "after-fill\n1\n2\n"
    sb.run("rm -f /tmp/fill")


# --- observation, budget, API ----------------------------------------------------------------------------
def test_observation_fields_and_render(sb: Sandbox) -> None:
    obs = sb.run("echo hi")
    assert (obs.output, obs.exit_code, obs.timed_out, obs.truncated, obs.restarted) == (
        "hi\n",
        0,
        False,
        False,
        False,
    )
    assert obs.duration_s > 0
    assert obs.render() == "hi"
    assert sb.run("true").render() == "(no output)"


def test_total_time_budget(docker_ready: None) -> None:
    with Sandbox(SandboxConfig(total_time_budget_s=1.5, command_timeout_s=30)) as box:
        first = box.run("sleep 3; echo never")
        assert first.timed_out
        assert "time budget" in first.render()
        second = box.run("echo hi")
        assert second.exit_code is None and "budget" in second.render() and second.output == ""


def test_closed_sandbox_refuses(docker_ready: None) -> None:
    from fte_shell.errors import SandboxError

    box = Sandbox(SandboxConfig())
    ws = box.workspace
    box.close()
    assert not ws.exists()
    with pytest.raises(SandboxError, match="closed"):
        box.run("true")
    box.close()  # idempotent


TTY_EIO = "/dev/tty: Input/output error"
"""gVisor refuses the session's own terminal to the agent's commands at once (runc lets them block on it)."""


def test_agent_shell_options_do_not_break_the_session(sb: Sandbox, provider_case: ProviderCase) -> None:
    sb.run("cd /work")
    assert sb.run("set -u; set -o pipefail; set -C; IFS=,; echo opts").output == "opts\n"
    obs = sb.run("echo ok1; echo $undefined_var_x")
    assert obs.output.startswith("ok1\n") and "unbound variable" in obs.output and obs.exit_code == 1
    assert sb.run("set -x; echo traced").output.endswith("traced\n")
    assert sb.run("set +x; exec >/dev/null; echo hidden").output.count("hidden") == 0
    assert sb.run("echo visible").output == "visible\n"
    assert sb.run("PATH=/nonexistent; echo still").output == "still\n"
    obs = sb.run("read x < /dev/tty", timeout=1)  # a program that reads the terminal itself
    assert obs.timed_out or (provider_case.runtime == "runsc" and TTY_EIO in obs.output), obs
    assert sb.run("echo after-tty").output == "after-tty\n"
    assert sb.run("exit").restarted  # back to a clean shell for the other tests
    assert sb.run("echo $PATH").output.startswith("/opt/fte/bin:")


def test_writes_to_the_terminal_itself_are_bounded_noise(sb: Sandbox, provider_case: ProviderCase) -> None:
    eio = provider_case.runtime == "runsc"
    obs = sb.run("yes > /dev/tty", timeout=1)
    assert (obs.timed_out and obs.output == "") or (eio and obs.output.strip().endswith(TTY_EIO)), obs
    obs = sb.run("head -c 200000 /dev/urandom > /dev/tty; echo done")
    assert obs.output == "done\n" or (eio and obs.output.endswith(f"{TTY_EIO}\ndone\n")), obs
    assert sb.run("echo ok").output == "ok\n"


def test_exec_of_a_new_shell_restarts_cleanly(sb: Sandbox) -> None:
    obs = sb.run("exec bash")
    assert obs.restarted
    assert sb.run("echo ok").output == "ok\n"


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ('echo "abc', "unexpected EOF"),
        ("if true; then", "syntax error"),
        ("fi", "syntax error near unexpected token"),
    ],
)
def test_syntax_errors_are_reported_and_do_not_wedge(sb: Sandbox, command: str, message: str) -> None:
    obs = sb.run(command)
    assert obs.exit_code == 2 and message in obs.output and not obs.restarted
    assert sb.run("echo ok").output == "ok\n"


def test_empty_and_comment_only_commands(sb: Sandbox) -> None:
    assert sb.run("").exit_code == 0
    assert sb.run("# only a comment").render() == "(no output)"
