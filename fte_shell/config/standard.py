"""``[agent.standard]``: the ``standard`` profile — BrowseComp-Plus's own tools and answer format (its
leaderboard's "Standard" scaffold). The defaults are the benchmark's: k = 5 hits, snippets of the first 512
Qwen3 tokens, ``get_document`` offered; the other values are the benchmark's variants."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from .base import StrictModel


class StandardOptions(StrictModel):
    """The ``standard`` profile's settings (docs/browsecomp-plus.md)."""

    k: int = Field(default=5, ge=1, le=100)
    """Hits per ``search`` call (fixed for the run, as the benchmark's server fixes it; the model cannot ask
    for more)."""

    snippet_max_tokens: int = 512
    """A hit's snippet: the first this many tokens of the document under the Qwen3 tokenizer (decoded back to
    text, as the benchmark's server cuts it); 0 or less = the whole document (the server's ``-1``)."""

    get_document: bool = True
    """Offer ``get_document(docid)`` (the full text of a document); False = ``search`` only (the benchmark's
    search-only variant, with its own query template)."""

    citations: bool = True
    """Ask for ``[docid]`` citations in the explanation. Only the search-only variant has a template without
    them; with ``get_document`` the benchmark always asks for citations."""

    prompts_file: Path | None = None
    """The benchmark's ``search_agent/prompts.py`` (from a clone of texttron/BrowseComp-Plus), read for its
    query template (parsed, never executed). None: ``bench browsecomp-plus:DIR`` takes ``DIR``'s own when
    ``DIR`` is the clone; else fte-shell's own wording, and the run says it is not the leaderboard's format."""

    answer_format: str = "bcplus"
    """The answer format plugin (``Explanation:``/``Exact Answer:``/``Confidence:``, its templates and parser):
    ``bcplus`` (BrowseComp-Plus's), or a third-party one as ``module:attr`` (fte_shell/profiles/answer_format.py)."""
