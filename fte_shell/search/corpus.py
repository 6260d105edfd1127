"""Local corpora: a JSONL of documents stored in a directory that retrievers index.

The JSONL holds either ``{docid, title, text, url?}`` rows (retrievers index the title, a newline and the
text) or BrowseComp-Plus's own ``{docid, text, url?}`` rows (no title: a document's title is its text's
first line, and retrievers index the text alone, as the official indexes do). ``meta.json``'s ``contents``
records which.

Corpus directory layout (written atomically: built next to the target, then renamed into place)::

    DIR/meta.json     {"format": 2, "name", "docs", "fingerprint", "built_at", "source", "contents"}
    DIR/docs.sqlite   table docs(i, docid UNIQUE, url, url_key UNIQUE, title, text): O(1) lookups
    DIR/indexes/NAME/ one index per retriever, built on first use (fte_shell.search.retrievers)

Format 1 (earlier versions) is still read: no ``contents`` (title and text), and a ``bm25/`` directory
holding the bm25s index, which the ``bm25s`` retriever reads as it is.

Loaders turn other data into that JSONL: :func:`hotpotqa_to_jsonl` (the HotpotQA paragraphs, one document
per unique Wikipedia title).
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import re
import shutil
import sqlite3
import tempfile
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote, unquote

from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import FetchRefused, FteError
from ..record.jsonio import iter_jsonl, write_lines_atomic
from ..workspace import canonical_url

FORMAT = 2
"""Version of the corpus directory layout (``meta.json``'s ``format``)."""

READABLE_FORMATS = (1, 2)
"""The layouts this version reads (1: a ``bm25/`` index inside, contents always title + text)."""

CONTENTS = ("title+text", "text")
"""What retrievers index of a document: its title, a newline and its text; or its text alone."""

META = "meta.json"
DOCS_DB = "docs.sqlite"
MAX_DOCID_CHARS = 200


class CorpusError(FteError):
    """A corpus cannot be built or read (bad JSONL line, duplicate docid, missing or foreign directory)."""


class CorpusDoc(BaseModel):
    """One document of a local corpus (one line of the corpus JSONL)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    docid: str
    """Unique id; ``fetch DOCID`` materializes the document. No whitespace, at most 200 characters."""

    title: str
    """Title shown in search results and in the file's provenance header."""

    text: str
    """Full plain text: what ``fetch`` writes under /work."""

    url: str | None = None
    """Optional canonical web address; shown in results instead of the docid, and ``fetch URL`` then
    serves the document from the corpus with no HTTP request."""


def url_key(url: str) -> str:
    """Lookup key for a document URL: its :func:`~fte_shell.workspace.canonical_url`, percent-decoded, so
    ``.../Foo_(bar)`` and ``.../Foo_%28bar%29`` match (a string that is no absolute URL: itself, decoded)."""
    try:
        return unquote(canonical_url(url))
    except FetchRefused:
        return unquote(url.strip())


def docid_for_title(title: str) -> str:
    """A shell-friendly docid from a title: ASCII-folded, lower-case, runs of other characters become
    ``-`` (``Michael Jackson (writer)`` -> ``michael-jackson-writer``); never empty."""
    folded = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode("ascii")
    slug = re.sub(r"[^a-z0-9]+", "-", folded.lower()).strip("-")[:80].strip("-")
    return slug or "doc-" + hashlib.sha256(title.encode()).hexdigest()[:12]


def wikipedia_url(title: str) -> str:
    """The English Wikipedia address of a title: spaces become underscores, and every character a shell
    would interpret (``(``, ``)``, ``'``, ``&`` …) is percent-encoded, so the URL can be pasted unquoted.
    Lookups decode URLs first, so the unencoded form finds the document too."""
    return "https://en.wikipedia.org/wiki/" + quote(title.replace(" ", "_"), safe="_,-.~:/")


def jsonl_contents(path: Path) -> str:
    """``text`` when the corpus JSONL's first row has no ``title`` (BrowseComp-Plus's own rows), else
    ``title+text``; :class:`CorpusError` when it has no row."""
    for _no, obj in iter_jsonl(Path(path), CorpusError):
        return "text" if isinstance(obj, dict) and "title" not in obj else "title+text"
    raise CorpusError(f"{path}: the corpus is empty: no documents to index")


def title_of(text: str) -> str:
    """A title-less document's title: its text's first non-blank line (cut to 200 characters)."""
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:200]
    return ""


