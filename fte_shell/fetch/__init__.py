"""The fetch pipeline: policy (SSRF checks), HTTP download, conversion, and the per-question service.

``FetchService(workspace, policy, *, local=None, page_cache=None)`` is the entry point; see
``docs/fetch.md``. crawl4ai is imported lazily, inside the conversion worker processes.
"""

from __future__ import annotations

from .pages import ClosedWorld, PageArchive, PageCache, PageSource
from .policy import Target, check_url
from .service import FetchService

__all__ = ["ClosedWorld", "FetchService", "PageArchive", "PageCache", "PageSource", "Target", "check_url"]
