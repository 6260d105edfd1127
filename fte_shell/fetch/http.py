"""HTTP download with an SSRF-safe transport.

* Every URL (the first and each redirect hop) goes through :func:`policy.check_url`, which resolves the
  host and checks the addresses; the transport (:mod:`fte_shell.fetch.transport`) then connects ONLY to
  those checked addresses, so a second DNS answer cannot point the connection elsewhere (no DNS
  rebinding).
* Redirects are followed by hand, at most ``max_redirects``; environment proxies are ignored.
* The body is streamed and decompressed here (gzip/deflate) with a bound on the decompressed size, so a
  1 GB body or a gzip bomb is cut after ``max_bytes`` without being read or inflated whole.
* ``timeout_s`` is a hard wall clock for the whole download, redirects included: every socket
  connect/read/write/TLS handshake is clamped to the time left (:func:`transport.fetch_deadline`), so a
  trickling server cannot stretch it.
* Every failure raises :class:`FetchRefused` (or :class:`BudgetExceeded`) with one line.
"""

from __future__ import annotations

import re
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from email.message import Message
from urllib.parse import urljoin

import httpx

from ..config import FetchPolicy
from ..errors import BudgetExceeded, FetchRefused
from .policy import Resolver, check_url
from .transport import PinnedBackend, fetch_deadline, peer_address, pinned_client

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
ACCEPT = "text/html,application/xhtml+xml,application/pdf,text/plain;q=0.9,application/json;q=0.9,*/*;q=0.5"
_CHUNK = 65_536


@dataclass(frozen=True)
class HttpResult:
    """A successful download."""

    url: str
    """Final URL (after redirects)."""
    status: int
    """HTTP status (2xx)."""
    content_type: str | None
    """Bare MIME type from Content-Type, lower-case, or None."""
    charset: str | None
    """``charset`` parameter of Content-Type, or None."""
    body: bytes
    """Decompressed body (at most ``max_bytes``)."""
    wire_bytes: int
    """Bytes received from the network for this fetch (all hops, before decompression)."""


@dataclass(frozen=True)
class Hop:
    """One request of a download and what came back (the snapshot writes its WARC records from it)."""

    request: httpx.Request
    response: httpx.Response | None
    """None: no answer (connection failed, timed out)."""
    body: bytes
    """The (decompressed) body read: the page for the final hop, ``b""`` for redirects and refusals."""
    address: str | None
    """The IP address the connection went to."""


def _parse_content_type(value: str | None) -> tuple[str | None, str | None]:
    if not value:
        return None, None
    msg = Message()
    msg["content-type"] = value
    ctype = msg.get_content_type().lower() if "/" in value.split(";", 1)[0] else None
    charset = msg.get_param("charset")
    return ctype, (str(charset).strip() if isinstance(charset, str) and charset.strip() else None)


class _Inflater:
    """Incremental gzip/deflate decoder whose output is bounded per call."""

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding
        if encoding in ("gzip", "x-gzip"):
            self._d: zlib._Decompress | None = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            self._d = None  # zlib-wrapped or raw: decided on the first bytes
        else:
            raise FetchRefused(f"unsupported content encoding {shown_url(encoding)!r}")

    def feed(self, data: bytes, room: int) -> bytes:
        """Decompress ``data``, returning at most ``room + 1`` bytes (one more = over the limit)."""
        if self._d is None:
            self._d = zlib.decompressobj(zlib.MAX_WBITS if data[:1] == b"\x78" else -zlib.MAX_WBITS)
        try:
            out = self._d.decompress(data, room + 1)
        except zlib.error as e:
            raise FetchRefused(f"corrupt {self.encoding} body: {e}") from None
        return out


SHOWN_URL_CHARS = 200
"""A URL in an error message is cut to this many characters (a 12 KB redirect target stays one short line)."""


def shown_url(url: str) -> str:
    """``url`` as error messages show it: at most :data:`SHOWN_URL_CHARS` characters, a cut marked ``…``."""
    return url if len(url) <= SHOWN_URL_CHARS else url[: SHOWN_URL_CHARS - 1] + "…"