def read_jsonl(path: Path, contents: str | None = None) -> Iterator[CorpusDoc]:
    """Yield the documents of a corpus JSONL; a bad line (or a docid seen before) raises
    :class:`CorpusError` naming its number. Blank lines are skipped. ``contents`` (default: what
    :func:`jsonl_contents` finds) ``text``: rows are ``{docid, text, url?}``, the title is the text's first
    line and a numeric docid is taken as its digits."""
    path = Path(path)
    contents = contents or jsonl_contents(path)
    expected = "{docid, text, url?}" if contents == "text" else "{docid, title, text, url?}"
    seen: set[str] = set()
    for no, obj in iter_jsonl(path, CorpusError):
        if contents == "text" and isinstance(obj, dict):
            if "title" in obj:
                raise CorpusError(f"{path}:{no}: title: unknown field (the first row has none; expected {expected})")
            if isinstance(obj.get("docid"), int):
                obj = {**obj, "docid": str(obj["docid"])}
            if isinstance(obj.get("text"), str):
                obj = {**obj, "title": title_of(obj["text"])}
        try:
            doc = CorpusDoc.model_validate(obj)
        except ValidationError as e:
            err = e.errors()[0]
            loc = ".".join(str(p) for p in err["loc"]) or "line"
            what = "unknown field" if err["type"] == "extra_forbidden" else err["msg"]
            raise CorpusError(f"{path}:{no}: {loc}: {what} (expected {expected})") from e
        if doc.docid in seen:
            raise CorpusError(f"{path}:{no}: duplicate docid {doc.docid!r}")
        seen.add(doc.docid)
        yield doc


def write_jsonl(docs: Iterable[CorpusDoc], out_path: Path) -> int:
    """Write documents as corpus JSONL (atomically); returns how many were written."""
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    return write_lines_atomic(out_path, (json.dumps(d.model_dump(exclude_none=True), ensure_ascii=False) + "\n"
                                         for d in docs))


def index_text(doc: CorpusDoc, contents: str = "title+text") -> str:
    """What retrievers index of a document: its title, a newline and its text (``title+text``); or its
    text alone (``text``)."""
    return doc.text if contents == "text" else f"{doc.title}\n{doc.text}"


class SqliteTexts:
    """:class:`~fte_shell.search.retrievers.base.CorpusTexts` of a corpus directory: its documents in
    corpus order, as the corpus's ``contents`` says, read from ``docs.sqlite``."""

    def __init__(self, corpus_dir: Path) -> None:
        self.corpus_dir = Path(corpus_dir)
        meta = read_meta(self.corpus_dir)
        self.fingerprint: str = str(meta.get("fingerprint", ""))
        self.contents: str = str(meta.get("contents", "title+text"))
        self._n = int(meta.get("docs", 0))

    def __len__(self) -> int:
        return self._n

    def texts(self) -> Iterator[tuple[str, str]]:
        """(docid, contents) of every document, in corpus order."""
        db = sqlite3.connect(f"file:{self.corpus_dir / DOCS_DB}?mode=ro", uri=True)
        try:
            for docid, title, text in db.execute("SELECT docid, title, text FROM docs ORDER BY i"):
                yield docid, (text if self.contents == "text" else f"{title}\n{text}")
        finally:
            db.close()


