"""One lock per key: concurrent work on one key (a URL's download, a workspace file, a search, a snapshot
capture) runs one at a time, work on different keys runs in parallel.

A key's lock lives only while some thread holds it or waits for it (weak values), so keys never used again
(e.g. a million refused URLs) leave nothing behind in memory.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class KeyedLocks(Generic[K]):
    """``with locks[key]: ...`` serializes the threads that use one key; thread-safe."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: weakref.WeakValueDictionary[K, threading.Lock] = weakref.WeakValueDictionary()

    def __getitem__(self, key: K) -> threading.Lock:
        """The lock of ``key`` (the same object for every caller while anyone still refers to it)."""
        with self._guard:
            lock = self._locks.get(key)
            if lock is None:
                lock = self._locks[key] = threading.Lock()
            return lock

    def __len__(self) -> int:
        """How many keys have a live lock (held, waited for or still referred to)."""
        with self._guard:
            return len(self._locks)
