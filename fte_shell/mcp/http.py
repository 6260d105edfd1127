"""The HTTP door: every request needs ``Authorization: Bearer <token>`` (else 401, nothing touched) and,
when it carries an ``Origin``, one of this server's own origins (else 403: a web page the user visits
cannot drive the server through DNS rebinding). An ASGI wrapper around the SDK's Streamable HTTP app."""

from __future__ import annotations

import hmac
import json
import secrets
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .config import LOOPBACK

Scope = dict[str, Any]


def load_token(token_file: Path | None) -> tuple[str, bool]:
    """The bearer token: read from ``token_file`` (stripped; never empty), else a fresh random one.
    Returns ``(token, generated)``."""
    if token_file is None:
        return secrets.token_urlsafe(32), True
    try:
        token = Path(token_file).read_text(encoding="utf-8").strip()
    except OSError as e:
        raise ConfigError(f"cannot read the token file {token_file}: {e.strerror or e}") from None
    if not token or any(c.isspace() for c in token):
        raise ConfigError(f"the token file {token_file} must hold one token (no spaces), and it is empty or has spaces")
    return token, False


def allowed_origins(host: str, port: int) -> set[str]:
    """Origins a request may come from: the loopback names and the bound host, at the bound port."""
    names = {*LOOPBACK, host} - {"::1"}
    out = {f"{scheme}://{n}:{port}" for n in names for scheme in ("http", "https")}
    return out | {f"{scheme}://[::1]:{port}" for scheme in ("http", "https")}


class Door:
    """ASGI middleware: the Origin check, then the bearer token, then ``app``."""

    def __init__(self, app: Any, token: str, origins: set[str]):
        self.app, self.origins = app, origins
        self._want = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":  # the app's own start and stop
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":  # a WebSocket: nothing here speaks it
            await send({"type": "websocket.close", "code": 1008})
            return
        headers = dict(scope.get("headers") or [])
        origin = headers.get(b"origin")
        if origin is not None and origin.decode("latin-1") not in self.origins:
            await _refuse(send, 403, "forbidden origin", {})
            return
        given = headers.get(b"authorization", b"")
        if not hmac.compare_digest(given, self._want):
            await _refuse(send, 401, "a valid bearer token is required", {b"www-authenticate": b'Bearer realm="fte-shell"'})
            return
        await self.app(scope, receive, send)


async def _refuse(send: Any, status: int, message: str, extra: dict[bytes, bytes]) -> None:
    body = json.dumps({"error": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *extra.items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
