"""Where a page comes from besides the network: a local corpus, the sweep's page cache, a snapshot.

* :class:`PageSource`: a local corpus that produces documents by docid or URL without HTTP;
  :class:`ClosedWorld` wraps one as a run's whole world (every other URL is refused).
* :class:`PageCache`: converted documents by canonical URL on disk, shared by every profile of a sweep.
* :class:`PageArchive`: a page store that records how pages were fetched and replays them (a snapshot,
  :mod:`fte_shell.snapshot`); the fetch service hands it the download's exchanges.

:class:`fte_shell.fetch.service.FetchService` asks them in this order (see its module docstring).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pydantic import ValidationError

from ..workspace import Document, canonical_url


@runtime_checkable
class PageSource(Protocol):
    """A local corpus that can produce documents without HTTP."""

    def lookup(self, ref: str) -> Document | None:
        """The document for a docid or URL, or None if this source does not know ``ref``."""
        ...


class ClosedWorld:
    """A local corpus as the whole world of a run: fetch refuses every URL it does not hold (never
    fetched live, never served from a page cache or snapshot). ``run_question`` puts a run's corpus in
    one unless ``search.open_web``."""

    closed_world = True

    def __init__(self, inner: PageSource):
        self.inner = inner

    def lookup(self, ref: str) -> Document | None:
        return self.inner.lookup(ref)


@runtime_checkable
class PageArchive(Protocol):
    """A page store that records how pages were fetched and replays them (:mod:`fte_shell.snapshot`)."""

    def capture(self, canon: str) -> AbstractContextManager[Any]:
        """A lease whose ``document`` answers ``canon``, else None: then download with ``hop`` as the
        exchange hook and hand the document to ``store(doc)``, which returns it as replay will give it.
        Raises :class:`FetchRefused` for a recorded refusal or a replay miss."""
        ...


class PageCache:
    """Converted documents by canonical URL, on disk (``<sha256>.json``), shared by every profile of a
    sweep so they all see the same page snapshot. Writes are atomic; unreadable entries are ignored."""

    def __init__(self, directory: Path | str):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)

    def _path(self, url: str) -> Path:
        return self.dir / (hashlib.sha256(canonical_url(url).encode("utf-8")).hexdigest() + ".json")

    def get(self, url: str) -> Document | None:
        """The cached document for ``url`` (any spelling of the canonical URL), or None."""
        try:
            return Document.model_validate_json(self._path(url).read_bytes())
        except (FileNotFoundError, ValidationError, ValueError, OSError):
            return None

    def put(self, url: str, doc: Document) -> None:
        """Store ``doc`` under ``url`` atomically (an existing entry is replaced)."""
        path = self._path(url)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".part", dir=self.dir)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(doc.model_dump_json())
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
