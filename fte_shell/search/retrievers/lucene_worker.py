"""The JVM of the ``bm25`` retriever, kept out of the caller's process.

fte-shell is embedded in trainers, MCP hosts and notebooks: a JVM started inside them would stay for the
life of the process, install its own signal handlers and could not be stopped. So :class:`LuceneWorker`
starts a child Python process (``python -m fte_shell.search.retrievers.lucene_worker JAR INDEX``) that
starts the JVM through JPype with ``-Xrs`` (the JVM leaves signals alone), opens Anserini's
``io.anserini.search.SimpleSearcher`` on the index (BM25 k1 0.9, b 0.4, Lucene's English analyzer, field
``contents``: Anserini's defaults) and answers requests read from its stdin, one JSON line each:

    request  {"q": ["query", …], "k": 5}
    answer   {"hits": [[["docid", score], …], …]}    or    {"error": "message", "query"?: true}

(``query``: the query is at fault — more distinct terms than Lucene's clause limit — raised as
:class:`~fte_shell.errors.ToolError`, which the model sees; any other error is
:class:`~fte_shell.errors.SearchUnavailable`.)

The child runs in its own session (a Ctrl-C meant for the caller does not reach it) and exits when its
stdin closes: on :meth:`LuceneWorker.close`, when the caller exits, and when the caller is killed (the
kernel closes the pipe), so no process is left behind. A parent-death signal is not used: it fires when the
*thread* that started the child ends, which in a thread pool is long before the caller does.
The JVM's own output (log4j, warnings) goes to a log file in a temporary directory, never to the caller.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO, Any

from ...errors import SearchUnavailable, ToolError

SEARCH_THREADS = max(1, min(4, os.cpu_count() or 1))
"""Threads of one ``search_many`` call inside the JVM (Anserini's ``batch_search``)."""


class LuceneWorker:
    """A child process serving one Lucene index. Thread-safe (one request at a time)."""

    def __init__(self, jar: Path, index_dir: Path, java_home: Path) -> None:
        self._lock = threading.Lock()
        self._tmp = tempfile.TemporaryDirectory(prefix="fte-lucene-")
        self.log_path = Path(self._tmp.name) / "jvm.log"
        package_root = str(Path(__file__).resolve().parents[3])  # this fte_shell, whatever sys.path says
        path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH", "")) if p)
        env = {**os.environ, "JAVA_HOME": str(java_home), "PYTHONPATH": path}
        with self.log_path.open("wb") as log:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "fte_shell.search.retrievers.lucene_worker", str(jar), str(index_dir)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env, start_new_session=True,
                close_fds=True,
            )
        self._in: IO[bytes] = self._proc.stdin  # type: ignore[assignment]
        self._out: IO[bytes] = self._proc.stdout  # type: ignore[assignment]
        ready = self._read(f"the Lucene worker did not start (index {index_dir})")
        if "error" in ready:
            self.close()
            raise SearchUnavailable(f"the Lucene index {index_dir} cannot be opened: {ready['error']}")

    def _read(self, what: str) -> dict[str, Any]:
        line = self._out.readline()
        if not line:
            tail = self._log_tail()
            self._proc.wait()
            raise SearchUnavailable(f"{what}: the worker exited ({self._proc.returncode}){tail}")
        return json.loads(line)  # type: ignore[no-any-return]

    def _log_tail(self) -> str:
        try:
            lines = [ln for ln in self.log_path.read_text(errors="replace").splitlines() if ln.strip()]
        except OSError:
            return ""
        errs = [ln for ln in lines if "Error" in ln or "Exception" in ln] or lines
        return f": {errs[-1].strip()[:300]}" if errs else ""

    def search_many(self, queries: list[str], k: int) -> list[list[tuple[str, float]]]:
        """(docid, score) lists, best first, one per query."""
        if not queries:
            return []
        with self._lock:
            if self._proc.poll() is not None:
                raise SearchUnavailable(f"the Lucene worker has exited ({self._proc.returncode}); reopen the "
                                        "retriever")
            try:
                self._in.write(json.dumps({"q": queries, "k": int(k)}).encode() + b"\n")
                self._in.flush()
            except OSError as e:
                raise SearchUnavailable(f"the Lucene worker is gone ({e}){self._log_tail()}") from e
            answer = self._read("a Lucene search failed")
        if "error" in answer:
            if answer.get("query"):  # this query's fault, not the index's: the model is told, the run goes on
                raise ToolError(answer["error"])
            raise SearchUnavailable(f"a Lucene search failed: {answer['error']}")
        return [[(str(d), float(s)) for d, s in hits] for hits in answer["hits"]]

    def close(self) -> None:
        """Stop the child (its stdin closed; killed if it has not exited 10 s later) and drop its log."""
        with self._lock:
            if self._proc.poll() is None:
                for stream in (self._in, self._out):
                    try:
                        stream.close()
                    except OSError:  # pragma: no cover
                        pass
                try:
                    self._proc.wait(timeout=10)
                except subprocess.TimeoutExpired:  # pragma: no cover - the worker exits on EOF
                    self._proc.kill()
                    self._proc.wait()
            self._tmp.cleanup()


# --- the child ---------------------------------------------------------------------------------------------
def _serve(jar: str, index_dir: str, out: IO[bytes]) -> None:  # pragma: no cover - runs in the child
    import jpype

    libjvm = Path(os.environ["JAVA_HOME"]) / "lib" / "server" / "libjvm.so"
    try:
        jpype.startJVM(str(libjvm), "-Xrs", classpath=[jar], convertStrings=True)
        searcher_cls = jpype.JClass("io.anserini.search.SimpleSearcher")
        searcher = searcher_cls(index_dir)
        array_list = jpype.JClass("java.util.ArrayList")
    except Exception as e:  # noqa: BLE001 - reported to the parent, which raises
        _send(out, {"error": f"{type(e).__name__}: {e}".splitlines()[0]})
        return
    _send(out, {"ready": True})
    for line in sys.stdin.buffer:
        try:
            req = json.loads(line)
            queries, k = [str(q) for q in req["q"]], int(req["k"])
            if len(queries) == 1:
                results = [searcher.search(queries[0], k)]
            else:
                qids = [str(i) for i in range(len(queries))]
                jq, jids = array_list(), array_list()
                for q, i in zip(queries, qids, strict=True):
                    jq.add(q)
                    jids.add(i)
                by_id = searcher.batch_search(jq, jids, k, SEARCH_THREADS)
                results = [by_id.get(i) for i in qids]
            hits = [[[h.docid, float(h.score)] for h in r] if r is not None else [] for r in results]
            _send(out, {"hits": hits})
        except Exception as e:  # noqa: BLE001 - reported to the parent, which raises
            if "TooManyClauses" in f"{type(e).__name__} {e}":
                _send(out, {"error": "a query has more distinct terms than Lucene's limit (1,024; Anserini "
                                     "refuses it too): shorten it", "query": True})
            else:
                _send(out, {"error": f"{type(e).__name__}: {e}".splitlines()[0]})


def _send(out: IO[bytes], obj: dict[str, Any]) -> None:  # pragma: no cover - runs in the child
    out.write(json.dumps(obj).encode() + b"\n")
    out.flush()


def main(argv: list[str]) -> None:  # pragma: no cover - runs in the child
    """The child: answer on a private copy of stdout; everything else written to fd 1 (the JVM's logging)
    goes to stderr, the parent's log file."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    _serve(argv[0], argv[1], out)
    out.close()
    os._exit(0)  # the JVM's threads must not keep the process alive


if __name__ == "__main__":  # pragma: no cover
    main(sys.argv[1:])
