"""A reusable loopback HTTP server for tests (no internet, no mocks).

``LoopbackServer`` listens on 127.0.0.1 on an ephemeral port in a background thread, serves a directory
and/or registered routes, and logs every request so tests can assert on what reached it::

    with LoopbackServer(directory=pydocs_dir) as srv:
        srv.route("/big", body=lambda: (b"x" * 65536 for _ in range(16384)), length=1 << 30)
        srv.redirect("/hop", "http://10.0.0.1/")
        srv.route("/hang", hang=True)
        ...
        assert srv.count("/library/re.html") == 1

A route answers with a status, headers and a body: ``bytes``/``str``, or a zero-argument callable returning
an iterable of byte chunks (streamed; chunked transfer encoding unless ``length`` gives a Content-Length).
``delay_s`` waits before answering; ``hang=True`` never answers (until the server stops). Routes are
matched on the full path with query first, then on the path alone; unmatched paths fall back to the
directory (if any), else 404. ``host_port`` is the ``127.0.0.1:PORT`` string to put in
``FetchPolicy.allow_private``. ``tls=(certfile, keyfile)`` serves HTTPS (see :func:`self_signed_cert`).
"""

from __future__ import annotations

import datetime
import json
import mimetypes
import ssl
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self
from urllib.parse import unquote, urlsplit

Body = bytes | str | Callable[[], Iterable[bytes]]


@dataclass
class Route:
    """What one path answers."""

    status: int = 200
    body: Body = b""
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str | None = "text/html; charset=utf-8"
    length: int | None = None
    delay_s: float = 0.0
    hang: bool = False


@dataclass
class LoggedRequest:
    """One request as the server saw it."""

    method: str
    path: str
    headers: dict[str, str]
    time: float
    bytes_sent: int = 0
    """Body bytes the server managed to write before the response ended or the client went away."""
    completed: bool = False
    """True when the whole body was written."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    owner: LoopbackServer

    def handle_error(self, request: object, client_address: object) -> None:
        return  # failed TLS handshakes and dropped clients are expected in tests


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: object) -> None:
        return

    def do_HEAD(self) -> None:
        self._serve(head=True)

    def do_GET(self) -> None:
        self._serve(head=False)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self._serve(head=False)

    def _serve(self, *, head: bool) -> None:
        owner = self.server.owner
        entry = LoggedRequest(self.command, self.path, {k: v for k, v in self.headers.items()}, time.time())
        owner._log(entry)
        route = owner._find(self.path)
        if route is None:
            route = owner._file_route(self.path)
        if route.hang:
            owner._stopping.wait()
            self.close_connection = True
            return
        if route.delay_s and owner._stopping.wait(route.delay_s):
            self.close_connection = True
            return
        body = route.body
        self.send_response(route.status)
        if route.content_type is not None and not any(k.lower() == "content-type" for k in route.headers):
            self.send_header("Content-Type", route.content_type)
        for k, v in route.headers.items():
            self.send_header(k, v)
        try:
            if callable(body):
                self._stream(body, route.length, head, entry)
            else:
                data = body.encode() if isinstance(body, str) else body
                self.send_header("Content-Length", str(len(data) if route.length is None else route.length))
                self.end_headers()
                if not head:
                    self.wfile.write(data)
                    entry.bytes_sent = len(data)
                entry.completed = True
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, OSError):
            self.close_connection = True

    def _stream(
        self, body: Callable[[], Iterable[bytes]], length: int | None, head: bool, e: LoggedRequest
    ) -> None:
        chunked = length is None
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(length))
        self.end_headers()
        if head:
            e.completed = True
            return
        for chunk in body():
            if self.server.owner._stopping.is_set():
                self.close_connection = True
                return
            if not chunk:
                continue
            if chunked:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            else:
                self.wfile.write(chunk)
            e.bytes_sent += len(chunk)
        if chunked:
            self.wfile.write(b"0\r\n\r\n")
        e.completed = True


class LoopbackServer:
    """Threaded HTTP server on 127.0.0.1 with routes, a directory and a request log."""

    def __init__(
        self,
        directory: Path | str | None = None,
        routes: dict[str, Route] | None = None,
        *,
        tls: tuple[Path, Path] | None = None,
    ):
        self.directory = Path(directory) if directory is not None else None
        self.tls = tls
        self._routes: dict[str, Route] = dict(routes or {})
        self._requests: list[LoggedRequest] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle -------------------------------------------------------------------------------------
    def start(self) -> LoopbackServer:
        httpd = _Server(("127.0.0.1", 0), _Handler)
        httpd.owner = self
        if self.tls is not None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(str(self.tls[0]), str(self.tls[1]))
            httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, name="loopback-http", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- addresses -------------------------------------------------------------------------------------
    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("server not started")
        return int(self._httpd.server_address[1])

    @property
    def host_port(self) -> str:
        """``127.0.0.1:PORT``, the entry for ``FetchPolicy.allow_private``."""
        return f"127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def url(self, path: str = "/") -> str:
        return self.base_url + (path if path.startswith("/") else "/" + path)

    # --- routes ----------------------------------------------------------------------------------------
    def route(
        self,
        path: str,
        *,
        status: int = 200,
        body: Body = b"",
        headers: dict[str, str] | None = None,
        content_type: str | None = "text/html; charset=utf-8",
        length: int | None = None,
        delay_s: float = 0.0,
        hang: bool = False,
    ) -> str:
        """Register (or replace) a route; returns its full URL."""
        r = Route(status, body, dict(headers or {}), content_type, length, delay_s, hang)
        with self._lock:
            self._routes[path] = r
        return self.url(path)

    def redirect(self, path: str, location: str, status: int = 302) -> str:
        """Register a redirect from ``path`` to ``location``; returns the URL of ``path``."""
        return self.route(path, status=status, headers={"Location": location}, content_type=None)

    def _find(self, raw_path: str) -> Route | None:
        with self._lock:
            if raw_path in self._routes:
                return self._routes[raw_path]
            return self._routes.get(urlsplit(raw_path).path)

    def _file_route(self, raw_path: str) -> Route:
        if self.directory is None:
            return Route(404, b"not found", content_type="text/plain")
        rel = unquote(urlsplit(raw_path).path).lstrip("/")
        root = self.directory.resolve()
        target = (root / rel).resolve()
        if target != root and root not in target.parents:
            return Route(403, b"forbidden", content_type="text/plain")
        if target.is_dir():
            target = target / "index.html"
        if not target.is_file():
            return Route(404, b"not found", content_type="text/plain")
        ctype, enc = mimetypes.guess_type(target.name)
        ctype = ctype or "application/octet-stream"
        if ctype.startswith("text/") or ctype in ("application/javascript", "application/json"):
            ctype += "; charset=utf-8"
        headers = {"Content-Encoding": enc} if enc else {}
        return Route(200, target.read_bytes(), headers, ctype)

    # --- request log -----------------------------------------------------------------------------------
    def _log(self, entry: LoggedRequest) -> None:
        with self._lock:
            self._requests.append(entry)

    @property
    def requests(self) -> list[LoggedRequest]:
        """A snapshot of every request received so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    def count(self, path: str | None = None) -> int:
        """Requests received for ``path`` (full path with query, or path alone); None = all."""
        reqs = self.requests
        if path is None:
            return len(reqs)
        return sum(1 for r in reqs if r.path == path or urlsplit(r.path).path == path)

    def clear_log(self) -> None:
        with self._lock:
            self._requests.clear()


