"""Review R2: FetchService against a hostile web server that speaks raw bytes on 127.0.0.1 (lying
Content-Length, endless chunks, encoding chains, huge headers, redirects to other schemes, loops, titles
with control characters). Every answer must be one clear line (or a clean file), nothing may be written
on a refusal, and no fetch may outlive ``timeout_s``. No internet, no mocks."""

from __future__ import annotations

import gzip
import socket
import threading
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Self

import pytest

from fte_shell.config import FetchPolicy
from fte_shell.errors import FetchRefused
from fte_shell.fetch import FetchService
from fte_shell.workspace import Workspace

Reply = Callable[[socket.socket, bytes, "RawServer"], None]


class RawServer:
    """Accepts connections on 127.0.0.1 and answers each request with ``replies[path]`` (raw bytes or a
    function writing to the socket). Logs request paths; stops every connection on close."""

    def __init__(self) -> None:
        self.replies: dict[str, bytes | Reply] = {}
        self.paths: list[str] = []
        self.stopping = threading.Event()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.port = self._sock.getsockname()[1]
        self._conns: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)

    @property
    def host_port(self) -> str:
        return f"127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self._sock.close()
        for c in list(self._conns):
            try:
                c.close()
            except OSError:
                pass
        self._thread.join(timeout=5)

    def _accept(self) -> None:
        while not self.stopping.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                buf = b""
                while b"\r\n\r\n" not in buf:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                path = buf.split(b" ", 2)[1].decode("latin-1")
                self.paths.append(path)
                reply = self.replies.get(path, b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                if callable(reply):
                    reply(conn, buf, self)
                else:
                    conn.sendall(reply)
                    conn.shutdown(socket.SHUT_WR)
                    while conn.recv(65536):  # until the client hangs up
                        pass
            except OSError:
                return


def ok(body: bytes, ctype: str = "text/plain; charset=utf-8", extra: str = "") -> bytes:
    head = f"HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n{extra}Connection: close\r\n\r\n"
    return head.encode("latin-1") + body


def redirect(location: str, status: int = 302) -> bytes:
    # one request per connection here: say so, or the client may reuse the connection for the next hop
    return f"HTTP/1.1 {status} Found\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode(
        "latin-1"
    )


@pytest.fixture(scope="module")
def raw() -> Iterator[RawServer]:
    with RawServer() as s:
        yield s


def _service(tmp_path: Path, raw: RawServer, **policy: Any) -> FetchService:
    policy.setdefault("allow_private", [raw.host_port])
    policy.setdefault("timeout_s", 5.0)
    return FetchService(Workspace(tmp_path / "ws"), FetchPolicy(**policy))


def _refused(svc: FetchService, url: str, *fragments: str) -> str:
    with pytest.raises(FetchRefused) as e:
        svc.fetch(url)
    msg = str(e.value)
    assert "\n" not in msg and "\r" not in msg, msg
    assert len(msg) < 600, msg[:300]
    for f in fragments:
        assert f in msg, msg
    assert list(svc.workspace.root.iterdir()) == []  # nothing written
    return msg


# --- redirects ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("location", "reason"),
    [
        ("file:///etc/passwd", "scheme file:"),
        ("gopher://127.0.0.1:70/_GET", "scheme gopher:"),
        ("ftp://example.com/x", "scheme ftp:"),
        ("http://169.254.169.254/latest/meta-data/", "cloud metadata"),
        ("http://[::1]:1/", "loopback"),
        ("//10.0.0.1/x", "10.0.0.1 is a private address"),  # scheme-relative
        ("http://0/", "unspecified"),
    ],
)
def test_redirects_to_other_schemes_and_private_addresses(
    tmp_path: Path, raw: RawServer, location: str, reason: str
) -> None:
    path = f"/to-{abs(hash(location))}"
    raw.replies[path] = redirect(location)
    _refused(_service(tmp_path, raw), raw.url(path), reason)


def test_redirect_loop_and_relative_location(tmp_path: Path, raw: RawServer) -> None:
    raw.replies["/loop"] = redirect("/loop")
    _refused(_service(tmp_path, raw, max_redirects=3), raw.url("/loop"), "too many redirects (more than 3)")
    raw.replies["/dir/start"] = redirect("../final?x=1", 301)
    raw.replies["/final?x=1"] = ok(b"arrived\n")
    rec = _service(tmp_path, raw).fetch(raw.url("/dir/start"))
    assert rec.new and rec.source == raw.url("/dir/start") and rec.chars == len("arrived\n")


def test_redirect_with_an_enormous_location_is_one_short_line(tmp_path: Path, raw: RawServer) -> None:
    raw.replies["/longloc"] = redirect("/" + "a" * 12_000)
    raw.replies["/" + "a" * 12_000] = b"HTTP/1.1 500 Oops\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    msg = _refused(_service(tmp_path, raw), raw.url("/longloc"), "HTTP 500")
    assert "…" in msg


