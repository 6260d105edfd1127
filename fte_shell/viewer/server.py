"""The local server of ``fte-shell view``: loopback only, GET only, and it serves nothing but the viewer's
own assets, data computed from the viewed directories, and (under ``/files/<root>/<path>``) raw files that
lie under those directories — ``..`` and symlinks that leave them are refused, and so is a request whose
``Host`` is not the server's own loopback address (DNS rebinding)."""

from __future__ import annotations

import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

from .data import Catalog
from .safety import UnsafePath, safe_file
from .site import CSP, NotFound, Site

HOST = "127.0.0.1"


class _Handler(BaseHTTPRequestHandler):
    server: ViewerServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _send(self, status: int, body: bytes, ctype: str, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cache-Control", "no-store")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _error(self, status: HTTPStatus, why: str) -> None:
        self._send(status, f"{status.value} {status.phrase}: {why}\n".encode(), "text/plain; charset=utf-8")

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        port = self.server.server_address[1]
        if self.headers.get("Host", "").lower() not in (f"127.0.0.1:{port}", f"localhost:{port}"):
            # a page elsewhere that rebinds its own name to 127.0.0.1 would send its own Host: refused
            return self._error(HTTPStatus.FORBIDDEN, "unexpected Host header (DNS rebinding?)")
        raw = self.path.split("?", 1)[0].split("#", 1)[0]
        path = unquote(raw)
        if ".." in path.split("/") or "\\" in path or "\x00" in path:
            return self._error(HTTPStatus.FORBIDDEN, "path leaves the viewed directories")
        try:
            if path.startswith("/files/"):
                return self._file(path[len("/files/"):])
            body, ctype = self.server.site.get(path)
        except NotFound:
            return self._error(HTTPStatus.NOT_FOUND, "no such page")
        except UnsafePath as e:
            return self._error(HTTPStatus.FORBIDDEN, str(e))
        except Exception as e:  # noqa: BLE001 - a broken run directory must not kill the server
            return self._error(HTTPStatus.INTERNAL_SERVER_ERROR, f"{type(e).__name__}: {e}")
        self._send(HTTPStatus.OK, body, ctype)

    def _file(self, rest: str) -> None:
        """A raw file under a viewed root, always as inert text (a page's HTML never renders here)."""
        head, _, rel = rest.partition("/")
        roots = self.server.site.catalog.roots
        if not head.isdigit() or not int(head) < len(roots):
            return self._error(HTTPStatus.NOT_FOUND, "no such root")
        target = safe_file(roots[int(head)], rel)
        self._send(HTTPStatus.OK, target.read_bytes(), "text/plain; charset=utf-8",
                   {"Content-Security-Policy": "sandbox; default-src 'none'"})


class ViewerServer(ThreadingHTTPServer):
    """``ViewerServer(catalog, port=0, refresh_s=5.0)``; ``.url``; ``serve_forever()`` or ``start()`` in a
    thread. The index is refreshed from disk at most every ``refresh_s`` seconds."""

    daemon_threads = True

    def __init__(self, catalog: Catalog, port: int = 0, refresh_s: float = 5.0):
        self.site = Site(catalog, refresh_s=refresh_s)
        super().__init__((HOST, port), _Handler)

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.server_address[1]}/"

    def start(self) -> threading.Thread:
        t = threading.Thread(target=self.serve_forever, name="fte-view", daemon=True)
        t.start()
        return t
