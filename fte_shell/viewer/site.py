"""The viewer's files, whether served (``serve``) or written once (``write_static``): the page and its
assets from the package, and data files ``data/<key>.js`` that hand one JSON value to ``FTE.got`` — the
index of every run, one run's detail, one workspace document — loaded by the page only when needed."""

from __future__ import annotations

import json
import re
import threading
import time
from importlib import resources
from pathlib import Path
from typing import Any

from .data import Catalog

ASSETS = ("index.html", "viewer.css", "app.js", "sweep.js", "run.js", "workspace.js", "compare.js")
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
_TYPES = {".html": "text/html; charset=utf-8", ".css": "text/css; charset=utf-8",
          ".js": "text/javascript; charset=utf-8"}
_DATA = re.compile(r"^(index|run/(\d+)|doc/(\d+)/(\d+))$")


class NotFound(Exception):
    """No such page or data file."""


def asset(name: str) -> bytes:
    if name not in ASSETS:
        raise NotFound(name)
    return resources.files("fte_shell.viewer").joinpath("static", name).read_bytes()


def data_js(key: str, value: Any) -> bytes:
    """``FTE.got("key", <JSON>);``: JSON is a JavaScript expression, so model text stays a string literal
    (inside a separate .js file no ``</script>`` in it can end anything)."""
    body = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    body = body.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return f"FTE.got({json.dumps(key)},{body});\n".encode()


class Site:
    """Answers the page's requests from a :class:`Catalog`. A load of the index picks up runs that
    appeared or changed since (a sweep still running), at most every ``refresh_s`` seconds (finding and
    stat-ing 2,000 runs takes ~0.5 s); unchanged runs are not read again."""

    def __init__(self, catalog: Catalog, refresh_s: float = 5.0):
        self.catalog = catalog
        self.refresh_s = refresh_s
        self._lock = threading.Lock()
        self._index: tuple[float, dict[str, Any]] | None = None

    def index(self) -> dict[str, Any]:
        with self._lock:
            now = time.monotonic()
            if self._index is None or now - self._index[0] >= self.refresh_s:
                self.catalog.refresh()
                self._index = (now, self.catalog.index())
            return self._index[1]

    def mark(self, key: Any, mark: Any, note: Any, who: str) -> dict[str, Any]:
        """A reviewer's mark of a run (:meth:`Catalog.mark`); the next index load shows it."""
        with self._lock:
            out = self.catalog.mark(key, mark, note, who)
            self._index = None
            return out

    def data(self, key: str) -> Any:
        m = _DATA.match(key)
        if not m:
            raise NotFound(key)
        if key == "index":
            return self.index()
        runs = self.catalog.runs
        k = int(m.group(2) or m.group(3))
        if not 0 <= k < len(runs):
            raise NotFound(key)
        if m.group(2):
            return self.catalog.detail(runs[k])
        try:
            return self.catalog.document(runs[k], int(m.group(4)))
        except KeyError:
            raise NotFound(key) from None

    def get(self, url_path: str) -> tuple[bytes, str]:
        """(body, content type) of a page path such as ``/``, ``/static/app.js``, ``/data/run/3.js``."""
        path = url_path.split("?", 1)[0].split("#", 1)[0]
        if path in ("/", "/index.html"):
            return asset("index.html"), _TYPES[".html"]
        if path.startswith("/static/"):
            name = path[len("/static/"):]
            return asset(name), _TYPES[Path(name).suffix]
        if path.startswith("/data/") and path.endswith(".js"):
            key = path[len("/data/"):-3]
            return data_js(key, self.data(key)), _TYPES[".js"]
        raise NotFound(path)


def write_static(catalog: Catalog, out: Path) -> int:
    """Write the whole site under ``out`` (open ``out/index.html``; works from file:// and zipped up).
    Returns the number of files written."""
    out = Path(out)
    site = Site(catalog)
    (out / "static").mkdir(parents=True, exist_ok=True)
    n = 0
    for name in ASSETS:
        (out if name == "index.html" else out / "static").joinpath(name).write_bytes(asset(name))
        n += 1

    def put(key: str, value: Any) -> None:
        nonlocal n
        p = out / "data" / f"{key}.js"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data_js(key, value))
        n += 1

    put("index", site.index())
    for run in catalog.runs:
        detail = catalog.detail(run)
        put(f"run/{run.key}", detail)
        for d in detail["workspace"]:
            put(f"doc/{run.key}/{d['n']}", catalog.document(run, d["n"]))
    return n
