"""The corpus in the box: a local corpus directory (``fte-shell corpus build``: ``docs.sqlite``) as plain
files, exported once per corpus into a cache and bound read-only into every box at :data:`CORPUS_MOUNT`
(``[sandbox] corpus``).

Layout of an export (docs/sandbox.md "The corpus in the box")::

    <cache>/<key>/<shard>/<name>    one file per document
    <cache>/<key>.json              what was exported: corpus fingerprint, documents, shard width, bytes

``key`` is ``<corpus fingerprint>-v<EXPORT_FORMAT>``: the same corpus content is exported once, whatever
directory it is read from, and a changed corpus gets a new entry.

File name
    The docid itself when it is a plain name: only ``A-Z a-z 0-9 . _ -``, not starting with ``.``, at most
    :data:`MAX_NAME` bytes (BrowseComp-Plus's numeric docids, HotpotQA's titles with ``_`` for spaces).
    Otherwise the docid percent-encoded: every UTF-8 byte outside that set (``%`` and ``/`` included, and a
    leading ``.``) as ``%XX``, upper-case hex, so ``urllib.parse.unquote(name)`` gives the docid back. A
    name still longer than :data:`MAX_NAME` bytes is cut to its first 200 bytes, then ``~`` and the first 16
    hex digits of the SHA-256 of the docid (``~`` never occurs in the other two forms).
Shard
    The first ``width`` hex digits of the SHA-256 of the docid's UTF-8 bytes, ``width`` the smallest with
    on average at most :data:`PER_DIR` documents per directory (1 up to 32,000 documents, 2 up to
    512,000, 3 up to 8,192,000, …), nested two digits a level past two (``ab/c``): no directory holds more
    than a few thousand entries, and a document's place follows from its docid alone (``ls /corpus/*/DOCID``
    finds it in the box).
Content
    The document as the corpus's retrievers index it — its text, or, in a corpus whose documents have
    separate titles (meta.json ``contents`` ``title+text``, or no ``contents``), its title, a newline and
    its text — ending with one newline. No header: a provenance line (the workspace format's ``Docid:`` /
    ``Title:`` / ``Retrieved:``) would add matches of its own to every grep and shift every line number
    and count against the corpus the DCI papers grep, and the docid is already the file's name.

An export is written to a temporary directory beside the entry and renamed into place (one process
exports, others wait on a lock file and then find it); files are made ``0444`` and directories ``0555``.
Before anything is written the space it needs (each file rounded up to 4 KiB blocks) is checked against
the free space of the cache's file system: too little is a :class:`~fte_shell.errors.SandboxError` naming
both figures and the fix.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from ..config import SandboxConfig
from ..errors import SandboxError
from ..search.corpus import DOCS_DB, META, SqliteTexts

CORPUS_MOUNT = "/corpus"
"""Where the box sees the exported corpus (read-only)."""

EXPORT_FORMAT = 1
"""Version of the export's layout (file names, shards, content); part of the cache key."""

PER_DIR = 2000
"""Average documents per shard directory the shard width is chosen for."""

MAX_NAME = 240
"""Longest file name in bytes (file systems allow 255)."""

BLOCK = 4096
"""What a small file takes on disk at least (the space check rounds every file up to it)."""

_PLAIN = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")


def file_name(docid: str) -> str:
    """The file name of ``docid`` (see the module docstring)."""
    raw = docid.encode("utf-8")
    if raw and len(raw) <= MAX_NAME and not raw.startswith(b".") and all(b in _PLAIN for b in raw):
        return docid
    name = "".join(chr(b) if b in _PLAIN and not (i == 0 and b == ord(".")) else f"%{b:02X}"
                   for i, b in enumerate(raw))
    if len(name) > MAX_NAME:
        name = name[:200] + "~" + hashlib.sha256(raw).hexdigest()[:16]
    return name