def read_meta(corpus_dir: Path) -> dict[str, object]:
    """``meta.json`` of a corpus directory; :class:`CorpusError` naming the fix when there is none, it is
    damaged, or its format is not one this version reads."""
    path = Path(corpus_dir) / META
    if not path.is_file():
        raise CorpusError(
            f"no local corpus index at {corpus_dir}: build one with `fte-shell corpus build DOCS.jsonl --out DIR` "
            "(or `fte-shell corpus hotpotqa --out DIR`)"
        )
    try:
        meta = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise CorpusError(f"{path} is damaged ({e}); rebuild the corpus with `fte-shell corpus build`") from e
    if not isinstance(meta, dict) or meta.get("format") not in READABLE_FORMATS:
        got = meta.get("format") if isinstance(meta, dict) else None
        raise CorpusError(
            f"{path}: corpus format {got!r}, this version reads {READABLE_FORMATS}; rebuild it with "
            "`fte-shell corpus build`"
        )
    if meta.get("contents", "title+text") not in CONTENTS:
        raise CorpusError(f"{path}: contents {meta.get('contents')!r} is not one of {CONTENTS}; rebuild it")
    return meta


def build_corpus(
    docs: Iterable[CorpusDoc],
    out_dir: Path,
    *,
    name: str | None = None,
    source: str = "",
    contents: str = "title+text",
    progress: Callable[[int], None] | None = None,
) -> Path:
    """Store ``docs`` in ``out_dir`` (replacing a previous corpus there, and its indexes) and return the
    directory. ``contents``: what retrievers will index (:data:`CONTENTS`). Retrievers build their indexes
    on first use (:func:`fte_shell.search.retrievers.build_index`).

    Raises :class:`CorpusError` (naming ``source``) on a duplicate docid or url, an invalid docid, an empty
    corpus, or when ``out_dir`` exists, is not empty and is not a corpus (nothing is overwritten then).
    ``progress`` is called with the number of documents read so far.
    """
    if contents not in CONTENTS:
        raise CorpusError(f"contents {contents!r} is not one of {CONTENTS}")
    out_dir = Path(out_dir).resolve()
    where = source or str(out_dir)
    if out_dir.exists() and (not out_dir.is_dir() or (any(out_dir.iterdir()) and not (out_dir / META).exists())):
        raise CorpusError(f"{out_dir} exists and is not a corpus directory; choose another --out")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.build-", dir=out_dir.parent))
    try:
        n, fingerprint = _store_docs(tmp / DOCS_DB, docs, where, contents, progress)
        meta = {
            "format": FORMAT,
            "name": name or out_dir.name,
            "docs": n,
            "fingerprint": fingerprint,
            "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "source": source,
            "contents": contents,
        }
        (tmp / META).write_text(json.dumps(meta, indent=2) + "\n")
        _swap_in(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir


def _store_docs(
    db_path: Path, docs: Iterable[CorpusDoc], where: str, contents: str, progress: Callable[[int], None] | None
) -> tuple[int, str]:
    """Write ``docs`` to a new SQLite file, checking each docid and url as it goes; (count, fingerprint)."""
    db = sqlite3.connect(db_path)
    try:
        db.execute(
            "CREATE TABLE docs (i INTEGER PRIMARY KEY, docid TEXT NOT NULL UNIQUE, url TEXT, "
            "url_key TEXT UNIQUE, title TEXT NOT NULL, text TEXT NOT NULL)"
        )
        fingerprint = hashlib.sha256()
        if contents != "title+text":  # a title+text corpus keeps the fingerprint of earlier versions
            fingerprint.update(f"contents={contents}\n".encode())
        n = 0
        seen_urls: dict[str, str] = {}
        seen_ids: set[str] = set()
        for i, d in enumerate(docs):
            key = _checked_keys(d, f"{where}: document {i + 1}", seen_ids, seen_urls)
            db.execute(
                "INSERT INTO docs (i, docid, url, url_key, title, text) VALUES (?, ?, ?, ?, ?, ?)",
                (i, d.docid, d.url, key, d.title, d.text),
            )
            fingerprint.update(json.dumps(d.model_dump(), sort_keys=True).encode())
            n += 1
            if progress is not None:
                progress(n)
        if not n:
            raise CorpusError(f"{where}: the corpus is empty: no documents to index")
        db.commit()
    finally:
        db.close()
    return n, fingerprint.hexdigest()


def _checked_keys(d: CorpusDoc, at: str, seen_ids: set[str], seen_urls: dict[str, str]) -> str | None:
    """Check ``d``'s docid (valid, new) and url (new) and record them; its url key (None without a url)."""
    if not d.docid or len(d.docid) > MAX_DOCID_CHARS or any(c.isspace() for c in d.docid):
        raise CorpusError(
            f"{at}: invalid docid {d.docid[:60]!r} (non-empty, no whitespace, at most {MAX_DOCID_CHARS} characters)"
        )
    if d.docid in seen_ids:
        raise CorpusError(f"{at}: duplicate docid {d.docid!r}")
    seen_ids.add(d.docid)
    key = url_key(d.url) if d.url else None
    if key is not None:
        if key in seen_urls:
            raise CorpusError(f"{at}: url {d.url!r} is also the url of docid {seen_urls[key]!r}")
        seen_urls[key] = d.docid
    return key


def _swap_in(tmp: Path, out_dir: Path) -> None:
    """Move the built corpus ``tmp`` to ``out_dir``, replacing a previous corpus there."""
    if out_dir.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=out_dir.parent))
        os.replace(out_dir, old / "c")
        os.replace(tmp, out_dir)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, out_dir)


