"""The conversion process pool: :func:`convert` runs :func:`fte_shell.fetch.convert.convert_bytes` in a
worker process, with a time limit.

Conversion is CPU-bound pure Python, so it runs in a module-level process pool (spawned lazily, shared by
every FetchService of the process; ``FTE_CONVERT_WORKERS`` workers, default min(4, CPUs)); crawl4ai is
imported inside the workers. A conversion that overruns its time kills the pool's workers (the next one
starts a fresh pool); a crashed worker is retried once in a fresh pool.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from ..errors import FetchRefused
from .convert import convert_bytes, prepare_crawl4ai_env
from .decode import Kind


def _worker_init() -> None:
    prepare_crawl4ai_env()


def _worker_warm() -> int:
    prepare_crawl4ai_env()
    import crawl4ai.html2text  # noqa: F401 - the slow import, done once per worker
    import lxml.cssselect  # noqa: F401

    return os.getpid()


_pool: ProcessPoolExecutor | None = None
_pool_lock = threading.Lock()


def pool_size() -> int:
    """Worker processes of the conversion pool (``FTE_CONVERT_WORKERS`` or min(4, CPUs))."""
    env = os.environ.get("FTE_CONVERT_WORKERS")
    if env and env.isdigit() and int(env) > 0:
        return int(env)
    return max(1, min(4, os.cpu_count() or 1))


def _get_pool() -> ProcessPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ProcessPoolExecutor(
                max_workers=pool_size(),
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_worker_init,
            )
        return _pool


def _drop_pool(broken: ProcessPoolExecutor, *, kill: bool = False) -> None:
    """Forget ``broken`` (the next conversion starts a fresh pool); ``kill`` also terminates its workers
    (a conversion that overran its time would otherwise keep a worker busy for good)."""
    global _pool
    with _pool_lock:
        if _pool is broken:
            _pool = None
    if kill:
        procs: dict[int, Any] = getattr(broken, "_processes", None) or {}
        for proc in list(procs.values()):
            proc.terminate()
    broken.shutdown(wait=False, cancel_futures=True)


def warm_up() -> None:
    """Start the pool's workers and import the converters in each (2-4 s once); optional."""
    pool = _get_pool()
    for f in [pool.submit(_worker_warm) for _ in range(pool_size())]:
        f.result()


def shutdown_pool() -> None:
    """Stop the conversion pool (a later conversion starts a new one)."""
    global _pool
    with _pool_lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.shutdown(wait=True, cancel_futures=True)


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
    """``(title, text)`` of a downloaded body, converted in the process pool.

    Raises :class:`FetchRefused` if conversion fails, takes longer than ``timeout_s`` or gives more than
    ``max_chars`` characters.
    """
    for attempt in (1, 2):
        pool = _get_pool()
        try:
            fut = pool.submit(convert_bytes, kind, body, charset, url, content_type, max_chars)
            return fut.result(timeout=max(0.0001, timeout_s))
        except FetchRefused:
            raise
        except FutureTimeout:
            _drop_pool(pool, kill=True)
            raise FetchRefused(
                f"conversion of the {kind.upper()} body took longer than {timeout_s:g} s"
            ) from None
        except BrokenProcessPool:
            _drop_pool(pool)
            if attempt == 2:
                raise FetchRefused(
                    f"conversion of the {kind.upper()} body crashed its worker process"
                ) from None
        except Exception as e:  # noqa: BLE001 - a converter bug must become one line, not a crash
            raise FetchRefused(
                f"conversion of the {kind.upper()} body failed: {e.__class__.__name__}: {e}".splitlines()[0]
            ) from None
    raise AssertionError("unreachable")