def self_signed_cert(directory: Path, host: str = "localhost") -> tuple[Path, Path]:
    """Write a self-signed certificate for ``host`` (and 127.0.0.1) and its key; returns (cert, key)."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=7))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName(host), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = Path(directory) / "cert.pem", Path(directory) / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_path, key_path


class FakeSerper:
    """A loopback server in Serper's API shape: POST /search answers from a queue of (status, body[,
    headers]) or, when the queue is empty, with ``organic`` (a default list when not given); logs every
    request (headers and parsed JSON body)."""

    def __init__(self, organic: list[dict[str, Any]] | None = None) -> None:
        self.requests: list[dict[str, Any]] = []
        self.queue: list[tuple[int, bytes] | tuple[int, bytes, dict[str, str]]] = []
        self.organic: list[dict[str, Any]] = organic if organic is not None else [
            {"title": "Second", "link": "https://b.example/2", "snippet": "two", "position": 2},
            {"title": "First", "link": "https://a.example/1", "snippet": "one", "date": "Mar 3, 2024",
             "position": 1},
            {"title": "No link", "snippet": "skipped", "position": 3},
            {"title": "Third", "link": "https://c.example/3", "snippet": "three", "position": 4},
        ]
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: object) -> None:
                return

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with owner._lock:
                    owner.requests.append(
                        {"path": self.path, "headers": dict(self.headers.items()), "body": json.loads(raw or b"null")}
                    )
                    status, body, *extra = owner.queue.pop(0) if owner.queue else (200, b"")
                if status == 200 and not body:
                    body = json.dumps({"searchParameters": {}, "organic": owner.organic}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for k, v in (extra[0] if extra else {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/search"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def run_key(body: dict[str, Any]) -> tuple[str, str] | None:
    """(question, profile) of a run's FIRST request (no assistant message yet), else None."""
    msgs = body.get("messages") or []
    if any(m.get("role") == "assistant" for m in msgs):
        return None
    question = next((m.get("content") for m in msgs if m.get("role") == "user"), "")
    tools = {t["function"]["name"] for t in body.get("tools") or []}
    profile = "shell" if "bash" in tools else "fte" if "grep" in tools else "snippet-only"
    return str(question), profile
