"""A scripted OpenAI-compatible server on loopback, for tests and the demo.

``ScriptedServer(script)`` answers ``POST /v1/chat/completions`` with the script's turns in order (as
server-sent events when the request asks ``stream: true``);
``ScriptedServer(policy=fn)`` asks ``fn(request_json)`` for each turn (a policy sees the whole
conversation). A turn is plain text, or a :class:`ScriptTurn` (text and/or tool calls, or an injected
failure: an HTTP status such as 500 or 429 with ``Retry-After``, a delay before answering). Every request
received is kept in ``.requests``. The real ``openai`` client talks to it::

    with ScriptedServer(["<answer>42</answer>"]) as srv:
        ModelConfig(base_url=srv.base_url, model="scripted")

Token counts are deterministic: ``prompt_tokens = ceil(len(json(messages)) / 4)``,
``completion_tokens = ceil(len(json(message)) / 4)``, ``total = prompt + completion``.
"""

from __future__ import annotations

import json
import math
import socket
import threading
import time
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field


class ScriptToolCall(BaseModel):
    """One tool call the scripted assistant makes."""

    model_config = ConfigDict(extra="forbid")

    name: str
    """Tool (function) name."""

    arguments: dict[str, Any] | str = Field(default_factory=dict)
    """Arguments: a dict (sent as JSON) or a raw string sent as is (e.g. malformed JSON, for tests)."""

    id: str | None = None
    """Tool-call id; None = ``call_<request number>_<index>`` (``""`` is sent as is, like some servers do)."""


class ScriptTurn(BaseModel):
    """One scripted response: an assistant message, or an injected failure."""

    model_config = ConfigDict(extra="forbid")

    content: str | None = None
    """Assistant text."""

    tool_calls: list[ScriptToolCall] = Field(default_factory=list)
    """Tool calls, in order."""

    raw_tool_calls: list[Any] | None = None
    """Tool calls sent verbatim instead of :attr:`tool_calls`, to mimic servers that bend the OpenAI shape
    (a null id, an object or a number as ``arguments``)."""

    status: int = 200
    """HTTP status; anything but 200 sends an OpenAI-style error body instead of a message."""

    retry_after: float | None = None
    """``Retry-After`` header (seconds) sent with a non-200 status."""

    delay_s: float = 0.0
    """Sleep this long before responding (to test timeouts, budgets and interruptions)."""

    error: str = "injected failure"
    """Error message of a non-200 response."""

    finish_reason: str | None = None
    """Finish reason; None = ``tool_calls`` when there are tool calls, else ``stop``."""


TurnLike = ScriptTurn | str | dict[str, Any]
Policy = Callable[[dict[str, Any]], TurnLike]


def as_turn(turn: TurnLike) -> ScriptTurn:
    """Normalize a script entry: a str is the assistant's text; a dict is validated as :class:`ScriptTurn`."""
    if isinstance(turn, ScriptTurn):
        return turn
    if isinstance(turn, str):
        return ScriptTurn(content=turn)
    return ScriptTurn.model_validate(turn)


def tokens_for(obj: Any) -> int:
    """Deterministic token count: a quarter of the JSON length, rounded up (at least 1)."""
    return max(1, math.ceil(len(json.dumps(obj, ensure_ascii=False, sort_keys=True)) / 4))


