"""URL and address checks (SSRF protection) for the fetch pipeline.

:func:`check_url` is called for the first URL and again for every redirect hop. It accepts only
``http``/``https``, applies the ``deny_hosts``/``allow_hosts`` patterns, resolves the host (numeric IPv4
forms like ``0x7f000001``, ``2130706433``, ``0177.0.0.1`` and ``127.1`` are parsed as the C library
would), and refuses any address that is not globally routable — loopback, private, link-local,
multicast, reserved, unspecified, shared (CGNAT), documentation, cloud metadata — for IPv4 and IPv6,
including IPv4-mapped/-compatible, 6to4, Teredo and NAT64 forms of such addresses. Every address a name
resolves to must pass. A host (or ``host:port``) listed in ``allow_private`` skips the address check.

The result, :class:`Target`, carries the checked addresses; the HTTP layer connects only to those.

Host names are compared in ONE normal form (:func:`normal_host`: lower-case, IDNA, trailing dots
dropped — ``EVIL.com。`` is ``evil.com``), and a numeric host also matches host patterns in its dotted
form (``0x7f000001`` matches a pattern ``127.0.0.1``), so no spelling of a name slips past
``deny_hosts``. The name service is a seam (:class:`Resolver`); tests inject one to play DNS rebinding.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import socket
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

from ..config import FetchPolicy
from ..errors import FetchRefused

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean, Oracle
        "169.254.170.2",  # AWS ECS task metadata
        "169.254.169.123",  # AWS time sync
        "fd00:ec2::254",  # AWS IPv6 metadata
        "fd00:ec2::23",  # AWS IPv6 DNS
        "100.100.100.200",  # Alibaba Cloud
        "192.0.0.192",  # Oracle Cloud
    )
)
"""Well-known cloud metadata endpoints, named as such in refusals (they are non-public anyway)."""

_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")
RESOLVER_THREADS = 32
"""Name lookups running at once in this process (threads are made on demand). A lookup that hangs holds
its thread until the resolver gives up, so the pool is sized for a few hung lookups per question of a
concurrent sweep without starving the others' lookups."""

_resolver = ThreadPoolExecutor(max_workers=RESOLVER_THREADS, thread_name_prefix="fte-resolve")


class Resolver(Protocol):
    """Looks up the addresses of a host name (the system resolver by default; tests inject one)."""

    def __call__(self, host: str, port: int) -> Sequence[str]:
        """Addresses of ``host`` (IDNA form) as strings (IPv6 may carry ``%scope``); raise ``OSError``
        (e.g. ``socket.gaierror``) when the name cannot be resolved."""
        ...


def system_resolver(host: str, port: int) -> list[str]:
    """``getaddrinfo`` for TCP; IPv6 scope ids kept as ``addr%scope``."""
    out: list[str] = []
    for _family, _type, _proto, _canon, sockaddr in socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM):
        a = str(sockaddr[0])
        if len(sockaddr) >= 4 and sockaddr[3] and "%" not in a:
            a = f"{a}%{sockaddr[3]}"
        out.append(a)
    return out


@dataclass(frozen=True)
class Target:
    """A URL that passed the policy, with the addresses the connection may use."""

    url: str
    """The URL as given (not canonicalized)."""
    scheme: str
    """``http`` or ``https``."""
    host: str
    """Host name in its normal form (:func:`normal_host`; IPv6 without brackets): the key the transport's
    address pins use."""
    port: int
    """Port (the scheme's default if the URL has none)."""
    addresses: tuple[str, ...]
    """Checked IP addresses to connect to, in resolver order."""
    allowed_private: bool = False
    """True if ``allow_private`` let a non-public address through."""


