"""A local corpus built on the fly from the Python standard library's own documentation strings.

One document per public module, class, function and method of a fixed list of stdlib modules (its
signature, then its docstring; a module or class also lists its members with their one-line summaries).
Docids are dotted names (``json.dumps``, ``collections.OrderedDict.move_to_end``), so ``fetch json.dumps``
works; documents have no url. Deterministic for a given Python; a few thousand documents in a few seconds.
Used by ``fte-shell demo`` so its questions have real, checkable answers without any network.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import re
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from .corpus import META, CorpusDoc, build_corpus

MODULES: tuple[str, ...] = (
    "abc", "argparse", "array", "base64", "binascii", "bisect", "calendar", "codecs", "collections",
    "collections.abc", "concurrent.futures", "configparser", "contextlib", "copy", "csv", "dataclasses",
    "datetime", "decimal", "difflib", "email.message", "enum", "fnmatch", "fractions", "functools",
    "getopt", "glob", "gzip", "hashlib", "heapq", "hmac", "html", "html.parser", "http", "http.client",
    "http.cookies", "http.server", "io", "ipaddress", "itertools", "json", "keyword", "linecache",
    "locale", "logging", "logging.handlers", "lzma", "math", "mimetypes", "numbers", "operator", "os",
    "os.path", "pathlib", "pickle", "platform", "pprint", "queue", "random", "re", "reprlib", "sched",
    "secrets", "selectors", "shelve", "shlex", "shutil", "signal", "socket", "socketserver", "sqlite3",
    "statistics", "string", "struct", "subprocess", "tarfile", "tempfile", "textwrap", "threading",
    "time", "timeit", "tokenize", "tomllib", "traceback", "types", "typing", "unicodedata",
    "urllib.error", "urllib.parse", "urllib.request", "uuid", "warnings", "weakref",
    "xml.etree.ElementTree", "zipfile", "zlib", "zoneinfo",
)
"""The modules documented (fixed: the corpus depends only on the Python version)."""

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_SUMMARY_CHARS = 160


def _signature(obj: object) -> str:
    try:
        sig = str(inspect.signature(obj))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return ""
    return _ADDRESS.sub("", sig)


def _own_doc(obj: object) -> str:
    doc = getattr(obj, "__doc__", None)
    if not isinstance(doc, str) or not doc.strip():
        return ""
    return inspect.cleandoc(_ADDRESS.sub("", doc))


def _summary(doc: str) -> str:
    first = doc.strip().split("\n\n", 1)[0]
    line = " ".join(first.split())
    return line if len(line) <= _SUMMARY_CHARS else line[: _SUMMARY_CHARS - 1] + "…"


def _public(name: str) -> bool:
    return not name.startswith("_")


def _defined_in(obj: object, module: ModuleType) -> bool:
    owner = getattr(obj, "__module__", None)
    if owner is None:
        return False
    names = {module.__name__, "_" + module.__name__.rsplit(".", 1)[-1]}
    return owner in names or owner.startswith(module.__name__ + ".") or owner.lstrip("_") == module.__name__


def _members(module: ModuleType) -> list[tuple[str, object]]:
    public = getattr(module, "__all__", None)
    names = sorted(set(public)) if isinstance(public, (list, tuple)) else sorted(n for n in vars(module) if _public(n))
    out = []
    for name in names:
        obj = getattr(module, name, None)
        if (inspect.isclass(obj) or inspect.isroutine(obj)) and _public(name) and _defined_in(obj, module):
            out.append((name, obj))
    return out


def _doc(docid: str, kind: str, signature: str, doc: str, listing: list[str]) -> CorpusDoc:
    parts = [f"{docid}{signature}" if signature else docid, f"({kind})"]
    text = " ".join(parts)
    if doc:
        text += "\n\n" + doc
    if listing:
        text += "\n\n" + ("Members:" if kind == "module" else "Methods:") + "\n" + "\n".join(listing)
    return CorpusDoc(docid=docid, title=f"{docid} ({kind})", text=text)


def pydoc_docs(modules: tuple[str, ...] = MODULES) -> Iterator[CorpusDoc]:
    """The documents, in a fixed order (modules as listed, members sorted by name). A module that cannot
    be imported here is skipped."""
    seen: set[str] = set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for modname in modules:
            try:
                module = importlib.import_module(modname)
            except ImportError:
                continue
            members = _members(module)
            listing = []
            for name, obj in members:
                summary = _summary(_own_doc(obj))
                listing.append(f"  {modname}.{name}" + (f": {summary}" if summary else ""))
            if modname not in seen:
                seen.add(modname)
                yield _doc(modname, "module", "", _own_doc(module), listing)
            for name, obj in members:
                docid = f"{modname}.{name}"
                if docid in seen:
                    continue
                seen.add(docid)
                if inspect.isclass(obj):
                    methods = []
                    for mname, mobj in sorted(vars(obj).items()):
                        if not _public(mname):
                            continue
                        func = mobj.__func__ if isinstance(mobj, (classmethod, staticmethod)) else mobj
                        if isinstance(func, property):
                            func = func.fget
                        if inspect.isroutine(func) or isinstance(mobj, property):
                            methods.append((mname, mobj, func))
                    mlisting = [
                        f"  {docid}.{m}" + (f": {s}" if (s := _summary(_own_doc(f))) else "")
                        for m, _, f in methods
                    ]
                    yield _doc(docid, "class", _signature(obj), _own_doc(obj), mlisting)
                    for mname, mobj, func in methods:
                        mdoc = _own_doc(func)
                        mid = f"{docid}.{mname}"
                        if not mdoc or mid in seen:
                            continue
                        seen.add(mid)
                        kind = "property" if isinstance(mobj, property) else "method"
                        sig = "" if kind == "property" else _signature(func)
                        yield _doc(mid, kind, sig, mdoc, [])
                else:
                    doc = _own_doc(obj)
                    if doc:
                        yield _doc(docid, "function", _signature(obj), doc, [])


def _source_tag(modules: tuple[str, ...]) -> str:
    digest = hashlib.sha256("\n".join(modules).encode()).hexdigest()[:12]
    return f"pydoc:python-{sys.version_info.major}.{sys.version_info.minor}.{sys.version_info.micro}:{digest}"


def build_pydoc_corpus(out_dir: Path, *, force: bool = False) -> Path:
    """Build (or reuse, unless ``force``) the stdlib-docstring corpus index in ``out_dir``; returns it.

    An existing index is reused when it was built by this same Python from this same module list."""
    out_dir = Path(out_dir)
    tag = _source_tag(MODULES)
    meta = out_dir / META
    if not force and meta.is_file():
        try:
            if json.loads(meta.read_text()).get("source") == tag:
                return out_dir.resolve()
        except (OSError, json.JSONDecodeError):
            pass
    return build_corpus(pydoc_docs(), out_dir, name="pydoc", source=tag)