def _fmt_bytes(n: int) -> str:
    return f"{n:,} bytes"


class HttpFetcher:
    """Downloads URLs under one :class:`FetchPolicy`. Thread-safe; one connection pool."""

    def __init__(self, policy: FetchPolicy, *, resolver: Resolver | None = None) -> None:
        self.policy = policy
        self.resolver = resolver
        """Name service for the policy checks (None: the system resolver); the connection never asks
        another one."""
        self._backend = PinnedBackend()
        self._client = pinned_client(
            self._backend,
            {"User-Agent": policy.user_agent, "Accept": ACCEPT, "Accept-Encoding": "gzip, deflate"},
        )

    def close(self) -> None:
        self._client.close()

    def get(
        self,
        url: str,
        *,
        budget_bytes: int | None = None,
        accept_type: Callable[[str | None], None] | None = None,
        deadline: float | None = None,
        on_hop: Callable[[Hop], None] | None = None,
    ) -> HttpResult:
        """Download ``url``. ``budget_bytes``: network bytes this question may still spend
        (:class:`BudgetExceeded` beyond it). ``accept_type(content_type)`` may raise to refuse a type
        before the body is read. ``on_hop`` sees every request and its answer (the snapshot)."""
        policy = self.policy
        own = time.monotonic() + policy.timeout_s
        deadline = own if deadline is None else min(own, deadline)
        with fetch_deadline(deadline):
            return self._get(url, deadline, budget_bytes, accept_type, on_hop or (lambda hop: None))

    def _get(
        self,
        url: str,
        deadline: float,
        budget_bytes: int | None,
        accept_type: Callable[[str | None], None] | None,
        on_hop: Callable[[Hop], None],
    ) -> HttpResult:
        policy = self.policy
        current = url
        wire = 0
        for hop in range(policy.max_redirects + 1):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise FetchRefused(f"timed out after {policy.timeout_s:g} s fetching {shown_url(url)}")
            target = check_url(current, policy, timeout_s=remaining, resolver=self.resolver)
            self._backend.pin(target)
            try:
                request = self._client.build_request(
                    "GET", current, timeout=httpx.Timeout(max(0.01, deadline - time.monotonic()))
                )
            except httpx.HTTPError as e:
                raise FetchRefused(_network_error(current, e)) from None
            try:
                response = self._client.send(request, stream=True)
            except httpx.TimeoutException:
                on_hop(Hop(request, None, b"", None))
                raise FetchRefused(f"timed out after {policy.timeout_s:g} s fetching {shown_url(current)}") from None
            except httpx.HTTPError as e:
                on_hop(Hop(request, None, b"", None))
                raise FetchRefused(_network_error(current, e)) from None
            recorded = False
            try:
                if response.status_code in REDIRECT_STATUSES and "location" in response.headers:
                    location = response.headers["location"]
                    wire += _drain_small(response)
                    nxt = urljoin(current, location.strip())
                    if hop == policy.max_redirects:
                        raise FetchRefused(
                            f"too many redirects (more than {policy.max_redirects}) fetching {shown_url(url)}"
                        )
                    current = nxt
                    continue
                if not 200 <= response.status_code < 300:
                    reason = (response.reason_phrase or "")[:100]
                    raise FetchRefused(
                        f"HTTP {response.status_code}{' ' + reason if reason else ''} from {shown_url(current)}"
                    )
                ctype, charset = _parse_content_type(response.headers.get("content-type"))
                if accept_type is not None:
                    accept_type(ctype)
                body, got = self._read_body(response, current, deadline, budget_bytes, wire)
                wire += got
                recorded = True
                on_hop(Hop(request, response, body, peer_address(response)))
                return HttpResult(
                    url=current,
                    status=response.status_code,
                    content_type=ctype,
                    charset=charset,
                    body=body,
                    wire_bytes=wire,
                )
            finally:
                if not recorded:  # a redirect or a refused answer: recorded without its body
                    on_hop(Hop(request, response, b"", peer_address(response)))
                response.close()
        raise FetchRefused(f"too many redirects (more than {policy.max_redirects}) fetching {shown_url(url)}")

    def _read_body(
        self, response: httpx.Response, url: str, deadline: float, budget: int | None, spent: int
    ) -> tuple[bytes, int]:
        policy = self.policy
        limit = policy.max_bytes
        declared = response.headers.get("content-length")
        encodings = [
            e.strip().lower() for e in response.headers.get("content-encoding", "").split(",") if e.strip()
        ]
        encodings = [e for e in encodings if e != "identity"]
        if len(encodings) > 1:
            chain = shown_url(", ".join(encodings))
            raise FetchRefused(f"unsupported content encoding {chain!r} from {shown_url(url)}")
        inflater = _Inflater(encodings[0]) if encodings else None
        if declared and declared.isdigit():
            n = int(declared)
            if inflater is None and n > limit:
                raise FetchRefused(
                    f"response too large: {_fmt_bytes(n)} declared, limit {_fmt_bytes(limit)} (max_bytes) from {shown_url(url)}"
                )
            if budget is not None and spent + n > budget:
                raise BudgetExceeded(
                    f"byte budget spent: {shown_url(url)} needs {_fmt_bytes(n)}, {_fmt_bytes(max(0, budget - spent))} left of max_total_bytes"
                )
        parts: list[bytes] = []
        size = 0
        wire = 0
        try:
            for raw in response.iter_raw(_CHUNK):
                wire += len(raw)
                if budget is not None and spent + wire > budget:
                    raise BudgetExceeded(f"byte budget spent while downloading {shown_url(url)} (max_total_bytes)")
                data = inflater.feed(raw, limit - size) if inflater is not None else raw
                size += len(data)
                if size > limit:
                    what = "decompressed body" if inflater is not None else "response"
                    raise FetchRefused(
                        f"{what} too large: more than {_fmt_bytes(limit)} (max_bytes) from {shown_url(url)}"
                    )
                parts.append(data)
                if inflater is not None:
                    while self._inflate_more(inflater, parts, limit, size):
                        size = sum(len(p) for p in parts)
                        if size > limit:
                            raise FetchRefused(
                                f"decompressed body too large: more than {_fmt_bytes(limit)} (max_bytes) from {shown_url(url)}"
                            )
                if time.monotonic() > deadline:
                    raise FetchRefused(f"timed out after {policy.timeout_s:g} s reading {shown_url(url)}")
        except httpx.TimeoutException:
            raise FetchRefused(f"timed out after {policy.timeout_s:g} s reading {shown_url(url)}") from None
        except httpx.HTTPError as e:
            raise FetchRefused(_network_error(url, e)) from None
        return b"".join(parts), wire

    @staticmethod
    def _inflate_more(inflater: _Inflater, parts: list[bytes], limit: int, size: int) -> bool:
        d = inflater._d
        if d is None or not d.unconsumed_tail:
            return False
        more = inflater.feed(d.unconsumed_tail, limit - size)
        if not more:
            return False
        parts.append(more)
        return True


def _drain_small(response: httpx.Response, cap: int = 65_536) -> int:
    """Read at most ``cap`` bytes of a redirect body (so the connection can be reused)."""
    got = 0
    try:
        for raw in response.iter_raw(16_384):
            got += len(raw)
            if got >= cap:
                break
    except httpx.HTTPError:
        pass
    return got


_TLS_HINT = re.compile(r"ssl|tls|certificate|handshake", re.IGNORECASE)


def _network_error(url: str, e: Exception) -> str:
    msg = str(e).strip().splitlines()[0] if str(e).strip() else e.__class__.__name__
    if len(msg) > SHOWN_URL_CHARS:  # e.g. h11 quoting a 2 MB header line back
        msg = msg[: SHOWN_URL_CHARS - 1] + "…"
    if _TLS_HINT.search(msg):
        return f"TLS error fetching {shown_url(url)}: {msg}"
    if isinstance(e, httpx.ConnectError):
        return f"cannot connect to {shown_url(url)}: {msg}"
    if isinstance(e, httpx.RemoteProtocolError):
        return f"protocol error from {shown_url(url)}: {msg}"
    return f"network error fetching {shown_url(url)}: {msg}"