class ScriptedServer:
    """Threaded HTTP server on 127.0.0.1 (ephemeral port) speaking the chat-completions API."""

    def __init__(
        self,
        script: Sequence[TurnLike] | None = None,
        *,
        policy: Policy | None = None,
        model: str = "scripted",
        host: str = "127.0.0.1",
        port: int = 0,
    ):
        if (script is None) == (policy is None):
            raise ValueError("ScriptedServer needs exactly one of a script or a policy")
        self._script = [as_turn(t) for t in script] if script is not None else None
        self._policy = policy
        self.model = model
        self.requests: list[dict[str, Any]] = []
        """Every chat-completions request body received, in order (failed ones included)."""
        self.responses: list[dict[str, Any]] = []
        """Every successful response body sent, in order."""
        self.unavailable: int | None = None
        """Set to an HTTP status (e.g. 503) to answer every request, ``GET /v1/models`` included, with it:
        an outage of the endpoint (requests are not recorded). None: serve normally."""
        self.refused = 0
        """Requests answered with :attr:`unavailable` so far."""
        self._lock = threading.Lock()
        self._conns: set[Any] = set()
        self._httpd = _HTTPServer((host, port), self)
        self._thread: threading.Thread | None = None

    # --- lifecycle ------------------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``: give it to the client as its base URL."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> Self:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="scripted-server", daemon=True
            )
            self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving, like a server process that ends: the port is closed and so are the connections
        clients keep alive."""
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._httpd.server_close()
        with self._lock:
            conns, self._conns = list(self._conns), set()
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- turns ----------------------------------------------------------------------------------------
    def _next_turn(self, body: dict[str, Any]) -> tuple[int, ScriptTurn | None, str | None]:
        """Record the request and pick its turn: (request number, turn or None, error text)."""
        with self._lock:
            self.requests.append(body)
            n = len(self.requests)
            if self._script is not None:
                if not self._script:
                    return n, None, f"scripted server: script exhausted after {n - 1} requests"
                return n, self._script.pop(0), None
        assert self._policy is not None
        try:
            return n, as_turn(self._policy(body)), None
        except Exception as e:  # noqa: BLE001 - a policy bug is reported to the client, not swallowed
            return n, None, f"scripted policy failed: {e.__class__.__name__}: {e}"

    def _response(self, n: int, body: dict[str, Any], turn: ScriptTurn) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": turn.content}
        if turn.raw_tool_calls is not None:
            message["tool_calls"] = turn.raw_tool_calls
        elif turn.tool_calls:
            message["tool_calls"] = [
                {
                    "id": tc.id if tc.id is not None else f"call_{n}_{i}",
                    "type": "function",
                    "function": {
                        "name": tc.name,
                        "arguments": tc.arguments
                        if isinstance(tc.arguments, str)
                        else json.dumps(tc.arguments, ensure_ascii=False),
                    },
                }
                for i, tc in enumerate(turn.tool_calls)
            ]
        prompt = tokens_for(body.get("messages", []))
        completion = tokens_for(message)
        return {
            "id": f"chatcmpl-scripted-{n}",
            "object": "chat.completion",
            "created": 1_700_000_000 + n,
            "model": body.get("model") or self.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": turn.finish_reason or ("tool_calls" if message.get("tool_calls") else "stop"),
                }
            ],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
        }


class _HTTPServer(ThreadingHTTPServer):
    """The listening socket of a :class:`ScriptedServer`; its handlers answer for :attr:`scripted`."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], scripted: ScriptedServer):
        self.scripted = scripted
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    """One client connection: ``GET /v1/models`` and ``POST /v1/chat/completions``, answered from the
    scripted server's turns; every other route is a 404."""

    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    @property
    def scripted(self) -> ScriptedServer:
        return self.server.scripted

    # --- connection bookkeeping (so close() can cut kept-alive connections) ----------------------------
    def setup(self) -> None:
        super().setup()
        with self.scripted._lock:
            self.scripted._conns.add(self.connection)

    def finish(self) -> None:
        with self.scripted._lock:
            self.scripted._conns.discard(self.connection)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        return

    # --- routes ---------------------------------------------------------------------------------------
    def do_GET(self) -> None:
        if self._outage():
            return
        if self.path.rstrip("/") == "/v1/models":
            model = {"id": self.scripted.model, "object": "model", "owned_by": "fte-shell"}
            self._send(200, {"object": "list", "data": [model]})
        else:
            self._error(404, f"no route GET {self.path}")

    def do_POST(self) -> None:
        body = self._chat_request()
        if body is not None:
            self._answer(body)

    # --- steps of a chat completion -------------------------------------------------------------------
    def _chat_request(self) -> dict[str, Any] | None:
        """Read the request; its JSON body when it is a chat completion the server serves, else None
        (the outage, 404 or 400 is already sent)."""
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self._outage():
            return None
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._error(404, f"no route POST {self.path}")
            return None
        try:
            return json.loads(raw or b"{}")
        except json.JSONDecodeError as e:
            self._error(400, f"request body is not JSON: {e}")
            return None

    def _answer(self, body: dict[str, Any]) -> None:
        """Answer with the next turn: after its delay, its injected failure or its message (streamed
        when the request asks ``stream: true``)."""
        n, turn, err = self.scripted._next_turn(body)
        if turn is None:
            self._error(400, err or "no turn")
            return
        if turn.delay_s > 0:
            time.sleep(turn.delay_s)
        if turn.status != 200:
            headers = {"Retry-After": f"{turn.retry_after:g}"} if turn.retry_after is not None else None
            self._error(turn.status, turn.error, headers)
            return
        payload = self.scripted._response(n, body, turn)
        with self.scripted._lock:
            self.scripted.responses.append(payload)
        try:
            if body.get("stream"):
                self._send_stream(payload, bool((body.get("stream_options") or {}).get("include_usage")))
            else:
                self._send(200, payload)
        except (BrokenPipeError, ConnectionResetError):  # client gave up (timeout)
            return

    # --- sending --------------------------------------------------------------------------------------
    def _outage(self) -> bool:
        """Answer with the server's :attr:`ScriptedServer.unavailable` status if set; True when it did."""
        status = self.scripted.unavailable
        if status is None:
            return False
        with self.scripted._lock:
            self.scripted.refused += 1
        self._error(status, "scripted outage: the endpoint is unavailable")
        return True

    def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        self._send(status, {"error": {"message": message, "type": "scripted_error", "code": status}}, headers)

    def _send_stream(self, payload: dict[str, Any], usage: bool) -> None:
        """The response as server-sent events (``stream: true``): one chunk with the whole message
        (tool calls indexed), one with the finish reason, the usage when asked, then ``[DONE]``."""
        choice = payload["choices"][0]
        delta = dict(choice["message"])
        if delta.get("tool_calls"):
            delta["tool_calls"] = [{"index": i, **tc} for i, tc in enumerate(delta["tool_calls"])]
        head = {k: payload[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
        chunks = [head | {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
                  head | {"choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]}]
        if usage:
            chunks.append(head | {"choices": [], "usage": payload["usage"]})
        data = b"".join(b"data: " + json.dumps(c, ensure_ascii=False).encode() + b"\n\n" for c in chunks)
        data += b"data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _main() -> None:  # pragma: no cover - manual use
    """``python -m fte_shell.standins.server SCRIPT.json``: serve a JSON list of turns until Ctrl-C."""
    import sys

    if len(sys.argv) != 2:
        sys.exit("usage: python -m fte_shell.standins.server SCRIPT.json  (a JSON list of turns)")
    turns = json.loads(Path(sys.argv[1]).read_text())
    with ScriptedServer(turns) as srv:
        print(f"serving {len(turns)} scripted turns at {srv.base_url} (Ctrl-C to stop)", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":  # pragma: no cover
    _main()