def parse_numeric_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """The address of a numeric IPv4 host in any form ``inet_aton`` accepts (``127.1``, ``0x7f.1``,
    ``0177.0.0.1``, ``2130706433``), else None."""
    parts = host.split(".")
    if parts and parts[-1] == "":
        parts = parts[:-1]  # trailing dot
    if not 1 <= len(parts) <= 4:
        return None
    nums: list[int] = []
    for p in parts:
        try:
            if p.lower().startswith("0x"):
                n = int(p, 16) if len(p) > 2 else -1  # "0x" alone is not a number (inet_aton agrees)
            elif len(p) > 1 and p.startswith("0"):
                n = int(p, 8)
            else:
                if not p.isdigit():
                    return None
                n = int(p, 10)
        except ValueError:
            return None
        if n < 0:
            return None
        nums.append(n)
    *head, last = nums
    if any(n > 255 for n in head) or last >= 256 ** (4 - len(head)):
        return None
    value = 0
    for n in head:
        value = value * 256 + n
    value = (value << (8 * (4 - len(head)))) | last
    return ipaddress.IPv4Address(value)


def embedded_ipv4(addr: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, compatible, 6to4, Teredo client, NAT64)."""
    if addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    if addr.sixtofour is not None:
        return addr.sixtofour
    if addr.teredo is not None:
        return addr.teredo[1]
    if addr in _NAT64 or addr in _NAT64_LOCAL:
        return ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF)
    packed = addr.packed
    if packed[:12] == b"\x00" * 12 and int(addr) > 1:  # IPv4-compatible ::a.b.c.d (not :: or ::1)
        return ipaddress.IPv4Address(packed[12:])
    return None


def address_problem(addr: IPAddress) -> str | None:
    """Why ``addr`` may not be reached (``"a loopback address"`` …), or None if it is public."""
    if addr in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if isinstance(addr, ipaddress.IPv6Address):
        if addr.scope_id:
            return "a scoped (link-local) IPv6 address"
        inner = embedded_ipv4(addr)
        if inner is not None:  # mapped/compatible/6to4/Teredo/NAT64: judged by the IPv4 it carries
            why = address_problem(inner)
            return None if why is None else f"{why} ({inner} inside an IPv6 address)"
    checks = (
        ("is_unspecified", "an unspecified address"),
        ("is_loopback", "a loopback address"),
        ("is_link_local", "a link-local address"),
        ("is_multicast", "a multicast address"),
        ("is_reserved", "a reserved address"),
        ("is_private", "a private address"),
    )
    for attr, why in checks:
        if getattr(addr, attr):
            return why
    if isinstance(addr, ipaddress.IPv6Address) and addr.is_site_local:
        return "a site-local address"
    if not addr.is_global:
        return "a non-public address"
    return None


def _host_matches(host: str, pattern: str) -> bool:
    p = pattern.strip().lower().rstrip(".")
    if not p:
        return False
    if p.startswith("*.") and not any(c in p[2:] for c in "*?["):
        base = p[2:]
        return host == base or host.endswith("." + base)
    if any(c in p for c in "*?["):
        return fnmatch.fnmatchcase(host, p)
    return host == p


def _allowed_private(policy: FetchPolicy, host: str, port: int) -> bool:
    forms = {host, f"{host}:{port}", f"[{host}]", f"[{host}]:{port}"}
    return any(entry.strip().lower() in forms for entry in policy.allow_private)


def _resolve(host: str, port: int, timeout_s: float, resolver: Resolver | None = None) -> list[IPAddress]:
    numeric = parse_numeric_ipv4(host)
    if numeric is not None:
        return [numeric]
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    fut = _resolver.submit(resolver or system_resolver, host, port)
    try:
        infos = fut.result(timeout=max(0.05, timeout_s))
    except FutureTimeout:
        raise FetchRefused(
            f"cannot resolve host {host}: DNS lookup timed out after {timeout_s:.1f} s"
        ) from None
    except (socket.gaierror, UnicodeError, OSError) as e:
        raise FetchRefused(f"cannot resolve host {host}: {getattr(e, 'strerror', None) or e}") from None
    out: list[IPAddress] = []
    for text in infos:
        try:
            a = ipaddress.ip_address(text)
        except ValueError:
            raise FetchRefused(f"cannot resolve host {host}: the resolver gave {text!r}, not an address") from None
        if a not in out:
            out.append(a)
    if not out:
        raise FetchRefused(f"cannot resolve host {host}: no address")
    return out


def _is_literal(host: str, addr: IPAddress) -> bool:
    try:
        return ipaddress.ip_address(host) == addr
    except ValueError:
        return False


def ascii_host(host: str) -> str:
    """The host as it goes on the wire: internationalized names in IDNA (``xn--…``) form, lower-case."""
    if host.isascii():
        return host.lower()
    try:
        import idna

        return str(idna.encode(host.lower(), uts46=True).decode("ascii"))
    except (ImportError, UnicodeError, ValueError):
        try:
            return host.lower().encode("idna").decode("ascii")
        except UnicodeError:
            return host.lower()


def normal_host(host: str) -> str:
    """The one form host names are compared in: lower-case, IDNA (``xn--…``), without brackets and
    without trailing dots (``EVIL.com。`` → ``evil.com``)."""
    return ascii_host(host.strip("[]")).rstrip(".")


def host_forms(host: str) -> set[str]:
    """Every spelling a host pattern is matched against: as written (lower-case, no trailing dot), the
    normal form, and for a numeric host its canonical address (``0x7f000001`` → ``127.0.0.1``)."""
    written = host.lower().strip("[]").rstrip(".")
    norm = normal_host(host)
    forms = {written, norm}
    numeric: IPAddress | None = parse_numeric_ipv4(norm)
    if numeric is None:
        try:
            numeric = ipaddress.ip_address(norm)
        except ValueError:
            numeric = None
    if numeric is not None:
        forms.add(str(numeric))
    return forms


def check_host_patterns(policy: FetchPolicy, host: str) -> None:
    """Apply ``deny_hosts`` then ``allow_hosts`` (to every spelling in :func:`host_forms`); raises
    :class:`FetchRefused`."""
    forms = host_forms(host)
    for pat in policy.deny_hosts:
        if any(_host_matches(h, pat) for h in forms):
            raise FetchRefused(f"refused host {host}: matches deny_hosts pattern {pat!r}")
    if policy.allow_hosts and not any(_host_matches(h, p) for p in policy.allow_hosts for h in forms):
        raise FetchRefused(f"refused host {host}: not in allow_hosts")


def check_url(
    url: str, policy: FetchPolicy, *, timeout_s: float | None = None, resolver: Resolver | None = None
) -> Target:
    """Check ``url`` against ``policy`` and resolve it (with ``resolver``, the system's by default);
    raises :class:`FetchRefused` with one line."""
    raw = url.strip()
    shown = raw if len(raw) <= 200 else raw[:199] + "…"
    if any(c in raw for c in "\r\n\t\x00"):
        raise FetchRefused(f"refused {shown!r}: control characters in URL")
    try:
        parts = urlsplit(raw)
        port_given = parts.port
    except ValueError as e:
        raise FetchRefused(f"refused {shown}: invalid URL ({e})") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        what = f"scheme {scheme}:" if scheme else "no scheme"
        raise FetchRefused(f"refused {shown}: {what} is not supported (only http:// and https://)")
    host = (parts.hostname or "").lower().rstrip(".") if parts.hostname else ""
    wire = normal_host(host) if host else ""
    if not host or not wire:
        raise FetchRefused(f"refused {shown}: no host")
    port = port_given if port_given is not None else (443 if scheme == "https" else 80)
    check_host_patterns(policy, host)
    allowed = any(_allowed_private(policy, h, port) for h in {host, wire})
    addrs = _resolve(wire, port, policy.timeout_s if timeout_s is None else timeout_s, resolver)
    if not allowed:
        for a in addrs:
            why = address_problem(a)
            if why is not None:
                if _is_literal(host, a):
                    raise FetchRefused(f"refused {shown}: {host} is {why}")
                raise FetchRefused(f"refused {shown}: host {host} resolves to {a}, which is {why}")
    return Target(
        url=raw,
        scheme=scheme,
        host=wire,
        port=port,
        addresses=tuple(str(a) for a in addrs),
        allowed_private=allowed,
    )
