"""Inside a real box of every provider case (tests/providers.py; these are guarantee probes): search and fetch through the gateway (loopback page server, local corpus),
the record lines, and the isolation guarantees — only `lo`, no DNS, no direct sockets, one socket per
question, a read-only /work, no API key in the environment."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from fte_shell import Sandbox, SandboxConfig
from fte_shell.config import FetchPolicy
from fte_shell.search import LocalCorpus, format_results
from fte_shell.search.corpus import CorpusDoc, build_corpus
from fte_shell.world import RunWorld
from tests.providers import ProviderCase
from tests.servers import LoopbackServer

pytestmark = pytest.mark.docker

SECRETS = {"SERPER_API_KEY": "serper-secret-4b1d", "OPENAI_API_KEY": "sk-openai-secret-9f2e"}
HTML = "<html><head><title>Isolation page</title></head><body><main><h1>Isolation</h1><p>The {} fox.</p></main></body></html>"


@pytest.fixture(scope="module")
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:
        srv.route("/a.html", body=HTML.format("red"))
        srv.route("/b.txt", body="plain text page\nsecond line\n", content_type="text/plain; charset=utf-8")
        yield srv


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> LocalCorpus:
    docs = [
        CorpusDoc(docid="koala", title="Koala", text="The koala is an arboreal marsupial native to Australia.",
                  url="https://en.wikipedia.org/wiki/Koala"),
        CorpusDoc(docid="eucalyptus", title="Eucalyptus", text="Koalas eat eucalyptus leaves."),
    ]
    return LocalCorpus(build_corpus(docs, tmp_path_factory.mktemp("corpus") / "idx"))


def _config(case: ProviderCase, server: LoopbackServer) -> SandboxConfig:
    return case.config(fetch_policy=FetchPolicy(allow_private=[server.host_port]), command_timeout_s=60)


@pytest.fixture(scope="module")
def sb(provider_case: ProviderCase, server: LoopbackServer, corpus: LocalCorpus) -> Iterator[Sandbox]:
    with pytest.MonkeyPatch.context() as mp:
        for k, v in SECRETS.items():
            mp.setenv(k, v)
        with Sandbox(_config(provider_case, server), world=RunWorld(corpus, corpus)) as box:
            yield box


def run(sb: Sandbox, command: str) -> tuple[str, int | None]:
    obs = sb.run(command)
    return obs.output, obs.exit_code


def test_search_from_the_container(sb: Sandbox, corpus: LocalCorpus) -> None:
    out, code = run(sb, "search koala leaves -n 2")
    assert code == 0
    assert out.strip() == format_results("koala leaves", corpus.search("koala leaves", 2))


def test_fetch_pages_through_the_gateway(sb: Sandbox, server: LoopbackServer) -> None:
    url = server.url("/a.html")
    out, code = run(sb, f"fetch {url}")
    assert code == 0, out
    line = out.strip()
    path = line.split()[0]
    assert path.startswith("/work/127-0-0-1-") and f"  new  {url}  " in line and line.endswith('"Isolation page"')
    head, _ = run(sb, f"head -4 {path}")
    assert head.splitlines()[:2] == [f"URL: {url}", "Title: Isolation page"]
    assert "red fox" in run(sb, f"grep -c 'red fox' {path}; cat {path}")[0]
    again, code = run(sb, f"fetch {url}")
    assert code == 0 and "  held  " in again
    assert server.count("/a.html") == 1
    # two at once, one refused: the good one is saved, the exit status says something was refused
    out, code = run(sb, f"fetch {server.url('/b.txt')} http://10.1.2.3/x")
    assert code == 1
    assert "  new  " in out and "10.1.2.3" in out


def test_fetch_local_corpus_makes_no_http(provider_case: ProviderCase, server: LoopbackServer,
                                         corpus: LocalCorpus) -> None:
    with LoopbackServer() as quiet:
        cfg = provider_case.config(fetch_policy=FetchPolicy(allow_private=[quiet.host_port]))
        with Sandbox(cfg, world=RunWorld(corpus, corpus)) as box:
            out, code = run(box, "fetch eucalyptus https://en.wikipedia.org/wiki/Koala && list_fetched")
            assert code == 0, out
            lines = out.strip().splitlines()
            assert lines[0].startswith("/work/eucalyptus-") and "  new  eucalyptus  " in lines[0]
            assert lines[1].startswith("/work/koala-") and "  new  koala  " in lines[1]
            chars = sum(len(corpus.get(d).text) + 1 for d in ("koala", "eucalyptus"))  # type: ignore[union-attr]
            assert lines[-1] == f"2 documents, {chars} chars"
            head, _ = run(box, "head -1 /work/koala-*.txt")
            assert head.strip() == "Docid: koala"
        assert quiet.count() == 0


def test_only_loopback_interface(sb: Sandbox) -> None:
    out, code = run(sb, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '")
    assert code == 0 and out.split() == ["lo"]


def test_no_dns(sb: Sandbox) -> None:
    out, code = run(sb, "getent hosts example.com")
    assert code != 0 and out.strip() == ""
    out, code = run(sb, "python3 -c 'import socket; socket.getaddrinfo(\"example.com\", 443)'")
    assert code != 0 and "gaierror" in out


@pytest.mark.parametrize("target", ["HOST_SERVER", "8.8.8.8:53", "1.1.1.1:443", "[::1]:80"])
def test_direct_sockets_fail(sb: Sandbox, server: LoopbackServer, target: str) -> None:
    server.clear_log()
    if target == "HOST_SERVER":
        target = server.host_port
    host, port = target.rsplit(":", 1)
    family = "AF_INET6" if host.startswith("[") else "AF_INET"
    script = (
        f"import socket; s = socket.socket(socket.{family}); s.settimeout(3); "
        f"s.connect(({host.strip('[]')!r}, {port}))"
    )
    out, code = run(sb, f"python3 -c \"{script}\"")
    assert code != 0
    assert any(e in out for e in ("ConnectionRefusedError", "Network is unreachable", "Cannot assign requested address",
                                 "No route to host")), out
    assert server.count() == 0


def test_agent_cannot_write_work_or_the_socket_dir(sb: Sandbox) -> None:
    run(sb, "fetch koala")
    before = {p.name: p.read_bytes() for p in sb.workspace.iterdir()}
    for cmd in ("touch /work/forged.txt", "echo forged > /work/$(ls /work | head -1)", "rm -f /work/*.txt",
                "mv /work/koala-*.txt /tmp/", "touch /run/fte/x", "rm -f /run/fte/gw.sock"):
        _, code = run(sb, cmd)
        assert code != 0, cmd
    assert {p.name: p.read_bytes() for p in sb.workspace.iterdir()} == before
    out, code = run(sb, "list_fetched")
    assert code == 0 and "koala" in out


def test_no_api_key_in_the_container(sb: Sandbox) -> None:
    assert all(os.environ.get(k) == v for k, v in SECRETS.items())  # the host process holds the keys
    out, code = run(sb, "env; cat /proc/self/environ | tr '\\0' '\\n'")
    assert code == 0
    for name, value in SECRETS.items():
        assert name not in out and value not in out
    out, _ = run(sb, "grep -rs 'secret' /proc/1/environ /run/fte /work; echo done")
    assert out.strip().endswith("done") and "secret-" not in out


def test_the_socket_serves_only_this_question(provider_case: ProviderCase, server: LoopbackServer,
                                             corpus: LocalCorpus) -> None:
    with Sandbox(_config(provider_case, server), world=RunWorld(corpus, corpus)) as a, \
         Sandbox(_config(provider_case, server), world=RunWorld(corpus, corpus)) as b:
        out, code = run(a, "fetch koala")
        assert code == 0
        a_file = out.split()[0]
        assert run(b, "list_fetched")[0].strip() == "(no documents fetched yet)"
        out, code = run(b, f"cat {a_file}")
        assert code != 0 and "No such file" in out
        # B sees only its own socket (and its own shell's command FIFOs); A's host directories do not exist in B
        seen = set(run(b, "python3 -c 'import os; print(*os.listdir(\"/run/fte\"))'")[0].split())
        assert "gw.sock" in seen and seen == {p.name for p in b.gateway_dir.iterdir()}
        assert not seen & {p.name for p in a.gateway_dir.iterdir() if p.name != "gw.sock"}
        out, code = run(b, f"ls {a.gateway_dir} {a.workspace}")
        assert code != 0
        # B's socket reaches B's workspace only, whatever B asks for
        out, code = run(b, "fetch eucalyptus >/dev/null && list_fetched")
        assert "eucalyptus" in out and "koala" not in out
        assert sorted(p.name.split("-")[0] for p in a.workspace.iterdir()) == ["koala"]


def test_helpers_in_the_container(sb: Sandbox) -> None:
    for name in ("fetch", "search", "list_fetched"):
        out, code = run(sb, f"{name} --help")
        assert code == 0 and out.startswith(f"usage: {name}"), out
    out, code = run(sb, "FTE_GATEWAY=/tmp/none.sock search koala")
    assert code == 2 and "gateway is not reachable" in out and out.strip().count("\n") == 0
    out, code = run(sb, "fetch ftp://example.com/file")
    assert code == 1 and out.strip().startswith("fetch: ")


def test_web_search_key_stays_on_the_host(provider_case: ProviderCase, server: LoopbackServer,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from fte_shell.config import SearchConfig
    from fte_shell.search import make_search
    from tests.servers import FakeSerper

    fake = FakeSerper()
    try:
        monkeypatch.setenv("SERPER_API_KEY", SECRETS["SERPER_API_KEY"])
        search = make_search(SearchConfig(serper_url=fake.url))
        assert search is not None
        with Sandbox(_config(provider_case, server), world=RunWorld(search)) as box:
            out, code = run(box, "search beer hunter -n 2; env")
        assert code == 0
        assert out.startswith('2 results for "beer hunter":\n[1] First\n    https://a.example/1')
        assert SECRETS["SERPER_API_KEY"] not in out and "SERPER_API_KEY" not in out
        assert fake.requests[0]["headers"]["X-API-KEY"] == SECRETS["SERPER_API_KEY"]
        assert fake.requests[0]["body"] == {"q": "beer hunter", "num": 2}
    finally:
        fake.close()
