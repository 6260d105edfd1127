"""The workspace: THE one owner of the on-disk format of fetched documents.

* :mod:`.document`: :class:`Document` (what one fetch produced), :class:`FetchRecord` (the record line a
  fetch prints), :class:`Entry` (one document held).
* :mod:`.format`: canonical URLs, file names and the file content (header + normalized body);
  :func:`render` and its inverse :func:`parse_document`.
* :mod:`.store`: :class:`Workspace`, the directory and its only writer (atomic, idempotent, thread-safe).

Every writer (the gateway behind the shell ``fetch`` helper, the structured ``fetch`` tool) goes through
:class:`Workspace`, so the same page snapshot produces byte-identical files under every interface.
"""

from __future__ import annotations

from .document import Document, Entry, FetchRecord, Kind
from .format import (
    canonical_url,
    docid_prefix,
    filename_for,
    host_slug,
    one_line,
    parse_document,
    render,
    url_title,
)
from .store import Workspace

__all__ = [
    "Document",
    "Entry",
    "FetchRecord",
    "Kind",
    "Workspace",
    "canonical_url",
    "docid_prefix",
    "filename_for",
    "host_slug",
    "one_line",
    "parse_document",
    "render",
    "url_title",
]
