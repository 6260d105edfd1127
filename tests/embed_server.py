"""A loopback OpenAI-compatible embeddings endpoint for tests and perf (no model, no internet).

``FakeEmbeddings`` answers ``POST /v1/embeddings {model, input}`` with :func:`hash_vector` of every input:
vectors a test computes itself. ``queue`` holds statuses to answer first (503, 429 …), ``dim`` can be changed
between requests (a model of another size), ``drop_last`` answers one vector fewer than asked; every request
body is logged in ``requests``.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

_WORD = re.compile(r"\w+")


def hash_vector(text: str, dim: int) -> list[float]:
    """A bag-of-words vector: each lower-cased word adds 1 at a position given by its sha256 (the text's
    length adds a small constant everywhere, so no vector is zero). Not normalised."""
    v = np.full(dim, 0.01, dtype=np.float64)
    for word in _WORD.findall(text.lower()):
        v[int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "big") % dim] += 1.0
    return v.tolist()


def seeded_vector(text: str, dim: int) -> list[float]:
    """A cheap vector for large corpora (perf): Gaussian numbers seeded by the text's crc32."""
    import zlib

    return np.random.default_rng(zlib.crc32(text.encode())).standard_normal(dim).tolist()


class FakeEmbeddings:
    """The loopback endpoint; ``base_url`` is what ``[search.embeddings] base_url`` takes."""

    def __init__(self, dim: int = 16, vector=hash_vector) -> None:  # noqa: ANN001
        self.dim = dim
        self.vector = vector
        self.requests: list[dict[str, Any]] = []
        self.queue: list[int] = []
        self.drop_last = False
        self.busy_s = 0.0
        """Seconds the server spent answering (parsing, computing vectors, writing JSON), summed."""
        self.keep_log = True
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: object) -> None:
                return

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                t0 = time.perf_counter()
                body = json.loads(raw or b"null")
                with owner._lock:
                    if owner.keep_log:
                        owner.requests.append({"path": self.path, "headers": dict(self.headers.items()), "body": body})
                    status = owner.queue.pop(0) if owner.queue else 200
                    dim, drop = owner.dim, owner.drop_last
                if self.path != "/v1/embeddings":
                    status = 404
                if status != 200:
                    out = json.dumps({"error": {"message": f"status {status}"}}).encode()
                else:
                    inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
                    data = [{"object": "embedding", "index": i, "embedding": owner.vector(t, dim)}
                            for i, t in enumerate(inputs)]
                    data.reverse()  # the client must order by "index", not by position
                    if drop:
                        data = data[1:]
                    out = json.dumps({"object": "list", "data": data, "model": body.get("model")}).encode()
                with owner._lock:
                    owner.busy_s += time.perf_counter() - t0
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> FakeEmbeddings:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
