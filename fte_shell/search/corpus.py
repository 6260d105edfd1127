"""Local corpora: a JSONL of ``{docid, title, text, url?}`` indexed with bm25s into a directory.

Index directory layout (written atomically: built next to the target, then renamed into place)::

    DIR/meta.json     {"format": 1, "name", "docs", "fingerprint", "built_at", "source"}
    DIR/docs.sqlite   table docs(i, docid UNIQUE, url, url_key UNIQUE, title, text): O(1) lookups
    DIR/bm25/         the bm25s index (row i of docs = bm25s document i)

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
from ..record.jsonio import iter_jsonl
from ..workspace import canonical_url

FORMAT = 1
"""Version of the index directory layout (``meta.json``'s ``format``)."""

META = "meta.json"
DOCS_DB = "docs.sqlite"
BM25_DIR = "bm25"
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


def read_jsonl(path: Path) -> Iterator[CorpusDoc]:
    """Yield the documents of a corpus JSONL; a bad line raises :class:`CorpusError` naming its number.
    Blank lines are skipped."""
    path = Path(path)
    for no, obj in iter_jsonl(path, CorpusError):
        try:
            yield CorpusDoc.model_validate(obj)
        except ValidationError as e:
            err = e.errors()[0]
            loc = ".".join(str(p) for p in err["loc"]) or "line"
            what = "unknown field" if err["type"] == "extra_forbidden" else err["msg"]
            raise CorpusError(f"{path}:{no}: {loc}: {what} (expected {{docid, title, text, url?}})") from e


def write_jsonl(docs: Iterable[CorpusDoc], out_path: Path) -> int:
    """Write documents as corpus JSONL (atomically); returns how many were written."""
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out_path.name}.", dir=out_path.parent)
    n = 0
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            for d in docs:
                fh.write(json.dumps(d.model_dump(exclude_none=True), ensure_ascii=False) + "\n")
                n += 1
        os.replace(tmp, out_path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return n


def index_text(doc: CorpusDoc) -> str:
    """What bm25s indexes for a document: its title, then its text."""
    return f"{doc.title}\n{doc.text}"


def build_corpus(
    docs: Iterable[CorpusDoc],
    out_dir: Path,
    *,
    name: str | None = None,
    source: str = "",
    progress: Callable[[int], None] | None = None,
) -> Path:
    """Index ``docs`` into ``out_dir`` (replacing a previous corpus there) and return the directory.

    Raises :class:`CorpusError` on a duplicate docid or url, an invalid docid, an empty corpus, or when
    ``out_dir`` exists, is not empty and is not a corpus (nothing is overwritten then). ``progress`` is
    called with the number of documents read so far.
    """
    import bm25s

    out_dir = Path(out_dir).resolve()
    if out_dir.exists() and (not out_dir.is_dir() or (any(out_dir.iterdir()) and not (out_dir / META).exists())):
        raise CorpusError(f"{out_dir} exists and is not a corpus directory; choose another --out")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.build-", dir=out_dir.parent))
    try:
        db = sqlite3.connect(tmp / DOCS_DB)
        db.execute(
            "CREATE TABLE docs (i INTEGER PRIMARY KEY, docid TEXT NOT NULL UNIQUE, url TEXT, "
            "url_key TEXT UNIQUE, title TEXT NOT NULL, text TEXT NOT NULL)"
        )
        fingerprint = hashlib.sha256()
        texts: list[str] = []
        seen_urls: dict[str, str] = {}
        seen_ids: set[str] = set()
        for i, d in enumerate(docs):
            if not d.docid or len(d.docid) > MAX_DOCID_CHARS or any(c.isspace() for c in d.docid):
                raise CorpusError(
                    f"document {i + 1}: invalid docid {d.docid[:60]!r} (non-empty, no whitespace, "
                    f"at most {MAX_DOCID_CHARS} characters)"
                )
            if d.docid in seen_ids:
                raise CorpusError(f"document {i + 1}: duplicate docid {d.docid!r}")
            seen_ids.add(d.docid)
            key = url_key(d.url) if d.url else None
            if key is not None:
                if key in seen_urls:
                    raise CorpusError(
                        f"document {i + 1}: url {d.url!r} is also the url of docid {seen_urls[key]!r}"
                    )
                seen_urls[key] = d.docid
            db.execute(
                "INSERT INTO docs (i, docid, url, url_key, title, text) VALUES (?, ?, ?, ?, ?, ?)",
                (i, d.docid, d.url, key, d.title, d.text),
            )
            fingerprint.update(json.dumps(d.model_dump(), sort_keys=True).encode())
            texts.append(index_text(d))
            if progress is not None:
                progress(i + 1)
        if not texts:
            raise CorpusError("the corpus is empty: no documents to index")
        db.commit()
        db.close()
        tokens = bm25s.tokenize(texts, stopwords="en", return_ids=False, show_progress=False)
        if not any(tokens):
            raise CorpusError("the corpus has no indexable words (titles and texts are empty or stopwords)")
        retriever = bm25s.BM25()
        retriever.index(tokens, show_progress=False)
        retriever.save(str(tmp / BM25_DIR), show_progress=False)
        meta = {
            "format": FORMAT,
            "name": name or out_dir.name,
            "docs": len(texts),
            "fingerprint": fingerprint.hexdigest(),
            "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "source": source,
        }
        (tmp / META).write_text(json.dumps(meta, indent=2) + "\n")
        if out_dir.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=out_dir.parent))
            os.replace(out_dir, old / "c")
            os.replace(tmp, out_dir)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir


def build_corpus_from_jsonl(
    jsonl: Path, out_dir: Path, *, name: str | None = None, progress: Callable[[int], None] | None = None
) -> Path:
    """Index a corpus JSONL file into ``out_dir`` (see :func:`build_corpus`)."""
    return build_corpus(read_jsonl(jsonl), out_dir, name=name, source=str(Path(jsonl).resolve()),
                        progress=progress)


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