# --- lying or endless bodies --------------------------------------------------------------------------
def test_content_length_lies(tmp_path: Path, raw: RawServer) -> None:
    raw.replies["/short"] = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\nonly ten.."
    _refused(_service(tmp_path, raw), raw.url("/short"), "protocol error")
    raw.replies["/long"] = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 4\r\n\r\nfour and more"
    rec = _service(tmp_path, raw).fetch(raw.url("/long"))
    assert rec.chars == len("four\n")  # the declared length is what is read
    raw.replies["/neg"] = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: -5\r\n\r\nx"
    _refused(_service(tmp_path / "2", raw), raw.url("/neg"), "protocol error")
    raw.replies["/two"] = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\nContent-Length: 9\r\n\r\nabc"
    )
    _refused(_service(tmp_path / "3", raw), raw.url("/two"), "protocol error")


def test_chunked_body_without_end_is_cut_at_the_deadline(tmp_path: Path, raw: RawServer) -> None:
    def endless(conn: socket.socket, _req: bytes, srv: RawServer) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n")
        while not srv.stopping.wait(0.05):
            conn.sendall(b"5\r\nhello\r\n")

    raw.replies["/endless"] = endless
    _refused(_service(tmp_path, raw, timeout_s=1.0), raw.url("/endless"), "timed out after 1 s")


def test_bad_chunk_framing_is_a_protocol_error(tmp_path: Path, raw: RawServer) -> None:
    raw.replies["/badchunk"] = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n"
    )
    _refused(_service(tmp_path, raw), raw.url("/badchunk"), "protocol error")


def test_endless_informational_responses_end_at_the_deadline(tmp_path: Path, raw: RawServer) -> None:
    def forever_100(conn: socket.socket, _req: bytes, srv: RawServer) -> None:
        while not srv.stopping.wait(0.05):
            conn.sendall(b"HTTP/1.1 102 Processing\r\n\r\n")

    raw.replies["/processing"] = forever_100
    _refused(_service(tmp_path, raw, timeout_s=1.0), raw.url("/processing"), "timed out")


# --- headers ------------------------------------------------------------------------------------------
def test_huge_or_endless_headers_are_refused(tmp_path: Path, raw: RawServer) -> None:
    raw.replies["/bighdr"] = b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 2_000_000 + b"\r\nContent-Length: 2\r\n\r\nhi"
    _refused(_service(tmp_path, raw), raw.url("/bighdr"), "protocol error")

    def many(conn: socket.socket, _req: bytes, srv: RawServer) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\n")
        i = 0
        while not srv.stopping.is_set() and i < 1_000_000:
            conn.sendall(b"X-H%d: v\r\n" % i)
            i += 1

    raw.replies["/manyhdr"] = many
    _refused(_service(tmp_path, raw), raw.url("/manyhdr"), "protocol error")
    raw.replies["/garbage"] = b"SSH-2.0-OpenSSH_9.2\r\n\r\n"
    _refused(_service(tmp_path, raw), raw.url("/garbage"), "protocol error")


# --- encodings ----------------------------------------------------------------------------------------
def test_content_encoding_chains_are_refused_by_name(tmp_path: Path, raw: RawServer) -> None:
    body = zlib.compress(gzip.compress(b"nested"))
    raw.replies["/chain"] = ok(body, extra="Content-Encoding: gzip, br, deflate\r\n")
    _refused(_service(tmp_path, raw), raw.url("/chain"), "unsupported content encoding", "gzip, br, deflate")
    raw.replies["/br"] = ok(b"\x0b\x02\x80hello\x03", extra="Content-Encoding: br\r\n")
    _refused(_service(tmp_path, raw), raw.url("/br"), "unsupported content encoding 'br'")
    raw.replies["/corrupt"] = ok(b"\x1f\x8b\x08\x00garbage-not-gzip", extra="Content-Encoding: gzip\r\n")
    _refused(_service(tmp_path, raw), raw.url("/corrupt"), "corrupt gzip body")


def test_gzip_inside_gzip_is_not_unpacked_twice(tmp_path: Path, raw: RawServer) -> None:
    """Only the declared layer is decoded; a second gzip layer is binary data, refused by its type
    (a bomb hidden one layer deeper cannot be inflated)."""
    inner = gzip.compress(b"\0" * 50_000_000)
    raw.replies["/double"] = ok(gzip.compress(inner), ctype="application/octet-stream",
                                extra="Content-Encoding: gzip\r\n")
    _refused(_service(tmp_path, raw), raw.url("/double"), "unsupported content type")


