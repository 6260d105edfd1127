"""A Search-R1 retrieval endpoint over a local corpus: ``POST /retrieve {queries, topk, return_scores}``.

The protocol of Search-R1's ``search_r1/search/retrieval_server.py``, which the RL recipes of the field call
(Search-R1's own rollout, verl's ``search_r1_like`` tool, SkyRL's search environment, slime's local search and
verifiers' ``vf_search_r1``):

* request: ``{"queries": [str, ...], "topk": int | null, "return_scores": bool}`` (``topk`` null or 0: the
  server's default; ``return_scores`` false when left out);
* response: ``{"result": [per query: [doc, ...]]}``, or with ``return_scores``
  ``{"result": [[{"document": doc, "score": float}, ...], ...]}``, best first;
* a document: ``{"id", "contents", "title", "text"}`` where ``contents`` is ``"Title"\\ntext`` (the title in
  double quotes on the first line, as in Search-R1's wiki-18 corpus): clients read ``document["contents"]``
  and split its first line off as the title.

A bad request is answered with an HTTP error and a JSON ``{"detail": "..."}`` (422 for a body that is not
that request, as the FastAPI server answers; 404/405/413 for a wrong path, method or size); a retriever that
fails (an embeddings endpoint that is down) is a 503, which those clients retry. The server never dies of
a request. It is a stdlib ``ThreadingHTTPServer``; loopback unless told otherwise.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from ..errors import FteError

if TYPE_CHECKING:  # pragma: no cover
    from .corpus import CorpusDoc
    from .retrievers.base import Retriever

DEFAULT_TOPK = 3
"""``topk`` when a request gives none (Search-R1's server default, ``--topk 3``)."""
MAX_TOPK = 1000
MAX_QUERIES = 4096
MAX_BODY = 16 << 20

Lookup = Callable[[str], "CorpusDoc | None"]
"""A docid -> its document (``LocalCorpus.get``)."""


class BadRequest(Exception):
    """A request the endpoint answers with ``status`` and ``detail``."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


def document(doc: CorpusDoc) -> dict[str, str]:
    """A corpus document as Search-R1's corpora hold one (``id``, ``contents`` = ``"Title"\\ntext``) plus its
    ``title`` and ``text`` as Search-R1's BM25 server answers them."""
    return {"id": doc.docid, "contents": f'"{doc.title}"\n{doc.text}', "title": doc.title, "text": doc.text}


def parse_request(body: object, default_topk: int = DEFAULT_TOPK) -> tuple[list[str], int, bool]:
    """``(queries, topk, return_scores)`` of a ``/retrieve`` body; :class:`BadRequest` (422) naming the field."""
    if not isinstance(body, dict):
        raise BadRequest(422, "the body must be a JSON object {queries, topk, return_scores}")
    unknown = set(body) - {"queries", "topk", "return_scores"}
    queries = body.get("queries")
    if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
        raise BadRequest(422, "'queries' must be a list of strings" + (f" (unknown fields: {sorted(unknown)})" if unknown else ""))
    if len(queries) > MAX_QUERIES:
        raise BadRequest(413, f"{len(queries)} queries in one request; at most {MAX_QUERIES}")
    topk = body.get("topk")
    if topk is None or topk == 0:
        topk = default_topk
    if isinstance(topk, bool) or not isinstance(topk, int) or not 0 < topk <= MAX_TOPK:
        raise BadRequest(422, f"'topk' must be an integer from 1 to {MAX_TOPK} (or null for {default_topk})")
    scores = body.get("return_scores", False)
    if not isinstance(scores, bool):
        raise BadRequest(422, "'return_scores' must be true or false")
    return queries, topk, scores


def retrieve(retriever: Retriever, lookup: Lookup, body: object, default_topk: int = DEFAULT_TOPK) -> dict[str, Any]:
    """The ``/retrieve`` answer to ``body`` (see the module docstring)."""
    queries, topk, with_scores = parse_request(body, default_topk)
    result: list[list[Any]] = []
    for hits in retriever.search_many(queries, topk) if queries else []:
        row: list[Any] = []
        for hit in hits:
            doc = lookup(hit.docid)
            if doc is None:  # an index of another corpus
                raise BadRequest(500, f"the index names docid {hit.docid!r}, which the corpus does not hold: rebuild it")
            row.append({"document": document(doc), "score": hit.score} if with_scores else document(doc))
        result.append(row)
    return {"result": result}


class R1Server:
    """The endpoint: ``start()`` serves in a background thread (tests), ``serve_forever()`` in this one."""

    def __init__(self, retriever: Retriever, lookup: Lookup, *, host: str = "127.0.0.1", port: int = 8000,
                 default_topk: int = DEFAULT_TOPK, docs: int | None = None) -> None:
        self.retriever = retriever
        self.lookup = lookup
        self.default_topk = default_topk
        self.docs = docs
        self.httpd = ThreadingHTTPServer((host, port), _handler(self))
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """``http://HOST:PORT/retrieve``."""
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/retrieve"

    def start(self) -> R1Server:
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self.httpd.serve_forever(poll_interval=0.5)

    def close(self) -> None:
        """Stop serving (the retriever stays open: its owner closes it)."""
        if self._thread is not None:
            self.httpd.shutdown()
            self._thread.join()
        self.httpd.server_close()


def _handler(server: R1Server) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body leave at once: no 40 ms delayed-ACK stall
        server_version = "fte-shell-r1"

        def log_message(self, format: str, *args: object) -> None:
            return

        def _send(self, status: int, payload: object) -> None:
            data = json.dumps(payload, ensure_ascii=False).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path.split("?")[0] in ("/", "/health"):
                self._send(200, {"status": "ok", "retriever": server.retriever.name, "docs": server.docs})
            elif self.path.split("?")[0] == "/retrieve":
                self._send(405, {"detail": "Method Not Allowed: POST /retrieve {queries, topk, return_scores}"})
            else:
                self._send(404, {"detail": "Not Found: POST /retrieve"})

        def do_POST(self) -> None:
            try:
                self._send(200, self._answer())
            except BadRequest as e:
                self.close_connection = e.status in (400, 411, 413)
                self._send(e.status, {"detail": e.detail})
            except FteError as e:  # the retriever cannot answer now (an embeddings endpoint is down)
                self._send(503, {"detail": str(e)})
            except Exception as e:  # noqa: BLE001 - a request never takes the server down
                self._send(500, {"detail": f"internal error: {type(e).__name__}: {e}"})

        def _answer(self) -> dict[str, Any]:
            if self.path.split("?")[0] != "/retrieve":
                raise BadRequest(404, "Not Found: POST /retrieve")
            length = self.headers.get("Content-Length")
            if length is None or not length.isdigit():
                raise BadRequest(411, "a Content-Length header is required")
            if int(length) > MAX_BODY:
                raise BadRequest(413, f"the body is {int(length):,} bytes; at most {MAX_BODY:,}")
            raw = self.rfile.read(int(length))
            try:
                body = json.loads(raw)
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                raise BadRequest(422, f"the body is not JSON: {e}") from None
            return retrieve(server.retriever, server.lookup, body, server.default_topk)

    return Handler
