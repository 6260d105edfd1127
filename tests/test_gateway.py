"""The host gateway and the in-container helpers, on the host: the real helper scripts (sandbox/bin) talk
to a real Gateway over its unix socket, backed by the real FetchService, Workspace and a local corpus; pages
come from a loopback HTTP server whose request log is checked."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from fte_shell.config import FetchPolicy
from fte_shell.errors import FteError
from fte_shell.fetch import FetchService
from fte_shell.sandbox import gateway as gw_mod
from fte_shell.sandbox import gateway_wire
from fte_shell.sandbox.gateway import Gateway
from fte_shell.search import LocalCorpus, format_results
from fte_shell.search.corpus import CorpusDoc, build_corpus
from fte_shell.workspace import Workspace
from tests.servers import LoopbackServer

BIN = Path(__file__).resolve().parent.parent / "sandbox" / "bin"
PAGE = "Gateway test page.\nThe quick brown fox jumps over the lazy dog.\n"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> LocalCorpus:
    docs = [
        CorpusDoc(docid="koala", title="Koala", text="The koala is an arboreal marsupial native to Australia.",
                  url="https://en.wikipedia.org/wiki/Koala"),
        CorpusDoc(docid="eucalyptus", title="Eucalyptus", text="Koalas eat eucalyptus leaves."),
    ]
    return LocalCorpus(build_corpus(docs, tmp_path_factory.mktemp("corpus") / "idx"))


@pytest.fixture(scope="module")
def _server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:
        srv.route("/page.txt", body=PAGE, content_type="text/plain; charset=utf-8")
        yield srv


@pytest.fixture
def server(_server: LoopbackServer) -> LoopbackServer:
    _server.clear_log()
    return _server


class Setup:
    def __init__(self, root: Path, server: LoopbackServer, corpus: LocalCorpus | None, search: bool = True):
        self.ws = Workspace(root / "work")
        self.fetch = FetchService(self.ws, FetchPolicy(allow_private=[server.host_port]), local=corpus)
        self.gw = Gateway(root / "run" / "gw.sock", self.fetch, corpus if search else None, self.ws).start()
        self.env = {"PATH": os.environ.get("PATH", ""), "FTE_GATEWAY": str(self.gw.socket_path)}

    def helper(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, str(BIN / args[0]), *args[1:]], check=False, env=self.env,
                              capture_output=True, text=True, timeout=60)

    def close(self) -> None:
        self.gw.close()
        self.fetch.close()


@pytest.fixture
def setup(tmp_path: Path, server: LoopbackServer, corpus: LocalCorpus) -> Iterator[Setup]:
    s = Setup(tmp_path, server, corpus)
    yield s
    s.close()


def raw_request(path: Path, payload: bytes) -> dict:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(30)
        s.connect(str(path))
        s.sendall(payload)
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    assert buf.count(b"\n") == 1, buf  # exactly one JSON line
    return json.loads(buf)


def test_socket_is_world_connectable(setup: Setup) -> None:
    st = setup.gw.socket_path.stat()
    assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o666
    assert raw_request(setup.gw.socket_path, b'{"op": "ping"}\n') == {"ok": True, "text": "pong"}


def test_fetch_helper_records_and_idempotence(setup: Setup, server: LoopbackServer) -> None:
    url = server.url("/page.txt")
    r = setup.helper("fetch", url)
    assert r.returncode == 0, r.stderr
    expected = setup.ws.lookup(url, "url")
    assert expected is not None
    line = r.stdout.strip()
    assert line == expected.model_copy(update={"new": True}).line()
    assert "  new  " in line and line.startswith("/work/127-0-0-1-")
    again = setup.helper("fetch", url)
    assert again.returncode == 0 and again.stdout.strip() == expected.line() and "  held  " in again.stdout
    assert server.count("/page.txt") == 1  # the second fetch made no request
    body = (setup.ws.root / line.split()[0].rsplit("/", 1)[1]).read_text()
    assert body.startswith(f"URL: {url}\n") and "quick brown fox" in body


def test_fetch_helper_mixed_refusal(setup: Setup, server: LoopbackServer) -> None:
    r = setup.helper("fetch", "file:///etc/passwd", server.url("/page.txt"), "http://169.254.169.254/latest/")
    assert r.returncode == 1
    assert len(r.stdout.splitlines()) == 1 and "  new  " in r.stdout
    errors = r.stderr.splitlines()
    assert len(errors) == 2
    assert errors[0].startswith("fetch: ") and "file:///etc/passwd" in errors[0]
    assert "169.254.169.254" in errors[1]
    assert [e.name for e in setup.ws.root.iterdir()] == [r.stdout.split()[0].rsplit("/", 1)[1]]


def test_fetch_docid_and_corpus_url_make_no_http(setup: Setup, server: LoopbackServer) -> None:
    r = setup.helper("fetch", "eucalyptus", "https://en.wikipedia.org/wiki/Koala")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("/work/eucalyptus-") and "  new  eucalyptus  " in lines[0]
    assert lines[1].startswith("/work/koala-") and "  new  koala  " in lines[1]
    assert server.count() == 0
    bad = setup.helper("fetch", "no-such-doc")
    assert bad.returncode == 1 and "no-such-doc" in bad.stderr and bad.stderr.count("\n") == 1


def test_search_and_list_helpers(setup: Setup, corpus: LocalCorpus) -> None:
    r = setup.helper("search", "koala", "leaves", "-n", "2")
    assert r.returncode == 0
    assert r.stdout.rstrip("\n") == format_results("koala leaves", corpus.search("koala leaves", 2))
    assert setup.helper("list_fetched").stdout.strip() == "(no documents fetched yet)"
    setup.helper("fetch", "koala")
    listing = setup.helper("list_fetched")
    assert listing.returncode == 0 and listing.stdout.rstrip("\n") == setup.ws.listing_text()
    assert "koala" in listing.stdout
    usage = setup.helper("search", "q", "-n", "99")
    assert usage.returncode == 2 and "-n must be from 1 to 50" in usage.stderr


def test_helpers_have_help(setup: Setup) -> None:
    for name in ("fetch", "search", "list_fetched"):
        r = setup.helper(name, "--help")
        assert r.returncode == 0 and r.stdout.startswith(f"usage: {name}")
        assert os.access(BIN / name, os.X_OK)


def test_search_unavailable_is_one_line(tmp_path: Path, server: LoopbackServer) -> None:
    s = Setup(tmp_path, server, None, search=False)
    try:
        r = s.helper("search", "anything")
        assert r.returncode == 1
        assert r.stderr == "search: search is not available in this run (no search backend is configured)\n"
    finally:
        s.close()


def test_unreachable_gateway_exits_2(tmp_path: Path) -> None:
    for name in ("fetch", "search", "list_fetched"):
        args = {"fetch": ["https://example.com/"], "search": ["q"], "list_fetched": []}[name]
        r = subprocess.run([sys.executable, str(BIN / name), *args], check=False, capture_output=True, text=True,
                           env={"FTE_GATEWAY": str(tmp_path / "none.sock")}, timeout=30)
        assert r.returncode == 2 and r.stdout == ""
        assert r.stderr.count("\n") == 1 and "gateway is not reachable" in r.stderr


def test_bad_requests_get_one_line_and_server_survives(setup: Setup) -> None:
    path = setup.gw.socket_path
    assert raw_request(path, b"not json\n") == {"ok": False, "error": "bad request: not a JSON object line"}
    assert raw_request(path, b"\xff\xfe\n")["ok"] is False
    assert "unknown op 'rm'" in raw_request(path, b'{"op": "rm"}\n')["error"]
    assert "unknown op" in raw_request(path, b"[1, 2]\n")["error"]
    big = json.dumps({"op": "search", "query": "x" * 200_000}).encode() + b"\n"
    assert "request too large" in raw_request(path, big)["error"]
    assert "at most 20" in raw_request(path, json.dumps({"op": "fetch", "urls": ["a"] * 21}).encode() + b"\n")["error"]
    assert raw_request(path, b'{"op": "fetch", "urls": []}\n')["ok"] is False
    assert raw_request(path, b'{"op": "search", "query": "koala", "n": 0}\n')["ok"] is False
    assert raw_request(path, b'{"op": "search", "query": "koala", "n": true}\n')["ok"] is False
    assert raw_request(path, b'{"op": "search", "query": "   "}\n')["ok"] is False
    # the largest well-formed fetch fits (a private address: refused by policy, no network involved)
    most = {"op": "fetch", "urls": ["http://10.0.0.1/" + "a" * (gw_mod.MAX_REF_CHARS - 16)] * gw_mod.MAX_URLS}
    answer = raw_request(path, json.dumps(most).encode() + b"\n")
    assert answer["ok"] and len(answer["results"]) == gw_mod.MAX_URLS
    assert all(not r["ok"] and "10.0.0.1" in r["error"] for r in answer["results"])
    long_ref = raw_request(path, json.dumps({"op": "fetch", "urls": ["https://x.org/" + "a" * 5000]}).encode() + b"\n")
    assert long_ref["ok"] and "too long" in long_ref["results"][0]["error"]
    # a client that connects and goes away without a word
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(str(path))
    assert raw_request(path, b'{"op": "ping"}\n')["ok"] is True
    assert [e.op for e in setup.gw.events()].count("invalid") >= 4


def test_silent_client_times_out(setup: Setup, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gateway_wire, "REQUEST_TIMEOUT_S", 0.3)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(str(setup.gw.socket_path))
        s.sendall(b'{"op": "pi')  # never finishes the line
        answer = json.loads(s.recv(65536))
    assert answer == {"ok": False, "error": "request not received within 0.3 s"}
    assert raw_request(setup.gw.socket_path, b'{"op": "ping"}\n')["ok"] is True


def test_concurrency_is_bounded(setup: Setup, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gateway_wire, "REQUEST_TIMEOUT_S", 20.0)
    held = []
    try:
        for _ in range(gw_mod.MAX_CONCURRENT):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(str(setup.gw.socket_path))
            held.append(s)
        busy = None
        for _ in range(200):  # the held connections' handler threads take their slots asynchronously
            answer = raw_request(setup.gw.socket_path, b'{"op": "ping"}\n')
            if not answer["ok"]:
                busy = answer
                break
        assert busy is not None and "gateway busy" in busy["error"]
    finally:
        for s in held:
            s.close()
    for _ in range(200):
        if raw_request(setup.gw.socket_path, b'{"op": "ping"}\n')["ok"]:
            break
    else:
        pytest.fail("the gateway did not recover after the held connections closed")


def test_concurrent_fetches_of_one_url_download_once(setup: Setup, server: LoopbackServer) -> None:
    url = server.url("/page.txt")
    out: list[dict] = []

    def go() -> None:
        out.append(raw_request(setup.gw.socket_path, json.dumps({"op": "fetch", "urls": [url, url]}).encode() + b"\n"))

    threads = [threading.Thread(target=go) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    results = [r for o in out for r in o["results"]]
    assert len(results) == 12 and all(r["ok"] for r in results)
    assert sum(r["new"] for r in results) == 1
    assert server.count("/page.txt") == 1
    assert len(list(setup.ws.root.glob("*.txt"))) == 1


def test_one_gateway_one_workspace(tmp_path: Path, server: LoopbackServer, corpus: LocalCorpus) -> None:
    a = Setup(tmp_path / "a", server, corpus)
    b = Setup(tmp_path / "b", server, corpus)
    try:
        assert a.helper("fetch", "koala").returncode == 0
        assert "koala" in a.helper("list_fetched").stdout
        assert b.helper("list_fetched").stdout.strip() == "(no documents fetched yet)"
        assert list((tmp_path / "b" / "work").iterdir()) == []
    finally:
        a.close()
        b.close()


def test_events_and_lifecycle(tmp_path: Path, server: LoopbackServer, corpus: LocalCorpus) -> None:
    s = Setup(tmp_path, server, corpus)
    try:
        s.helper("search", "koala")
        s.helper("fetch", "koala", "file:///x")
        events = s.gw.drain_events()
        assert [e.op for e in events] == ["search", "fetch"]
        assert events[0].args == {"query": "koala", "n": 10} and events[0].results[0]["url"]
        assert events[1].args == {"urls": ["koala", "file:///x"]}
        assert [r["ok"] for r in events[1].results] == [True, False]
        assert s.gw.drain_events() == []
    finally:
        s.close()
    assert not s.gw.socket_path.exists()
    s.gw.close()  # idempotent
    # a stale socket file is replaced; any other file is refused
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(tmp_path / "stale.sock"))
    stale.close()
    with Gateway(tmp_path / "stale.sock", s.fetch, corpus, s.ws) as g:
        assert raw_request(g.socket_path, b'{"op": "ping"}\n')["ok"]
    (tmp_path / "file.sock").write_text("x")
    with pytest.raises(FteError, match="exists and is not a socket"):
        Gateway(tmp_path / "file.sock", s.fetch, corpus, s.ws).start()
    assert (tmp_path / "file.sock").read_text() == "x"


def test_line_server_stops_without_polling(tmp_path: Path) -> None:
    """stop() ends run() through its wake-up pipe, even a stop that came before run() began (a close right
    after start); the server keeps no thread that wakes on a timer, and its pipe is closed with it."""
    served: list[bytes] = []
    srv = gateway_wire.LineServer(str(tmp_path / "w.sock"), lambda conn: served.append(conn.recv(16)))
    try:
        srv.stop()
        srv.run()  # returns at once: the byte stop() wrote is waiting
        t = threading.Thread(target=srv.run)
        t.start()
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:  # still serving between stops
            c.connect(str(tmp_path / "w.sock"))
            c.sendall(b"hi\n")
        srv.stop()
        t.join(timeout=30)
        assert not t.is_alive()
    finally:
        srv.server_close()
    wake = (srv._wake_r, srv._wake_w)
    for fd in wake:
        with pytest.raises(OSError):
            os.fstat(fd)


def test_page_budget_is_one_line_per_url(tmp_path: Path, server: LoopbackServer) -> None:
    ws = Workspace(tmp_path / "work")
    svc = FetchService(ws, FetchPolicy(allow_private=[server.host_port], max_fetches=1))
    two = server.route("/two.txt", body="second page", content_type="text/plain")
    with Gateway(tmp_path / "gw.sock", svc, None, ws) as g:
        first = raw_request(g.socket_path, json.dumps({"op": "fetch", "urls": [server.url("/page.txt")]}).encode() + b"\n")
        second = raw_request(g.socket_path, json.dumps({"op": "fetch", "urls": [two]}).encode() + b"\n")
    svc.close()
    assert first["results"][0]["ok"]
    refused = second["results"][0]
    assert not refused["ok"] and "budget" in refused["error"].lower() and "\n" not in refused["error"]
    assert server.count("/two.txt") == 0


def test_search_backend_failure_is_one_line(tmp_path: Path, server: LoopbackServer) -> None:
    import socket as _s

    probe = _s.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    from fte_shell.search.serper import SerperSearch

    ws = Workspace(tmp_path / "work")
    svc = FetchService(ws, FetchPolicy())
    backend = SerperSearch("k", url=f"http://127.0.0.1:{port}/search", max_retries=0)
    with Gateway(tmp_path / "gw.sock", svc, backend, ws) as g:
        answer = raw_request(g.socket_path, b'{"op": "search", "query": "koala"}\n')
        assert answer["ok"] is False
        assert answer["error"].startswith("search unavailable: Serper is unreachable at http://127.0.0.1:")
        assert raw_request(g.socket_path, b'{"op": "ping"}\n')["ok"]
    svc.close()
    backend.close()


def test_search_default_n_follows_the_backend(tmp_path: Path, server: LoopbackServer, corpus: LocalCorpus) -> None:
    from fte_shell.search import CachedSearch

    ws = Workspace(tmp_path / "work")
    svc = FetchService(ws, FetchPolicy())
    with Gateway(tmp_path / "gw.sock", svc, CachedSearch(corpus, default_n=1), ws) as g:
        env = {"FTE_GATEWAY": str(g.socket_path)}
        one = subprocess.run([sys.executable, str(BIN / "search"), "koala", "eucalyptus"], check=False, env=env,
                             capture_output=True, text=True, timeout=60)
        two = subprocess.run([sys.executable, str(BIN / "search"), "koala", "eucalyptus", "-n", "2"], check=False, env=env,
                             capture_output=True, text=True, timeout=60)
        assert g.drain_events()[0].args == {"query": "koala eucalyptus", "n": 1}
    svc.close()
    assert one.stdout.startswith('1 result for "koala eucalyptus":')
    assert two.stdout.startswith('2 results for "koala eucalyptus":')


def test_helper_output_into_a_closed_pipe_is_quiet(setup: Setup) -> None:
    from datetime import UTC, datetime

    from fte_shell.workspace import Document

    for i in range(1500):  # a listing well over a pipe buffer
        setup.ws.store(Document(source=f"doc-{i:04d}", kind="docid", title=f"Document number {i} " + "x" * 40,
                                text="body", retrieved_at=datetime.now(UTC)))
    r = subprocess.run(f"{sys.executable} {BIN / 'list_fetched'} | head -1", shell=True, check=False,
                       env=setup.env, capture_output=True, text=True, timeout=60)
    assert r.stdout.startswith("/work/doc-") and r.stdout.count("\n") == 1
    assert r.stderr == ""


def test_oversized_fetch_request_gets_the_gateways_answer(setup: Setup) -> None:
    urls = [f"https://example.org/{i}/" + "a" * 4000 for i in range(40)]  # ~160 KB > the 128 KiB cap
    r = setup.helper("fetch", *urls)
    assert r.returncode == 1
    assert r.stderr.startswith("fetch: request too large")


def test_hostile_request_lines_get_one_line_each(setup: Setup) -> None:
    """Review R2: request lines that used to kill the handler thread (no answer, a traceback on the host)."""
    path = setup.gw.socket_path
    deep = raw_request(path, b"[" * 100_000 + b"\n")  # the JSON parser's recursion
    assert deep == {"ok": False, "error": "bad request: JSON nested too deeply"}
    huge_int = raw_request(path, b'{"op": "search", "query": "q", "n": ' + b"9" * 5000 + b"}\n")
    assert huge_int == {"ok": False, "error": "bad request: not a JSON object line"}
    surrogate = raw_request(path, b'{"op": "fetch", "urls": ["\\udcff"]}\n')  # could not be encoded back
    assert not surrogate["ok"] and "not valid Unicode" in surrogate["error"]
    assert "not valid Unicode" in raw_request(path, b'{"op": "search", "query": "\\ud800x"}\n')["error"]
    long_op = raw_request(path, json.dumps({"op": "x" * 100_000}).encode() + b"\n")
    assert "unknown op" in long_op["error"] and len(long_op["error"]) < 200  # not echoed whole
    assert raw_request(path, b'{"op": "ping"}\n') == {"ok": True, "text": "pong"}
    assert [e.op for e in setup.gw.events()].count("invalid") == 5


def test_non_utf8_argument_is_one_line_from_the_helper(setup: Setup) -> None:
    r = subprocess.run([sys.executable, str(BIN / "fetch"), b"http://x.org/\xff"], check=False, env=setup.env,
                       capture_output=True, timeout=60)
    assert r.returncode == 1 and r.stdout == b""
    assert r.stderr.count(b"\n") == 1 and b"not valid Unicode" in r.stderr
    assert list(setup.ws.root.iterdir()) == []


def test_event_log_is_bounded(setup: Setup, monkeypatch: pytest.MonkeyPatch) -> None:
    """A client flooding the socket cannot grow the host's memory: old events are dropped and counted."""
    monkeypatch.setattr(gw_mod, "MAX_EVENTS", 5)
    for _ in range(12):
        assert raw_request(setup.gw.socket_path, b'{"op": "ping"}\n')["ok"]
    assert len(setup.gw.events()) == 5 and setup.gw.events_dropped == 7
    assert len(setup.gw.drain_events()) == 5 and setup.gw.events() == []
    monkeypatch.setattr(gw_mod, "MAX_EVENT_CHARS", 30_000)  # big requests are bounded by their size
    for i in range(4):
        urls = [f"http://10.0.0.{i}/" + "a" * 4000] * 3  # refused by policy: no network
        assert raw_request(setup.gw.socket_path, json.dumps({"op": "fetch", "urls": urls}).encode() + b"\n")["ok"]
    kept = setup.gw.events()
    assert [e.args["urls"][0][:16] for e in kept] == ["http://10.0.0.2/", "http://10.0.0.3/"]
    assert setup.gw.events_dropped == 7 + 2


