"""The shell's command channel past the engine's relay: two named pipes in the box's gateway directory.

A Docker or podman shell's terminal reaches this process through relays: containerd-shim and dockerd
(or conmon and the ``podman exec`` client), Go programs that each wake up, copy and sleep for every
chunk, twice per command (the command in, the report out), costing more CPU than the shell's own work
(``perf/sandbox_throughput.py``). Once the shell is ready, :func:`open_channel` moves its stdin and
stdout to two FIFOs this process made in the gateway directory (mounted read-only at
:data:`~.base.GATEWAY_MOUNT`; a FIFO opens for writing there all the same): commands and reports
then go between this process and the shell directly, through the kernel. The terminal stays the
shell's controlling terminal and stderr: the warden's ``SWEPT`` line and anything written to
``/dev/tty`` still come over it, and its end is still the shell's end. A bwrap shell's terminal has no
relay, but the channel pays there too: two FIFOs cost less per command than a pty (the shell's CPU per
trivial command 140-170 -> about 120 µs, this process's 70 -> 50 µs, one thread, 2026-12-02).

Only where the host's file reaches the box's shell as the same FIFO (``runc``, bwrap; not gVisor's gofer) and
this process may give the FIFOs to the box's uid alone (root): other local users must not write
commands into a box. Anywhere else, or when the shell cannot open them, the terminal carries it all.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import time
from pathlib import Path

import pexpect

from .base import GATEWAY_MOUNT, ShellStream
from .output import ChannelStream

PIPE_BYTES = 1 << 20
"""The capacity asked for the shell's stdout FIFO (a pipe's default is 64 KiB): a large output then goes
through in a few large writes, each waking this process once, instead of the writer stopping every
64 KiB until this process has read. The kernel gives a pipe's pages only as they fill."""


def channel_owner(user: str) -> tuple[int, int] | None:
    """The uid and gid the FIFOs are given to (the box's ``user``, numeric) when this process may."""
    uid, _, gid = user.partition(":")
    if os.geteuid() != 0 or not uid.isdigit() or not (gid or uid).isdigit():
        return None
    return int(uid), int(gid or uid)


def open_channel(tty: ShellStream, gateway_dir: Path, owner: tuple[int, int], nonce: str,
                 deadline: float) -> ChannelStream | None:
    """Move a ready shell's stdin and stdout to two new FIFOs in ``gateway_dir``: the channel, or None
    when the shell said it could not open them (it then goes on over its terminal). Raises
    ``pexpect.EOF``/``OSError`` when the shell ended, TimeoutError when it did not answer (its stdin may
    be a FIFO nobody writes to: the caller must replace it)."""
    paths = [gateway_dir / f"sh-{nonce}.in", gateway_dir / f"sh-{nonce}.out"]
    rfd = -1
    try:
        for p in paths:
            os.mkfifo(p, 0o600)
            os.chown(p, *owner)
        rfd = os.open(paths[1], os.O_RDONLY | os.O_NONBLOCK)
        with contextlib.suppress(OSError):  # above the host's fs.pipe-max-size: the default stays
            fcntl.fcntl(rfd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        box_in, box_out = (f"{GATEWAY_MOUNT}/{p.name}" for p in paths)
        ok, no = (f"\\builtin printf '\\n__FTE_{w}_%s\\n' {nonce}" for w in ("CHAN", "NOCHAN"))
        # plain exec (a fresh shell: nothing of the agent's yet): `builtin exec 1>f` would undo it after
        tty.send(f"exec 1>{box_out} && {{ exec 0<>{box_in} && {ok} || {{ exec 1>&2; {no}; }}; }} || {no}\n".encode())
        got = _await_answer(tty, rfd, nonce, deadline)
        if got:
            return ChannelStream(tty, rfd, os.open(paths[0], os.O_WRONLY | os.O_NONBLOCK), paths, box_out)
    except BaseException:
        _discard(rfd, paths)
        raise
    _discard(rfd, paths)
    return None


def _await_answer(tty: ShellStream, rfd: int, nonce: str, deadline: float) -> bool:
    """True when CHAN came through the FIFO, False when NOCHAN came over the terminal."""
    ok, no = (f"\n__FTE_{w}_{nonce}\n".encode() for w in ("CHAN", "NOCHAN"))
    fifo, term = bytearray(), bytearray()
    poll = select.poll()  # (not select: descriptors past 1024 too, a trainer holds many)
    for fd in (rfd, tty.child_fd):  # type: ignore[attr-defined]
        poll.register(fd, select.POLLIN)
    while ok not in fifo:
        if no in term:
            return False
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the shell did not answer on its command channel")
        ready = [fd for fd, _ in poll.poll(int(min(left, 1.0) * 1000))]
        if rfd in ready:
            with contextlib.suppress(BlockingIOError):
                fifo += os.read(rfd, 4096)
        if tty.child_fd in ready or getattr(tty, "_pending", b""):  # type: ignore[attr-defined]
            with contextlib.suppress(pexpect.TIMEOUT):
                term += tty.read_nonblocking(4096, 0)
    return True


def _discard(rfd: int, paths: list[Path]) -> None:
    if rfd >= 0:
        with contextlib.suppress(OSError):
            os.close(rfd)
    for p in paths:
        p.unlink(missing_ok=True)
