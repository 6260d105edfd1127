"""The Snippet-Only baseline: ``search`` and nothing else (the model never sees a whole page)."""

from __future__ import annotations

from ..errors import ConfigError
from .base import QuestionContext, Tool, ToolProfile, search_tool


class SnippetOnlyProfile(ToolProfile):
    """Only ``search``: titles, URLs and snippets, rendered exactly as the shell helper prints them."""

    name = "snippet-only"

    def __init__(self, ctx: QuestionContext):
        if ctx.world.search is None:
            raise ConfigError(
                "profile 'snippet-only' needs a search backend: set SERPER_API_KEY or [search] corpus = DIR"
            )
        super().__init__(ctx)

    def _make_tools(self) -> list[Tool]:
        return search_tool(self.ctx)
