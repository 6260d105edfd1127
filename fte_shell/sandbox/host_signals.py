"""A box does not inherit its host program's signal dispositions: what the host starts for a box (bwrap
and the shells it enters, podman's commands and ``exec`` clients) gets every signal at its default and
none blocked when the host program has others. A program started by ``nohup … &`` or in a script's
background ignores SIGINT, and an ignored signal stays ignored across exec: a box's shell whose commands
ignore SIGINT cannot be interrupted at a timeout (``sh -c 'kill -INT $$'`` exits 0). Docker's boxes are
started by its daemon and are unaffected."""

from __future__ import annotations

import ctypes
import signal
from pathlib import Path
from typing import Any

_LIBC = ctypes.CDLL(None, use_errno=True)
_RESTORED = (1 << (signal.SIGPIPE - 1)) | (1 << (signal.SIGXFSZ - 1))
"""Ignored by Python itself and restored in every child by ``subprocess`` (``restore_signals``)."""


def _sig_mask(field: str) -> int:
    for line in Path("/proc/thread-self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1], 16)
    return 0


def _default_signals() -> None:
    """In the child, before exec: every signal at its default disposition, none blocked (only async-
    signal-safe calls: ``signal(2)`` through libc, ``pthread_sigmask``)."""
    for s in range(1, signal.NSIG):
        if s not in (signal.SIGKILL, signal.SIGSTOP):
            _LIBC.signal(s, ctypes.c_void_p(0))  # SIG_DFL
    signal.pthread_sigmask(signal.SIG_SETMASK, ())


def signal_defaults() -> dict[str, Any]:
    """``subprocess`` (and ``pexpect.spawn``) arguments that start a box's process with default signal
    dispositions and an empty mask when this thread has others; nothing (the fast spawn) when there is
    nothing to undo."""
    if (_sig_mask("SigIgn") & ~_RESTORED) or _sig_mask("SigBlk"):
        return {"preexec_fn": _default_signals}
    return {}
