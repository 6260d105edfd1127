"""What goes into a workspace and what comes out: :class:`Document` (what one fetch produced),
:class:`FetchRecord` (the result of storing one, as the caller reports it) and :class:`Entry` (one document
held). Their file format is :mod:`fte_shell.workspace.format`.

Record line (what ``fetch`` prints, tab-free and greppable; two spaces between fields)
    ``/work/docs-python-org-1f0c2a9b3d4e5f60.txt  12,345 chars  new  https://docs.python.org/3/  "Title"``
    where the third field is ``new`` (downloaded now) or ``held`` (already in the workspace; nothing was
    downloaded).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

Kind = Literal["url", "docid"]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class Document(_Frozen):
    """What one fetch produced (before it is stored)."""

    source: str
    """The canonical URL (``kind == "url"``) or the local-corpus docid (``kind == "docid"``)."""

    kind: Kind
    """``url`` for web pages, ``docid`` for local-corpus documents."""

    title: str
    """Page title (may be empty)."""

    text: str
    """Normalized plain-text body."""

    retrieved_at: datetime
    """When the page was downloaded (UTC); a shared page snapshot keeps its original time."""


class FetchRecord(_Frozen):
    """The result of materializing one document, as the caller reports it."""

    path: str
    """Path as the agent sees it, e.g. ``/work/example-com-a1b2c3d4e5f6a7b8.txt``."""

    chars: int
    """Characters of the body (header excluded)."""

    new: bool
    """True if this call wrote the file; False if the workspace already held it."""

    source: str
    """Canonical URL or docid."""

    title: str
    """Title from the header."""

    retrieved_at: datetime | None = None
    """The file's ``Retrieved:`` time when this call wrote it (``new``); None for a document already held."""

    def line(self) -> str:
        """The one-line record printed to the agent (the record line of the module docstring)."""
        state = "new" if self.new else "held"
        return f'{self.path}  {self.chars:,} chars  {state}  {self.source}  "{self.title}"'


class Entry(_Frozen):
    """One document held by the workspace."""

    path: str
    """Path as the agent sees it."""

    source: str
    """Canonical URL or docid."""

    title: str
    """Title from the header."""

    chars: int
    """Characters of the body."""

    def line(self) -> str:
        """One listing line: ``path  N chars  source  "title"``."""
        return f'{self.path}  {self.chars:,} chars  {self.source}  "{self.title}"'