def shard_width(docs: int) -> int:
    """Hex digits of the shard directory names for a corpus of ``docs`` documents (at least 1)."""
    width = 1
    while docs > PER_DIR * 16**width:
        width += 1
    return width


def doc_path(docid: str, width: int) -> str:
    """``<shard>/<name>`` of ``docid`` in an export of shard width ``width`` (a shard of more than two hex
    digits is nested two digits a level: ``ab/c``, so no level holds more than 256 directories)."""
    digits = hashlib.sha256(docid.encode("utf-8")).hexdigest()[:width]
    return "/".join([digits[i:i + 2] for i in range(0, width, 2)] + [file_name(docid)])


SYSTEM_CACHE = Path("/var/cache/fte-shell/corpus-files")
"""root's default cache: a bwrap box started by root runs as ``sandbox.user``, who must reach the entry."""


def cache_dir(cfg: SandboxConfig) -> Path:
    """``[sandbox] corpus_cache``, else ``$XDG_CACHE_HOME/fte-shell/corpus-files`` (``~/.cache``); for root
    :data:`SYSTEM_CACHE`."""
    if cfg.corpus_cache is not None:
        return Path(cfg.corpus_cache).expanduser()
    if os.geteuid() == 0:
        return SYSTEM_CACHE
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fte-shell" / "corpus-files"


