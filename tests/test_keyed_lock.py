"""fte_shell.keyed_lock.KeyedLocks: threads on one key run one at a time, threads on different keys at once,
and a key nobody holds any more leaves no lock behind."""

from __future__ import annotations

import threading
import time

from fte_shell.keyed_lock import KeyedLocks


def _overlap(keys: list[str]) -> int:
    """The most threads inside ``with locks[key]`` at once, one thread per entry of ``keys``."""
    locks: KeyedLocks[str] = KeyedLocks()
    inside = 0
    most = 0
    count = threading.Lock()
    start = threading.Barrier(len(keys))

    def work(key: str) -> None:
        nonlocal inside, most
        start.wait()
        with locks[key]:
            with count:
                inside += 1
                most = max(most, inside)
            time.sleep(0.05)
            with count:
                inside -= 1

    threads = [threading.Thread(target=work, args=(k,)) for k in keys]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return most


def test_threads_on_one_key_run_one_at_a_time() -> None:
    assert _overlap(["a"] * 6) == 1


def test_threads_on_different_keys_run_at_once() -> None:
    assert _overlap(["a", "b", "c", "d"]) == 4


def test_one_key_gets_one_lock_while_held_and_none_after() -> None:
    locks: KeyedLocks[tuple[str, int]] = KeyedLocks()
    held = locks[("x", 1)]
    assert locks[("x", 1)] is held
    assert locks[("y", 1)] is not held
    assert len(locks) == 1  # the ("y", 1) lock went with its last reference
    del held
    assert len(locks) == 0
