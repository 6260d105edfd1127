"""The URL/address policy and the pinned-address transport (no network beyond a loopback server)."""

from __future__ import annotations

import ipaddress

import httpcore
import httpx
import pytest

from fte_shell.config import FetchPolicy
from fte_shell.errors import FetchRefused
from fte_shell.fetch.http import HttpFetcher
from fte_shell.fetch.policy import Target, address_problem, ascii_host, check_url, parse_numeric_ipv4
from tests.servers import LoopbackServer


@pytest.mark.parametrize(
    ("host", "addr"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("10.1", "10.0.0.1"),
        ("0", "0.0.0.0"),
        ("8.8.8.8.", "8.8.8.8"),
    ],
)
def test_numeric_ipv4_forms(host: str, addr: str) -> None:
    assert parse_numeric_ipv4(host) == ipaddress.IPv4Address(addr)


@pytest.mark.parametrize(
    "host", ["example.com", "1.2.3.4.5", "256.1.1.1", "0x", "1.2.3.999", "08.1.1.1", "4294967296"]
)
def test_non_numeric_hosts(host: str) -> None:
    assert parse_numeric_ipv4(host) is None


@pytest.mark.parametrize(
    ("addr", "why"),
    [
        ("127.0.0.1", "loopback"),
        ("10.0.0.1", "private"),
        ("172.16.5.4", "private"),
        ("192.168.1.1", "private"),
        ("169.254.1.1", "link-local"),
        ("169.254.169.254", "metadata"),
        ("100.100.100.200", "metadata"),
        ("100.64.0.1", "non-public"),
        ("224.0.0.1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("0.0.0.0", "unspecified"),
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("fe80::1", "link-local"),
        ("fc00::1", "private"),
        ("fd00:ec2::254", "metadata"),
        ("ff02::1", "multicast"),
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:169.254.169.254", "metadata"),
        ("::127.0.0.1", "loopback"),
        ("2002:a00:1::1", "private"),
        ("64:ff9b::7f00:1", "loopback"),
        ("2001:0:4136:e378:8000:63bf:f5ff:fffe", "private"),  # Teredo, client 10.0.0.1
    ],
)
def test_non_public_addresses_are_named(addr: str, why: str) -> None:
    problem = address_problem(ipaddress.ip_address(addr))
    assert problem is not None and why in problem


@pytest.mark.parametrize(
    "addr", ["8.8.8.8", "93.184.216.34", "2606:4700:4700::1111", "::ffff:8.8.8.8", "2002:808:808::1"]
)
def test_public_addresses_pass(addr: str) -> None:
    assert address_problem(ipaddress.ip_address(addr)) is None


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("file:///etc/passwd", "scheme file:"),
        ("ftp://example.com/x", "scheme ftp:"),
        ("gopher://example.com/", "scheme gopher:"),
        ("example.com/page", "no scheme"),
        ("http:///nohost", "no host"),
        ("http://[::1]/", "loopback"),
        ("http://[::1]:8080/", "loopback"),
        ("http://169.254.169.254/latest/meta-data/", "cloud metadata"),
        ("http://[::ffff:127.0.0.1]/", "loopback"),
        ("http://0x7f000001/", "resolves to 127.0.0.1, which is a loopback"),
        ("http://2130706433/", "loopback"),
        ("http://0177.0.0.1/", "loopback"),
        ("http://127.1/", "loopback"),
        ("http://localhost/", "host localhost resolves to"),
        ("http://LOCALHOST./", "loopback"),
        ("http://10.0.0.1/", "private"),
        ("http://host.invalid/", "cannot resolve host"),
        ("http://a\nb/", "control characters"),
        # review R2: more spellings of loopback/unspecified/link-local
        ("http://0/", "unspecified"),
        ("http://[::]/", "unspecified"),
        ("http://[fe80::1%25lo]/", "scoped (link-local)"),
        ("http://[::1%25lo]/", "scoped"),
        ("http://allowed@127.0.0.1/", "loopback"),
        ("http://allowed.example:80@127.0.0.1/", "loopback"),
        ("http://127.0.0.1#@allowed.example/", "loopback"),
        ("http://１２７.０.０.１/", "loopback"),
        ("http://localhost。/", "loopback"),
        ("http://[0:0:0:0:0:ffff:127.0.0.1]/", "loopback"),
        ("http://127.0.0.1:99999/", "invalid URL"),
    ],
)
def test_refusals_are_one_clear_line(url: str, reason: str) -> None:
    with pytest.raises(FetchRefused) as e:
        check_url(url, FetchPolicy(timeout_s=5))
    msg = str(e.value)
    assert reason in msg and "\n" not in msg and msg.startswith(("refused", "cannot resolve"))