def test_helpers_start_lean(setup: Setup) -> None:
    """Review R2: the helpers run as ``python3 -I -S`` (their shebang) and import neither argparse, json,
    socket nor re (≈25 ms of start-up in the container); they still speak the same protocol."""
    for name in ("fetch", "search", "list_fetched"):
        assert (BIN / name).read_text().startswith("#!/usr/bin/python3 -IS\n")
        r = subprocess.run([sys.executable, "-I", "-S", "-X", "importtime", str(BIN / name), "--help"],
                           check=False, env=setup.env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and r.stdout.startswith(f"usage: {name}")
        imported = {line.rsplit("|", 1)[1].strip() for line in r.stderr.splitlines() if "|" in line}
        assert not imported & {"argparse", "json", "socket", "re", "enum", "gettext"}, imported
    listing = subprocess.run([sys.executable, "-I", "-S", str(BIN / "list_fetched")], check=False,
                             env=setup.env, capture_output=True, text=True, timeout=60)
    assert listing.returncode == 0 and listing.stdout == "(no documents fetched yet)\n"


def test_helper_arguments(setup: Setup, corpus: LocalCorpus) -> None:
    """Option parsing without argparse keeps its behaviour: ``--`` ends options, ``-nN``/``--num=N``,
    usage errors exit 2 with the usage line."""
    r = setup.helper("search", "--num=1", "koala")
    assert r.returncode == 0 and r.stdout.rstrip("\n") == format_results("koala", corpus.search("koala", 1))
    assert setup.helper("search", "-n1", "koala").stdout == r.stdout
    for args, error in [
        (("search",), "the following arguments are required: QUERY"),
        (("search", "q", "-n"), "expected one argument"),
        (("search", "-n", "x", "q"), "invalid int value: 'x'"),
        (("fetch",), "the following arguments are required: URL"),
        (("fetch", "--bogus"), "unrecognized arguments: --bogus"),
        (("list_fetched", "extra"), "unrecognized arguments: extra"),
    ]:
        bad = setup.helper(*args)
        assert bad.returncode == 2 and bad.stdout == "", args
        assert bad.stderr.startswith(f"usage: {args[0]}") and f"\n{args[0]}: error: " in bad.stderr
        assert error in bad.stderr and bad.stderr.count("\n") == 2, bad.stderr
    dash = setup.helper("fetch", "--", "-not-a-doc")
    assert dash.returncode == 1 and "-not-a-doc" in dash.stderr and dash.stderr.count("\n") == 1


def test_connection_flood_keeps_threads_bounded(setup: Setup, monkeypatch: pytest.MonkeyPatch) -> None:
    """Review R2: 100 connections held open at once: 16 hold a slot (and a thread) until they speak or
    time out; every other one is answered "busy" at once and its thread ends, so the gateway's threads stay
    at MAX_CONCURRENT however many clients connect; afterwards it serves normally."""
    import time

    monkeypatch.setattr(gateway_wire, "REQUEST_TIMEOUT_S", 30.0)
    base = threading.active_count()
    held: list[socket.socket] = []
    try:
        for _ in range(100):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(30)
            for _attempt in range(200):  # a full accept queue answers EAGAIN, as the helpers know
                try:
                    s.connect(str(setup.gw.socket_path))
                    break
                except BlockingIOError:
                    time.sleep(0.01)
            held.append(s)
        busy = 0
        for s in held:
            s.setblocking(False)
        for _ in range(500):
            for s in held:
                try:
                    if b"gateway busy" in s.recv(4096):
                        busy += 1
                except (BlockingIOError, OSError):
                    pass
            if busy >= 100 - gw_mod.MAX_CONCURRENT:
                break
            time.sleep(0.01)
        assert busy == 100 - gw_mod.MAX_CONCURRENT
        for _ in range(500):  # the busy handlers' threads end right after answering
            if threading.active_count() <= base + gw_mod.MAX_CONCURRENT:
                break
            time.sleep(0.01)
        assert threading.active_count() <= base + gw_mod.MAX_CONCURRENT
    finally:
        for s in held:
            s.close()
    for _ in range(200):
        if raw_request(setup.gw.socket_path, b'{"op": "ping"}\n')["ok"]:
            break
        time.sleep(0.01)
    else:
        pytest.fail("the gateway did not recover after the flood")


def test_urls_with_line_breaks_are_refused_in_one_line(setup: Setup, server: LoopbackServer) -> None:
    """Review R2: a reference carrying CR/LF/NUL/tab/control characters/U+2028 (header or record injection)
    is refused in ONE line per reference; the helper used to print the raw reference, so a newline in it
    split its error into two lines (the second one forgeable)."""
    page = server.url("/page.txt")
    bad = [page + "\nURL: https://forged.example/", page.replace("/page", "/pa\rge"), page + "\x01",
           page.replace("/page", "/pa\tge"), page + "\u2028x", page + "\x1b[2J"]
    r = setup.helper("fetch", *bad)
    assert r.returncode == 1 and r.stdout == ""
    errors = r.stderr.split("\n")
    assert errors[-1] == "" and len(errors) == len(bad) + 1, errors
    assert all(e.startswith("fetch: refused ") and e.endswith("control characters in the reference") and e.isprintable()
               for e in errors[:-1]), errors
    assert server.count() == 0 and list(setup.ws.root.iterdir()) == []
