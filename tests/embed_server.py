"""A loopback OpenAI-compatible embeddings endpoint for tests and perf (no model, no internet).

``FakeEmbeddings`` answers ``POST /v1/embeddings {model, input}`` with :func:`hash_vector` of every input:
vectors a test computes itself (or :func:`pooled_vector`, for perf). ``queue`` holds statuses to answer first (503, 429 …), ``dim`` can be changed
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
from typing import Any, Self

import numpy as np

_WORD = re.compile(r"\w+")


def hash_vector(text: str, dim: int) -> list[float]:
    """A bag-of-words vector: each lower-cased word adds 1 at a position given by its sha256 (the text's
    length adds a small constant everywhere, so no vector is zero). Not normalised."""
    v = np.full(dim, 0.01, dtype=np.float64)
    for word in _WORD.findall(text.lower()):
        v[int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "big") % dim] += 1.0
    return v.tolist()


_POOL: dict[int, list[str]] = {}


def pooled_vector(text: str, dim: int) -> str:
    """A cheap vector for large corpora (perf), already as JSON: one of 1,024 Gaussian vectors, chosen by the
    text's crc32 (the endpoint's own cost stays small next to the client's)."""
    import zlib

    pool = _POOL.get(dim)
    if pool is None:
        rng = np.random.default_rng(dim)
        pool = _POOL[dim] = [json.dumps(rng.standard_normal(dim).astype(np.float32).tolist()) for _ in range(1024)]
    return pool[zlib.crc32(text.encode()) % len(pool)]


class FakeEmbeddings:
    """The loopback endpoint; ``base_url`` is what ``[search.embeddings] base_url`` takes."""

    def __init__(self, dim: int = 16, vector=hash_vector) -> None:
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
            disable_nagle_algorithm = True  # headers and body leave at once: no 40 ms delayed-ACK stall

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
                    data = []
                    for i, t in enumerate(inputs):
                        v = owner.vector(t, dim)
                        vec = v if isinstance(v, str) else json.dumps(v)
                        data.append(f'{{"object": "embedding", "index": {i}, "embedding": {vec}}}')
                    data.reverse()  # the client must order by "index", not by position
                    if drop:
                        data = data[1:]
                    rows = ", ".join(data)
                    out = f'{{"object": "list", "data": [{rows}], "model": {json.dumps(body.get("model"))}}}'.encode()
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

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
