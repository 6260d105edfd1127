"""The local server of ``fte-shell view``: loopback only; it serves nothing but the viewer's own assets,
data computed from the viewed directories, and (under ``/files/<root>/<path>``) raw files that lie under
those directories — ``..`` and symlinks that leave them are refused, and so is a request whose ``Host`` is
not the server's own loopback address (DNS rebinding).

One write exists: ``POST /api/audit`` appends a reviewer's mark of a run (the hand check) to the sweep's
``audit.jsonl``. It needs the per-session token that ``view`` prints (sent in the ``X-FTE-Token`` header,
which no cross-site form can set and no cross-site script may send without a CORS preflight this server
never grants), a JSON body, and an ``Origin`` (when the browser sends one) that is the server's own. The
reviewer's name is the server's (``--reviewer``), never the request's."""

from __future__ import annotations

import hmac
import json
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

from .data import AUDIT_FIELDS, Catalog
from .safety import UnsafePath, safe_file
from .site import CSP, NotFound, Site

HOST = "127.0.0.1"
TOKEN_HEADER = "X-FTE-Token"
MAX_BODY = 16_384


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
        if self.close_connection:
            self.send_header("Connection", "close")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _error(self, status: HTTPStatus, why: str) -> None:
        self._send(status, f"{status.value} {status.phrase}: {why}\n".encode(), "text/plain; charset=utf-8")

    def do_HEAD(self) -> None:
        self.do_GET()

    def _own_host(self) -> bool:
        port = self.server.server_address[1]
        # a page elsewhere that rebinds its own name to 127.0.0.1 would send its own Host: refused
        return self.headers.get("Host", "").lower() in (f"127.0.0.1:{port}", f"localhost:{port}")

    def do_GET(self) -> None:
        if not self._own_host():
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

    def do_POST(self) -> None:
        # refusals do not read the body: the connection must not be reused, or its bytes would be parsed
        # as the next request
        self.close_connection = True
        port = self.server.server_address[1]
        if not self._own_host():
            return self._error(HTTPStatus.FORBIDDEN, "unexpected Host header (DNS rebinding?)")
        if self.path.split("?", 1)[0] != "/api/audit":
            return self._error(HTTPStatus.NOT_FOUND, "no such page")
        origin = self.headers.get("Origin")
        if origin is not None and origin.lower() not in (f"http://127.0.0.1:{port}", f"http://localhost:{port}"):
            return self._error(HTTPStatus.FORBIDDEN, "cross-origin request refused")
        if self.headers.get("Sec-Fetch-Site", "same-origin") not in ("same-origin", "none"):
            return self._error(HTTPStatus.FORBIDDEN, "cross-site request refused")
        token = self.server.token
        given = self.headers.get(TOKEN_HEADER, "")
        if token is None:
            return self._error(HTTPStatus.FORBIDDEN, "this viewer is read-only (no session token)")
        if not hmac.compare_digest(given.encode(), token.encode()):
            return self._error(HTTPStatus.FORBIDDEN, "missing or wrong session token")
        if (self.headers.get("Content-Type") or "").split(";")[0].strip().lower() != "application/json":
            return self._error(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, "a JSON body is expected")
        try:
            length = int(self.headers.get("Content-Length") or "0")
        except ValueError:
            length = -1
        if not 0 < length <= MAX_BODY:
            return self._error(HTTPStatus.BAD_REQUEST, f"a body of 1 to {MAX_BODY} bytes is expected")
        try:
            body = json.loads(self.rfile.read(length))
            if not isinstance(body, dict) or set(body) - AUDIT_FIELDS:
                raise ValueError(f"expected an object with the fields {sorted(AUDIT_FIELDS)}")
            mark = self.server.site.mark(body.get("key"), body.get("mark"), body.get("note"), self.server.reviewer)
        except (ValueError, TypeError) as e:
            return self._error(HTTPStatus.BAD_REQUEST, str(e))
        except OSError as e:
            return self._error(HTTPStatus.INTERNAL_SERVER_ERROR, f"cannot write the mark: {e}")
        self._send(HTTPStatus.OK, json.dumps({"ok": True, "mark": mark}).encode(), "application/json")

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
    """``ViewerServer(catalog, port=0, refresh_s=5.0, token=None, reviewer="")``; ``.url``;
    ``serve_forever()`` or ``start()`` in a thread. The index is refreshed from disk at most every
    ``refresh_s`` seconds. With a ``token``, reviewers holding it may mark runs (as ``reviewer``);
    without one the viewer is read-only."""

    daemon_threads = True

    def __init__(self, catalog: Catalog, port: int = 0, refresh_s: float = 5.0, token: str | None = None,
                 reviewer: str = ""):
        self.site = Site(catalog, refresh_s=refresh_s)
        self.token = token
        self.reviewer = reviewer
        super().__init__((HOST, port), _Handler)

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.server_address[1]}/"

    @property
    def review_url(self) -> str:
        """The URL to open to mark runs: :attr:`url` with the session token (the page keeps it for the tab)."""
        return self.url + (f"?token={self.token}" if self.token else "")

    def start(self) -> threading.Thread:
        t = threading.Thread(target=self.serve_forever, name="fte-view", daemon=True)
        t.start()
        return t