# --- what lands in the file ---------------------------------------------------------------------------
def test_hostile_title_cannot_break_the_header_or_record(tmp_path: Path, raw: RawServer) -> None:
    html = (
        "<html><head><title>Line one\r\nURL: https://forged.example/\u2028Retrieved: never\x1b[2J\x07"
        "\u202eevil</title></head><body><main><p>Real body text.</p></main></body></html>"
    ).encode()
    raw.replies["/title"] = ok(html, ctype="text/html; charset=utf-8")
    svc = _service(tmp_path, raw)
    rec = svc.fetch(raw.url("/title"))
    line = rec.line()
    assert "\n" not in line and line.isprintable()
    content = (svc.workspace.root / rec.path.removeprefix("/work/")).read_text(encoding="utf-8")
    head = content.splitlines()[:4]
    assert head == content.split("\n")[:4]
    assert head[0] == f"URL: {raw.url('/title')}" and head[2].startswith("Retrieved: 20") and head[3] == ""
    assert head[1] == "Title: Line one URL: https://forged.example/ Retrieved: never[2Jevil"
    assert "Real body text." in content


def test_enormous_url_is_refused_in_one_short_line(tmp_path: Path, raw: RawServer) -> None:
    svc = _service(tmp_path, raw)
    _refused(svc, raw.url("/" + "a" * 1_000_000), "URL too long")
    assert raw.paths.count("/" + "a" * 1_000_000) == 0


# --- amplification ------------------------------------------------------------------------------------
def test_a_page_cannot_convert_to_a_text_beyond_max_bytes(tmp_path: Path, raw: RawServer) -> None:
    """Nested lists indent every line: ~60 KB of HTML converts to ~1.3 MB of text. The text is capped at
    ``max_bytes`` characters like the download (refused in one line, nothing written)."""
    html = ("<html><body>" + "<ul><li>a" * 60 + "<li>x</li>" * 6000 + "</body></html>").encode()
    raw.replies["/amplify"] = ok(html, ctype="text/html; charset=utf-8")
    _refused(_service(tmp_path, raw, max_bytes=200_000), raw.url("/amplify"), "converted text too large",
             "at most 200,000")
    rec = _service(tmp_path / "big", raw, max_bytes=10_000_000).fetch(raw.url("/amplify"))
    assert rec.new and rec.chars > 200_000


def test_deeply_nested_json_is_kept_compact_instead_of_exploding(tmp_path: Path, raw: RawServer) -> None:
    """Pretty-printing indents by depth: 40 KB of JSON 500 levels deep would become ~20 MB. It is stored
    as sent instead (still greppable); shallow JSON is still pretty-printed one value per line."""
    deep = ("[" * 500 + ",".join(["1"] * 20_000) + "]" * 500).encode()
    raw.replies["/deep.json"] = ok(deep, ctype="application/json")
    svc = _service(tmp_path, raw, max_bytes=1_000_000)
    rec = svc.fetch(raw.url("/deep.json"))
    assert rec.chars == len(deep) + 1  # + the final newline
    raw.replies["/flat.json"] = ok(b'{"a": [1, 2], "b": "text"}', ctype="application/json")
    flat = svc.workspace.body(svc.fetch(raw.url("/flat.json")).path)
    assert flat == '{\n "a": [\n  1,\n  2\n ],\n "b": "text"\n}\n'


def test_refused_references_leave_nothing_behind_in_memory(tmp_path: Path, raw: RawServer) -> None:
    """Review R2: each distinct reference used to leave a lock in the service for the question's life (an
    agent looping over a million refused URLs grew the host's memory); one fetch of a key still makes one
    download when fetched concurrently (tests/test_fetch.py)."""
    svc = _service(tmp_path, raw)
    for i in range(200):
        with pytest.raises(FetchRefused):
            svc.fetch(f"http://10.0.0.1/{i}")
    raw.replies["/kept"] = ok(b"kept\n")
    svc.fetch(raw.url("/kept"))
    assert len(svc._key_locks) == 0


@pytest.mark.parametrize("charset", ["zlib", "base64", "rot13", "unicode_escape", "undefined", "punycode", "utf-7"])
def test_a_python_codec_named_as_charset_is_ignored(tmp_path: Path, raw: RawServer, charset: str) -> None:
    """Review R2: ``charset=undefined``/``zlib``/``punycode`` made a page unfetchable and
    ``charset=unicode_escape`` rewrote its text (``\\x41`` → ``A``); such labels are now ignored like an
    unknown one (the body is read as UTF-8)."""
    body = "Caf\u00e9 \\x41 \\u0042 +AGEAYgBj-".encode()
    raw.replies[f"/cs-{charset}"] = ok(body, ctype=f"text/plain; charset={charset}")
    svc = _service(tmp_path, raw)
    rec = svc.fetch(raw.url(f"/cs-{charset}"))
    assert svc.workspace.body(rec.path) == body.decode() + "\n"