def _meta(corpus: Path) -> dict:
    try:
        meta = json.loads((corpus / META).read_text())
        fingerprint = str(meta["fingerprint"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise SandboxError(f"sandbox.corpus {corpus}: not a corpus directory ({META}: {e}); build one with "
                           "`fte-shell corpus build DOCS.jsonl --out DIR`") from None
    if not (corpus / DOCS_DB).is_file():
        raise SandboxError(f"sandbox.corpus {corpus}: no {DOCS_DB} (build the corpus again with "
                           "`fte-shell corpus build`)")
    return {**meta, "fingerprint": fingerprint}


def _connect(corpus: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{corpus / DOCS_DB}?mode=ro", uri=True)


def _with_title(meta: dict) -> bool:
    return meta.get("contents", "title+text") != "text"


def _documents(corpus: Path) -> Iterator[tuple[str, bytes]]:
    """Each document's file content (the corpus store's one reader, :class:`SqliteTexts`: its contents as the
    retrievers index them), ending with one newline."""
    for docid, body in SqliteTexts(corpus).texts():
        yield docid, (body if body.endswith("\n") else body + "\n").encode("utf-8")


def needed_bytes(corpus: Path, with_title: bool = True) -> tuple[int, int]:
    """(documents, bytes on disk) of an export of ``corpus``: each file's UTF-8 size plus its final newline,
    rounded up to :data:`BLOCK`, plus one block per shard directory."""
    extra = "LENGTH(CAST(title AS BLOB)) + 1 +" if with_title else ""
    db = _connect(corpus)
    try:
        n, size = db.execute(f"SELECT COUNT(*), COALESCE(SUM(({extra} LENGTH(CAST(text AS BLOB)) + 1 + {BLOCK - 1})"
                             f" / {BLOCK} * {BLOCK}), 0) FROM docs").fetchone()
    finally:
        db.close()
    return int(n), int(size) + BLOCK * 16 ** shard_width(int(n))


def check_room(needed: int, free: int, corpus: Path, cache: Path) -> None:
    """:class:`SandboxError` when ``needed`` bytes (and 5 % to spare) do not fit in ``free``."""
    if needed * 1.05 > free:
        raise SandboxError(
            f"the corpus {corpus} as files (sandbox.corpus) needs about {needed / 1e9:.2f} GB at {cache}, but "
            f"only {free / 1e9:.2f} GB are free there: free space, or set sandbox.corpus_cache to a disk with room"
        )


def write_tree(tmp: Path, documents: Iterable[tuple[str, bytes]], docs: int) -> tuple[int, int]:
    """Write ``documents`` ((docid, file content) pairs, ``docs`` of them) into the empty directory ``tmp``
    as an export's tree (read-only files and shard directories); returns (shard width, bytes written)."""
    width = shard_width(docs)
    made: set[str] = set()
    written = 0
    for docid, body in documents:
        rel = doc_path(docid, width)
        shard = rel.rsplit("/", 1)[0]
        if shard not in made:
            (tmp / shard).mkdir(parents=True, exist_ok=True)
            made.add(shard)
        fd = os.open(tmp / rel, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
        with os.fdopen(fd, "wb") as f:
            f.write(body)
        written += len(body)
    for shard in sorted(made, reverse=True):  # deepest first: a parent made read-only last
        os.chmod(tmp / shard, 0o555)
        if "/" in shard:
            os.chmod(tmp / shard.split("/", 1)[0], 0o555)
    return width, written


def _fill(tmp: Path, corpus: Path, meta: dict, docs: int, needed: int) -> dict:
    with_title = _with_title(meta)
    width, written = write_tree(tmp, _documents(corpus), docs)
    return {"format": EXPORT_FORMAT, "fingerprint": meta["fingerprint"], "name": meta.get("name"),
            "docs": docs, "shard_width": width, "bytes": written, "disk_bytes_estimate": needed,
            "with_title": with_title}


def remove_tree(tree: Path) -> None:
    """Remove a tree this module wrote (its read-only directories made writable first)."""
    for d, _dirs, _files in os.walk(tree):
        with contextlib.suppress(OSError):
            os.chmod(d, 0o755)
    shutil.rmtree(tree, ignore_errors=True)


def export_corpus(corpus: Path, cache: Path, log: Callable[[str], None] | None = None) -> Path:
    """The exported tree of the corpus directory ``corpus`` in ``cache`` (made now unless it is there;
    ``log`` hears when it is)."""
    corpus = Path(corpus).expanduser().resolve()
    meta = _meta(corpus)
    key = f"{meta['fingerprint']}-v{EXPORT_FORMAT}"
    entry = cache / key
    if (cache / f"{key}.json").is_file() and entry.is_dir():
        return entry
    cache.mkdir(parents=True, exist_ok=True)
    if cache.stat().st_uid == os.geteuid():
        os.chmod(cache, 0o755)  # a box's uid (bwrap started by root) walks through it to the entry
    with open(cache / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (cache / f"{key}.json").is_file() and entry.is_dir():
            return entry  # another process exported it while we waited
        docs, needed = needed_bytes(corpus, _with_title(meta))
        check_room(needed, shutil.disk_usage(cache).free, corpus, cache)
        if log is not None:
            size = next(f"{needed / u:.{p}f} {name}" for u, p, name in ((1e9, 2, "GB"), (1e6, 1, "MB"), (1, 0, "B"))
                        if needed >= u or u == 1)
            log(f"exporting the corpus {corpus} ({docs:,} documents, ~{size}) as files for "
                f"{CORPUS_MOUNT} into {entry} (once)")
        tmp = Path(tempfile.mkdtemp(prefix=f".{key}.tmp-", dir=cache))
        try:
            info = _fill(tmp, corpus, meta, docs, needed)
            os.chmod(tmp, 0o555)
            if entry.exists():  # a torn earlier attempt (no .json): replace it
                remove_tree(entry)
            os.rename(tmp, entry)
        except BaseException:
            remove_tree(tmp)
            raise
        (cache / f"{key}.json.tmp").write_text(json.dumps({**info, "source": str(corpus)}, indent=2) + "\n")
        os.replace(cache / f"{key}.json.tmp", cache / f"{key}.json")
    return entry


def corpus_mount(cfg: SandboxConfig, log: Callable[[str], None] | None = None) -> Path | None:
    """The host directory to bind at :data:`CORPUS_MOUNT` for boxes of ``cfg`` (exported on first use), or
    None when ``[sandbox] corpus`` is unset."""
    return None if cfg.corpus is None else export_corpus(Path(cfg.corpus), cache_dir(cfg), log)