def build_corpus_from_jsonl(
    jsonl: Path, out_dir: Path, *, name: str | None = None, progress: Callable[[int], None] | None = None
) -> Path:
    """Store a corpus JSONL file in ``out_dir`` (see :func:`build_corpus`): rows of ``{docid, title, text,
    url?}``, or BrowseComp-Plus's ``{docid, text, url?}`` (then retrievers index the text alone)."""
    contents = jsonl_contents(jsonl)
    return build_corpus(read_jsonl(jsonl, contents), out_dir, name=name, source=str(Path(jsonl).resolve()),
                        contents=contents, progress=progress)


# --- HotpotQA ------------------------------------------------------------------------------------------
HOTPOTQA_FILES = ("dev.jsonl", "test.jsonl")


def hotpotqa_docs(data_dir: Path) -> Iterator[CorpusDoc]:
    """One document per unique paragraph title of the HotpotQA files in ``data_dir`` (dev, then test, in
    file order): text = the paragraph's sentences joined, url = the Wikipedia address, docid from the
    title (:func:`docid_for_title`; a later title whose slug is taken gets a short hash suffix). HTML
    entities in the data's titles are decoded (``Angels &amp; Airwaves`` -> ``Angels & Airwaves``), so
    titles, docids and URLs carry the real characters."""
    data_dir = Path(data_dir)
    files = [data_dir / f for f in HOTPOTQA_FILES if (data_dir / f).exists()]
    if not files:
        raise CorpusError(f"no HotpotQA files ({', '.join(HOTPOTQA_FILES)}) in {data_dir}")
    titles: set[str] = set()
    ids: set[str] = set()
    for f in files:
        with f.open(encoding="utf-8") as fh:
            for no, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    context = json.loads(line)["context"]
                except (json.JSONDecodeError, KeyError, TypeError) as e:
                    raise CorpusError(f"{f}:{no}: not a HotpotQA question with a 'context'") from e
                for raw_title, sentences in context:
                    title = html.unescape(raw_title)
                    if title in titles:
                        continue
                    titles.add(title)
                    docid = docid_for_title(title)
                    if docid in ids:
                        docid = f"{docid}-{hashlib.sha256(title.encode()).hexdigest()[:6]}"
                    ids.add(docid)
                    text = "".join(sentences).strip()
                    yield CorpusDoc(docid=docid, title=title, text=text, url=wikipedia_url(title))


def hotpotqa_to_jsonl(data_dir: Path, out_path: Path) -> int:
    """Write the HotpotQA paragraphs in ``data_dir`` as a corpus JSONL (one doc per unique title);
    returns the number of documents. The text is CC BY-SA 4.0 (HotpotQA, Yang et al., 2018)."""
    return write_jsonl(hotpotqa_docs(data_dir), out_path)
