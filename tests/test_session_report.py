"""The host's reading of the end-of-command report (``ShellSession._collect``) on the real stream of a box's
shell, for every provider case: the box's own shell writes crafted report bytes, in pieces, and what the
host makes of them is checked (a report sent again after an interrupt, markers split across reads, the
nonce inside the output). The normal path is covered by every test of tests/test_sandbox.py."""

from __future__ import annotations

import secrets
import time

import pytest

from fte_shell import Sandbox
from fte_shell.sandbox.session import ShellSession
from tests.providers import ProviderCase

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def sb(provider_case: ProviderCase):
    with Sandbox(provider_case.config(command_timeout_s=20)) as box:
        yield box


def _shell_prints(sess: ShellSession, *pieces: str) -> None:
    """The box's idle shell prints ``pieces`` on its stdout (the report's stream), a pause between them,
    so they come as separate reads."""
    line = "; ".join(f"\\builtin printf '%s' $'{p}'; /usr/bin/sleep 0.2" for p in pieces)
    assert sess._send((line + "\n").encode()) is None


def _collect(sb: Sandbox, nonce: str, *pieces: str):
    sess = sb._session
    assert sess is not None
    _shell_prints(sess, *pieces)
    return sess._collect(nonce, time.monotonic() + 10)


def test_a_report_sent_again_is_read_from_its_last_begin(sb: Sandbox) -> None:
    n = secrets.token_hex(12)
    res = _collect(sb, n, f"noise\\n__FTE_BEGIN_{n}\\npartial out", f"\\n__FTE_BEGIN_{n}\\nthe output\\n",
                   f"\\n__FTE_END_{n} 0 -1 /tmp/a b\\n")
    assert (bytes(res.data), res.status, res.size, res.cwd) == (b"the output\n", 0, -1, "/tmp/a b")
    assert sb.run("echo after").output == "after\n"


def test_markers_split_across_reads(sb: Sandbox) -> None:
    n = secrets.token_hex(12)
    res = _collect(sb, n, "\\n__FTE_BEG", f"IN_{n}", "\\nabc\\n__FTE_EN", f"D_{n[:5]}", f"{n[5:]}", " 3 12 /wo",
                   "rk\\n")
    assert (bytes(res.data), res.status, res.size, res.cwd) == (b"abc", 3, 12, "/work")
    assert sb.run("echo after").output == "after\n"


def test_the_nonce_inside_the_output_is_not_a_marker(sb: Sandbox) -> None:
    n = secrets.token_hex(12)
    body = f"{n} {n}\\n__FTE_END_{n}x\\n__FTE_BEGIN_{n} \\n{n}"
    res = _collect(sb, n, f"\\n__FTE_BEGIN_{n}\\n{body}", f"\\n__FTE_END_{n} 1 -1 /work\\n")
    expected = body.replace("\\n", "\n").encode()
    assert (bytes(res.data), res.status, res.size) == (expected, 1, -1)
    assert sb.run("echo after").output == "after\n"
