"""The conversion worker pool: :func:`convert` runs :func:`fte_shell.fetch.convert.convert_bytes` in a
worker process, with a time limit.

Conversion is CPU-bound pure Python (crawl4ai's html2text, pypdf), so it runs in worker processes, shared
by every FetchService of the process (``FTE_CONVERT_WORKERS`` workers, default min(4, CPUs)), started on
first use; crawl4ai is imported inside the workers only. A worker that crashes is replaced and the
conversion retried once in a fresh worker; a conversion that overruns its time kills that worker alone.

Why plain subprocesses (:mod:`fte_shell.fetch.worker`, a pipe protocol) and not :mod:`multiprocessing`:
fte-shell is a library that runs inside other people's programs (a script without a ``__main__`` guard, a
notebook, an MCP server, a trainer with its own pools, an asyncio program). multiprocessing's ``spawn``
child runs ``spawn.prepare(get_preparation_data())``, which re-imports the caller's ``__main__`` from its
path (``_fixup_main_from_path``) or module name, so an unguarded script ran again in every worker and
every fetch failed. ``forkserver`` does not avoid that: its children run the same preparation, so
``__main__`` is re-imported unless the fork server preloaded it (running the script again there), and the
fork server and its preload list are one singleton per interpreter, shared with the caller's own use of
multiprocessing. ``fork`` copies the caller's threads' locks. A worker started as its own program imports
only ``fte_shell.fetch.worker`` (with the parent's ``sys.path``, as spawn would), touches no global state
of multiprocessing (no start method, no resource tracker, no signal handlers), and is stopped by the end
of its stdin or, if the parent is SIGKILLed, by its own check of its parent (no orphans). The cost is the
one a spawned worker paid too (a Python start, once per worker); per conversion it is one pickle one way
and two strings back (perf/convert_pool.py times it against the former ProcessPoolExecutor).
"""

from __future__ import annotations

import atexit
import fcntl
import json
import os
import pickle
import select
import subprocess
import sys
import threading
import time

from ..errors import FetchRefused
from .decode import Kind
from .worker import BOOTSTRAP, WorkerGone, read_frame, unpack_reply, write_frame


def pool_size() -> int:
    """Worker processes of the conversion pool (``FTE_CONVERT_WORKERS`` or min(4, CPUs))."""
    env = os.environ.get("FTE_CONVERT_WORKERS")
    if env and env.isdigit() and int(env) > 0:
        return int(env)
    return max(1, min(4, os.cpu_count() or 1))


PIPE_BYTES = 1 << 20
"""Capacity asked for each worker pipe (Linux's default limit for a user, ``fs.pipe-max-size``)."""


class _Overrun(Exception):
    """The worker did not answer in time."""