def test_allow_private_by_host_or_host_port() -> None:
    assert check_url("http://127.0.0.1:8000/", FetchPolicy(allow_private=["127.0.0.1:8000"])).addresses == (
        "127.0.0.1",
    )
    assert check_url("http://localhost/", FetchPolicy(allow_private=["localhost"])).allowed_private
    assert check_url("http://[::1]:9/", FetchPolicy(allow_private=["[::1]:9"])).addresses == ("::1",)
    with pytest.raises(FetchRefused, match="loopback"):
        check_url("http://127.0.0.1:8001/", FetchPolicy(allow_private=["127.0.0.1:8000"]))  # other port


def test_host_patterns() -> None:
    deny = FetchPolicy(deny_hosts=["*.answers.example", "evil.test"])
    for url in ("http://answers.example/", "http://www.answers.example/x", "http://EVIL.test/"):
        with pytest.raises(FetchRefused, match="deny_hosts"):
            check_url(url, deny)
    allow = FetchPolicy(allow_hosts=["docs-*.example"], allow_private=["docs-a.example"])
    with pytest.raises(FetchRefused, match="not in allow_hosts"):
        check_url("http://other.example/", allow)
    both = FetchPolicy(allow_hosts=["127.0.0.1"], deny_hosts=["127.0.0.*"], allow_private=["127.0.0.1"])
    with pytest.raises(FetchRefused, match="deny_hosts"):
        check_url("http://127.0.0.1/", both)  # deny wins over allow


def test_internationalized_host_names() -> None:
    assert ascii_host("Bücher.Example") == "xn--bcher-kva.example"
    with pytest.raises(FetchRefused, match="deny_hosts"):
        check_url("http://bücher.example/", FetchPolicy(deny_hosts=["xn--bcher-kva.example"]))
    with pytest.raises(FetchRefused, match="deny_hosts"):
        check_url("http://xn--bcher-kva.example/", FetchPolicy(deny_hosts=["*.example"]))
    with LoopbackServer() as srv:  # the pin is keyed by the wire form httpcore connects with
        srv.route("/idn", body="idn ok", content_type="text/plain")
        fetcher = HttpFetcher(FetchPolicy())
        try:
            fetcher._backend.pin(
                Target("http://bücher.invalid/", "http", "bücher.invalid", srv.port, ("127.0.0.1",))
            )
            assert fetcher._client.get(f"http://bücher.invalid:{srv.port}/idn").text == "idn ok"
        finally:
            fetcher.close()


def test_transport_connects_only_to_checked_addresses() -> None:
    """A name is connected to the address the policy checked (no second DNS lookup), keeping the Host
    header; a (host, port) that was never checked cannot be connected to at all."""
    with LoopbackServer() as srv:
        srv.route("/who", body="here", content_type="text/plain")
        fetcher = HttpFetcher(FetchPolicy())
        try:
            fetcher._backend.pin(
                Target("http://rebind.invalid/", "http", "rebind.invalid", srv.port, ("127.0.0.1",))
            )
            r = fetcher._client.get(f"http://rebind.invalid:{srv.port}/who")
            assert r.text == "here"
            assert srv.requests[-1].headers["Host"] == f"rebind.invalid:{srv.port}"
            with pytest.raises(httpx.ConnectError, match="not checked"):
                fetcher._client.get(f"http://127.0.0.1:{srv.port}/who")
            with pytest.raises(httpcore.ConnectError):
                fetcher._backend.connect_tcp("rebind.invalid", srv.port + 1 if srv.port < 65535 else 1)
        finally:
            fetcher.close()
        assert srv.count("/who") == 1


class ScriptedResolver:
    """A name service for tests: answers from a list of answers, one per lookup (the last one repeats),
    and counts lookups."""

    def __init__(self, *answers: list[str]) -> None:
        self.answers = list(answers)
        self.calls: list[str] = []

    def __call__(self, host: str, port: int) -> list[str]:
        self.calls.append(host)
        return self.answers[min(len(self.calls), len(self.answers)) - 1]


