"""The retrievers of a local corpus: the registry, spec parsing, and THE way an index is built and opened.

::

    spec = parse_spec("dense:openai:Qwen/Qwen3-Embedding-0.6B")   # kind "dense", arg "openai:Qwen/…"
    retriever = open_retriever(corpus_dir, spec, settings)       # builds DIR/indexes/<name>/ on first use
    retriever.search("who wrote ulysses", 5)                      # [Hit(docid, score), …]

An index lives in ``DIR/indexes/<kind.index_name(spec, settings)>/``. It is built once: into a temporary
directory beside it, moved into place by a rename, one builder at a time across threads and processes (an
``fcntl`` lock on ``DIR/indexes/.<name>.lock``), so a crash leaves no half-written index and two sweeps
starting together build it once. An opened retriever is shared by the whole process.

A kind may name *legacy* directories (``legacy_dirs``, relative to the corpus directory) holding an index it
reads as it is: the ``bm25s`` kind reads the ``bm25/`` directory of a corpus built by an earlier version, so
old sweeps resume with the same ranking and no rebuild.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from ...errors import ConfigError, SearchUnavailable
from ...keyed_lock import KeyedLocks
from ...plugins import Registry, is_reference
from .base import CorpusTexts, Hit, Retriever, RetrieverKind, RetrieverSpec

if TYPE_CHECKING:  # pragma: no cover
    from ...config import SearchConfig

__all__ = [
    "INDEXES_DIR",
    "RETRIEVERS",
    "CorpusTexts",
    "Hit",
    "Retriever",
    "RetrieverKind",
    "RetrieverSpec",
    "build_index",
    "index_path",
    "kind_of",
    "open_retriever",
    "parse_spec",
]

RETRIEVERS: Registry[RetrieverKind] = Registry(
    "retriever",
    {
        "bm25": "fte_shell.search.retrievers.lucene:KIND",
        "bm25s": "fte_shell.search.retrievers.bm25s:KIND",
        "dense": "fte_shell.search.retrievers.dense:KIND",
    },
)
"""The retriever kinds: built-in names, or a third-party kind as ``module:attr``."""

INDEXES_DIR = "indexes"
"""The corpus subdirectory holding one directory per built index."""

_INDEX_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,120}$")


def parse_spec(text: str) -> RetrieverSpec:
    """A retriever spec as written (``[search] retriever``, ``--retriever``), parsed.

    The part before the first colon is the kind when it is a registry name (``dense:openai:M`` -> kind
    ``dense``, arg ``openai:M``; ``bm25`` -> kind ``bm25``, arg ``""``); otherwise the spec is a third-party
    kind as ``module:attr``, optionally followed by ``:ARG`` (``pkg.mod:KIND:xyz`` -> kind
    ``pkg.mod:KIND``, arg ``xyz``). Anything else is a :class:`ConfigError` naming the setting."""
    text = text.strip()
    if not text:
        raise ConfigError("[search] retriever is empty: use bm25, bm25s, dense:MODEL or module:attr")
    head, sep, rest = text.partition(":")
    if head in RETRIEVERS.names():
        if head != text and not rest:
            raise ConfigError(f"[search] retriever {text!r}: nothing after {head + ':'!r}")
        return RetrieverSpec(kind=head, arg=rest, text=text)
    if sep:
        module, _, tail = rest.partition(":")
        kind = f"{head}:{module}"
        if is_reference(kind):
            return RetrieverSpec(kind=kind, arg=tail, text=text)
    raise ConfigError(
        f"[search] retriever {text!r}: unknown retriever (known: {', '.join(RETRIEVERS.names())}, "
        "dense:MODEL, dense:openai:MODEL; or a third-party kind as module:attr[:ARG])"
    )


def kind_of(spec: RetrieverSpec) -> RetrieverKind:
    """The plugin of ``spec.kind`` (imported on first use); :class:`ConfigError` naming the setting when it
    cannot be loaded or is no retriever kind."""
    try:
        kind = RETRIEVERS.get(spec.kind)
    except ConfigError as e:
        raise ConfigError(f"[search] retriever {spec.text!r}: {e}") from e
    if not isinstance(kind, RetrieverKind):
        raise ConfigError(
            f"[search] retriever {spec.text!r}: {spec.kind!r} is no retriever kind (it needs index_name, "
            "build and open; see fte_shell/search/retrievers/base.py)"
        )
    return kind


def index_path(corpus_dir: Path, spec: RetrieverSpec, settings: SearchConfig) -> Path:
    """Where the index ``spec`` needs lives in ``corpus_dir`` (a legacy directory the kind reads when no
    index was built under ``indexes/`` and that one exists)."""
    corpus_dir = Path(corpus_dir).expanduser().resolve()
    kind = kind_of(spec)
    name = kind.index_name(spec, settings)
    if not _INDEX_NAME.match(name):
        raise ConfigError(
            f"[search] retriever {spec.text!r}: its kind gives the index name {name!r}, which is not one "
            "path component of [a-z0-9._-]"
        )
    path = corpus_dir / INDEXES_DIR / name
    if not path.is_dir():
        for legacy in getattr(kind, "legacy_dirs", ()):
            if (corpus_dir / legacy).is_dir():
                return corpus_dir / legacy
    return path


def build_index(corpus_dir: Path, spec: RetrieverSpec, settings: SearchConfig) -> Path:
    """Build the index ``spec`` needs unless it exists; returns its directory. Safe to call from many
    threads and processes at once (one builds, the others wait and find it built)."""
    from ..corpus import SqliteTexts

    path = index_path(corpus_dir, spec, settings)
    if path.is_dir():
        return path
    root = path.parent
    try:
        root.mkdir(parents=True, exist_ok=True)
        lock_fd = os.open(root / f".{path.name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise SearchUnavailable(
            f"cannot build the {spec.text!r} index of {corpus_dir} ({e}): build it where the corpus is "
            f"writable with `fte-shell corpus build … --retriever {spec.text}`"
        ) from e
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        if path.is_dir():  # another process built it while we waited
            return path
        corpus = SqliteTexts(Path(corpus_dir))
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.build-", dir=root))
        try:
            kind_of(spec).build(spec, corpus, tmp, settings)
            (tmp / ".fte-index.json").write_text(
                json.dumps({"retriever": spec.text, "corpus_fingerprint": corpus.fingerprint}) + "\n"
            )
            os.replace(tmp, path)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return path
    finally:
        fcntl.flock(lock_fd, fcntl.LOCK_UN)
        os.close(lock_fd)


_opened: dict[tuple[str, int, str, str], Retriever] = {}
_open_lock = threading.Lock()
_opening: KeyedLocks[tuple[str, int, str, str]] = KeyedLocks()


def open_retriever(corpus_dir: Path, spec: RetrieverSpec, settings: SearchConfig) -> Retriever:
    """The retriever ``spec`` names over the corpus in ``corpus_dir``: its index built on first use
    (:func:`build_index`), opened once per process and shared (retrievers are thread-safe). A corpus
    rebuilt since (its ``meta.json`` changed) gets its new index."""
    from ..corpus import META

    corpus_dir = Path(corpus_dir).expanduser().resolve()
    try:
        stamp = (corpus_dir / META).stat().st_mtime_ns
    except OSError:
        stamp = -1
    key = (str(corpus_dir), stamp, spec.text, settings.embeddings.model_dump_json())
    with _opening[key]:  # one opener per key; other keys open in parallel
        with _open_lock:
            held = _opened.get(key)
        if held is None:
            path = build_index(corpus_dir, spec, settings)
            held = kind_of(spec).open(spec, path, settings)
            with _open_lock:
                _opened[key] = held
        return held