class _Worker:
    """One worker process and its two pipe ends."""

    def __init__(self) -> None:
        if not sys.executable:
            raise FetchRefused("cannot start a conversion worker: this Python has no sys.executable")
        self.proc = subprocess.Popen(
            [sys.executable, "-P", "-c", BOOTSTRAP, json.dumps(sys.path), str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            bufsize=0,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.to_fd, self.from_fd = self.proc.stdin.fileno(), self.proc.stdout.fileno()
        for fd in (self.to_fd, self.from_fd):
            try:  # a page and its text in one write, not 64 KiB at a time with the other side awake
                fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
            except OSError:  # over the user's pipe quota: the default size works, only slower
                pass

    def send(self, op: str, args: tuple[object, ...]) -> None:
        try:
            write_frame(self.to_fd, pickle.dumps((op, args), protocol=pickle.HIGHEST_PROTOCOL))
        except OSError as e:
            raise WorkerGone(str(e)) from None

    def receive(self, timeout_s: float | None) -> tuple[str, list[str]]:
        """The reply; raises :class:`_Overrun` after ``timeout_s``, :class:`WorkerGone` if it died."""
        poller = select.poll()
        poller.register(self.from_fd, select.POLLIN)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s

        def wait() -> None:
            while True:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                if poller.poll(None if left is None else int(left * 1000) + 1):
                    return
                if deadline is not None and time.monotonic() >= deadline:
                    raise _Overrun

        try:
            return unpack_reply(read_frame(self.from_fd, wait))
        except (ValueError, UnicodeDecodeError) as e:
            raise WorkerGone(f"malformed reply: {e}") from None

    def stop(self, *, kill: bool) -> None:
        """End the worker: close its input (it exits) or, with ``kill``, SIGKILL it; reap it."""
        if kill:
            self.proc.kill()
        for f in (self.proc.stdin, self.proc.stdout):
            if f is not None:
                f.close()
        try:
            self.proc.wait(timeout=None if kill else 2.0)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class _Pool:
    """Idle workers, at most ``pool_size()`` alive; one request per worker at a time."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.idle: list[_Worker] = []
        self.busy: set[_Worker] = set()
        self.starting = 0
        self.generation = 0
        self.exit_hook = False
        self.closed = False

    def acquire(self) -> tuple[_Worker, int]:
        """An idle worker, a new one if fewer than ``pool_size()`` are alive, else wait for one."""
        with self.cond:
            while not self.idle and len(self.busy) + self.starting >= pool_size() and not self.closed:
                self.cond.wait()
            if self.closed:
                raise FetchRefused("the conversion workers are stopped: the process is exiting")
            gen = self.generation
            if self.idle:
                w = self.idle.pop()
                self.busy.add(w)
                return w, gen
            self.starting += 1
            if not self.exit_hook:
                atexit.register(_stop_at_exit)
                self.exit_hook = True
        try:
            w = _Worker()
        except BaseException:
            with self.cond:
                self.starting -= 1
                self.cond.notify()
            raise
        with self.cond:
            self.starting -= 1
            self.busy.add(w)
        return w, gen

    def release(self, w: _Worker, gen: int, *, broken: bool = False) -> None:
        """Give ``w`` back; a broken worker (crashed, overran, interrupted) or one of an older
        generation (the pool was shut down meanwhile) is stopped instead."""
        with self.cond:
            self.busy.discard(w)
            keep = not broken and gen == self.generation
            if keep:
                self.idle.append(w)
            self.cond.notify()
        if not keep:
            w.stop(kill=broken)

    def stop_all(self, *, for_good: bool) -> None:
        """Stop the idle workers now and the busy ones when released; ``for_good`` (at exit): kill the
        busy ones too and start no more."""
        with self.cond:
            self.closed = for_good
            self.generation += 1
            idle, self.idle = self.idle, []
            busy = list(self.busy) if for_good else []
            self.cond.notify_all()
        for w in idle:
            w.stop(kill=False)
        for w in busy:
            w.stop(kill=True)


_pool = _Pool()
_forsaken: list[_Pool] = []


def _after_fork_in_child() -> None:
    """A forked child gets its own pool: the parent's workers and pipes are the parent's (kept referenced,
    never used or reaped here)."""
    global _pool
    _forsaken.append(_pool)
    _pool = _Pool()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _stop_at_exit() -> None:
    _pool.stop_all(for_good=True)


def warm_up() -> list[int]:
    """Start the pool's workers and import the converters in each (2-4 s once; optional). Returns the
    workers' pids."""
    taken = [_pool.acquire() for _ in range(pool_size())]
    pids, broken = [], set()
    try:
        for w, _ in taken:
            w.send("warm", ())
        for w, _ in taken:
            try:
                pids.append(int(w.receive(None)[1][0]))
            except WorkerGone:
                broken.add(w)
    finally:
        for w, gen in taken:
            _pool.release(w, gen, broken=w in broken)
    return pids


def shutdown_pool() -> None:
    """Stop the conversion workers (busy ones once their conversion ends; a later conversion starts new
    ones)."""
    _pool.stop_all(for_good=False)


def convert(
    kind: Kind,
    body: bytes,
    charset: str | None,
    url: str,
    content_type: str | None = None,
    *,
    timeout_s: float = 60.0,
    max_chars: int | None = None,
) -> tuple[str, str]:
    """``(title, text)`` of a downloaded body, converted in a worker process.

    Raises :class:`FetchRefused` if conversion fails, takes longer than ``timeout_s``, gives more than
    ``max_chars`` characters or crashes its worker twice.
    """
    what = f"conversion of the {kind.upper()} body"
    for attempt in (1, 2):
        w, gen = _pool.acquire()
        try:
            w.send("convert", (kind, body, charset, url, content_type, max_chars))
            status, fields = w.receive(max(0.0001, timeout_s))
        except _Overrun:
            _pool.release(w, gen, broken=True)
            raise FetchRefused(f"{what} took longer than {timeout_s:g} s") from None
        except WorkerGone:
            _pool.release(w, gen, broken=True)
            if attempt == 2:
                raise FetchRefused(f"{what} crashed its worker process") from None
            continue
        except BaseException:  # interrupted mid-request: the worker's state is unknown
            _pool.release(w, gen, broken=True)
            raise
        _pool.release(w, gen)
        if status == "o" and len(fields) == 2:
            return fields[0], fields[1]
        if status == "r" and fields:
            raise FetchRefused(fields[0])
        raise FetchRefused(f"{what} failed: {' '.join(fields)}".splitlines()[0])
    raise AssertionError("unreachable")