@pytest.mark.parametrize(
    "url",
    [
        "http://evil.example。/",  # ideographic full stop: IDNA makes it "evil.example."
        "http://EVIL.example../",
        "http://evil．example/",  # fullwidth full stop
        "http://www.evil.example./x",
        "http://0x7f000001/",  # numeric spellings of a denied address
        "http://2130706433/",
        "http://0177.1/",
    ],
)
def test_deny_hosts_holds_for_every_spelling(url: str) -> None:
    """Review R2: ``evil.example。`` passed deny_hosts (only "." was trimmed before IDNA mapped "。" to
    "."), and numeric forms of a denied address were not matched."""
    policy = FetchPolicy(deny_hosts=["*.evil.example", "127.0.0.1"], allow_private=["127.0.0.1"])
    with pytest.raises(FetchRefused, match="deny_hosts"):
        check_url(url, policy, resolver=ScriptedResolver(["8.8.8.8"]))


def test_dns_rebinding_is_checked_on_every_lookup() -> None:
    """A name that first resolves to a public address and then to a private one: the second check refuses
    (and the transport only ever connects to what a check returned, see below)."""
    rebind = ScriptedResolver(["8.8.8.8"], ["127.0.0.1"])
    policy = FetchPolicy(timeout_s=5)
    assert check_url("http://rebind.test/", policy, resolver=rebind).addresses == ("8.8.8.8",)
    with pytest.raises(FetchRefused, match="rebind.test resolves to 127.0.0.1, which is a loopback"):
        check_url("http://rebind.test/", policy, resolver=rebind)
    with pytest.raises(FetchRefused, match="10.0.0.1, which is a private"):  # every address must pass
        check_url("http://mixed.test/", policy, resolver=ScriptedResolver(["8.8.8.8", "10.0.0.1"]))
    with pytest.raises(FetchRefused, match="resolves to fe80::1%eth0, which is a scoped"):
        check_url("http://scoped.test/", policy, resolver=ScriptedResolver(["fe80::1%eth0"]))
    with pytest.raises(FetchRefused, match="not an address"):
        check_url("http://junk.test/", policy, resolver=ScriptedResolver(["not-an-ip"]))


def test_hung_resolver_times_out_in_one_line() -> None:
    import threading

    release = threading.Event()

    def hung(host: str, port: int) -> list[str]:
        release.wait(30)
        return ["8.8.8.8"]

    try:
        with pytest.raises(FetchRefused, match="DNS lookup timed out"):
            check_url("http://slow.test/", FetchPolicy(), timeout_s=0.2, resolver=hung)
    finally:
        release.set()


def test_fetcher_looks_each_hop_up_once_and_accepts_trailing_dots() -> None:
    """The transport connects to what the policy's lookup returned and makes no lookup of its own (the
    system cannot resolve ``rebind.test`` at all); ``host.`` (trailing dot) is the same pinned host
    (it used to fail with "address … was not checked")."""
    with LoopbackServer() as srv:
        srv.route("/a", status=302, headers={"Location": "/b"}, body=b"")
        srv.route("/b", body="second hop", content_type="text/plain")
        resolver = ScriptedResolver(["127.0.0.1"])
        fetcher = HttpFetcher(FetchPolicy(allow_private=[f"rebind.test:{srv.port}"]), resolver=resolver)
        try:
            assert fetcher.get(f"http://rebind.test:{srv.port}/a").body == b"second hop"
            assert resolver.calls == ["rebind.test", "rebind.test"]  # one per hop, none by the connection
            assert fetcher.get(f"http://REBIND.test.:{srv.port}/b").body == b"second hop"
            assert srv.requests[-1].headers["Host"] == f"rebind.test.:{srv.port}"
        finally:
            fetcher.close()


def test_hung_lookups_do_not_starve_other_lookups() -> None:
    """Review R2: the lookup pool is shared by every question of a process; 8 hung lookups (an agent
    fetching names whose DNS never answers) used to fill it, so every other lookup timed out."""
    import threading

    from fte_shell.fetch import policy as policy_mod

    release = threading.Event()

    def hung(host: str, port: int) -> list[str]:
        release.wait(30)
        return ["8.8.8.8"]

    try:
        for i in range(8):
            with pytest.raises(FetchRefused, match="timed out"):
                check_url(f"http://hung{i}.test/", FetchPolicy(), timeout_s=0.05, resolver=hung)
        assert policy_mod.RESOLVER_THREADS > 8
        t = check_url("http://fine.test/", FetchPolicy(), timeout_s=10, resolver=ScriptedResolver(["8.8.8.8"]))
        assert t.addresses == ("8.8.8.8",)
    finally:
        release.set()
