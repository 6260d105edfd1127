"""The checked-address transport: an httpx client that connects only where the fetch policy looked.

* :class:`PinnedBackend`: an httpcore network backend that connects ``(host, port)`` ONLY to the addresses
  a :func:`fte_shell.fetch.policy.check_url` produced and :meth:`PinnedBackend.pin` registered, so a
  second DNS answer cannot point the connection elsewhere (no DNS rebinding). The Host header, TLS SNI and
  certificate check still use the name from the URL. Unix sockets are refused.
* :func:`fetch_deadline`: the wall-clock deadline of the fetch running in this thread; every socket
  connect/read/write/TLS handshake is clamped to the time left, so a trickling server cannot stretch it.
* :func:`pinned_client`: the httpx client over a backend (no environment proxies, no automatic redirects).

The download itself (redirects, caps, budgets) is :class:`fte_shell.fetch.http.HttpFetcher`.
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import httpcore
import httpx

from .policy import Target, normal_host


def peer_address(response: httpx.Response) -> str | None:
    """The IP address ``response`` came from (provenance; None when the stream does not say)."""
    try:
        addr = response.extensions["network_stream"].get_extra_info("server_addr")
        return str(addr[0]) if addr else None
    except Exception:  # noqa: BLE001 - provenance only
        return None


_deadline = threading.local()
"""``value``: the monotonic deadline of the fetch running in this thread (sync httpx: one thread)."""


def _clamp(timeout: float | None) -> float | None:
    deadline: float | None = getattr(_deadline, "value", None)
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise httpcore.ReadTimeout("fetch deadline reached")
    return left if timeout is None else min(timeout, left)


@contextmanager
def fetch_deadline(deadline: float) -> Iterator[None]:
    """Clamp every socket operation of this thread to end by the monotonic ``deadline`` while inside."""
    _deadline.value = deadline
    try:
        yield
    finally:
        _deadline.value = None


class _DeadlineStream(httpcore.NetworkStream):
    """A network stream whose every read/write/handshake ends by the current fetch's deadline, so a
    server trickling bytes cannot stretch a fetch past ``timeout_s``."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _clamp(timeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _clamp(timeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        return _DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, _clamp(timeout)))

    def get_extra_info(self, info: str) -> object:
        return self._inner.get_extra_info(info)


class PinnedBackend(httpcore.NetworkBackend):
    """Connects ``(host, port)`` only to addresses a policy check produced."""

    def __init__(self) -> None:
        self._inner = httpcore.SyncBackend()
        self._pins: dict[tuple[str, int], tuple[str, ...]] = {}
        self._lock = threading.Lock()

    def pin(self, target: Target) -> None:
        with self._lock:
            self._pins[(normal_host(target.host), target.port)] = target.addresses

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        with self._lock:
            addrs = self._pins.get((host.lower().strip("[]").rstrip("."), port))  # "example.com." too
        if not addrs:
            raise httpcore.ConnectError(f"address of {host}:{port} was not checked by the fetch policy")
        last: Exception | None = None
        for a in addrs:
            try:
                return _DeadlineStream(
                    self._inner.connect_tcp(a, port, _clamp(timeout), local_address, socket_options)
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as e:
                last = e
        assert last is not None
        raise last

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("unix sockets are not reachable through fetch")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class _PinnedTransport(httpx.HTTPTransport):
    def __init__(self, backend: PinnedBackend, ssl_context: ssl.SSLContext) -> None:
        super().__init__(verify=ssl_context, trust_env=False)
        self._pool = httpcore.ConnectionPool(
            ssl_context=ssl_context,
            max_connections=64,
            max_keepalive_connections=16,
            keepalive_expiry=5.0,
            network_backend=backend,
        )


_ssl_context: ssl.SSLContext | None = None
_ssl_lock = threading.Lock()


def _shared_ssl_context() -> ssl.SSLContext:
    global _ssl_context
    with _ssl_lock:
        if _ssl_context is None:
            _ssl_context = httpx.create_ssl_context()
        return _ssl_context


def pinned_client(backend: PinnedBackend, headers: dict[str, str]) -> httpx.Client:
    """An httpx client connecting through ``backend`` only: no environment proxies, redirects not
    followed (the caller checks every hop), one shared TLS context."""
    return httpx.Client(
        transport=_PinnedTransport(backend, _shared_ssl_context()),
        trust_env=False,
        follow_redirects=False,
        headers=headers,
    )
