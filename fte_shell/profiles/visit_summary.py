"""The Visit-Summary baseline: ``search`` and ``visit(url, goal)``, which returns an evidence summary of the
page written by a separate reader model.

The page comes from the shared fetch pipeline (:meth:`FetchService.get_document`; nothing is written to
the workspace), normalized as a workspace file body and cut to ``agent.visit_summary_page_chars``
characters. The reader model is ``agent.summary_model`` when set (its unset ``base_url``/``api_key``/``model``
come from the agent's ``[model]``), else the agent's own client (``ctx.model``), asked once per visit
(:meth:`fte_shell.model.Model.ask`, no tools); its fixed instructions (the system message) are
``fte_shell/prompts/summary_extractor.md``. Output::

    URL: https://example.org/page
    Title: Example page
    Evidence for the goal (summary by the reader model):
    <the reader model's text>
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import ConfigError, ModelError, ToolError
from ..prompts import summary_instructions
from .base import QuestionContext, Tool, ToolProfile, ToolResult, search_tool
from .visit_snippet import VisitArgs, visit_page

if TYPE_CHECKING:
    from ..config import ModelConfig
    from ..model import Model


def summary_prompt(goal: str, head: str, body: str, limit: int) -> tuple[str, bool]:
    """The reader model's question for one visit (its instructions are the system message), and whether
    the page was cut to ``limit`` chars."""
    truncated = len(body) > limit
    page = body[:limit]
    note = f"\n\n[The page continues; only its first {limit:,} of {len(body):,} characters are shown.]" if truncated else ""
    return f"Goal: {goal}\n\nPage:\n{head}\n\n{page.rstrip()}{note}", truncated


def reader_model_config(ctx: QuestionContext) -> ModelConfig:
    """``agent.summary_model`` with its unset endpoint fields (``base_url``, ``api_key``, ``model``) taken
    from the agent's ``[model]``, so ``[agent.summary_model] model = "small"`` reuses the agent's server."""
    reader = ctx.config.agent.summary_model
    assert reader is not None
    agent = ctx.config.model
    inherit = {k: getattr(agent, k) for k in ("base_url", "api_key", "model") if getattr(reader, k) is None}
    return reader.model_copy(update=inherit)


class VisitSummaryProfile(ToolProfile):
    """``search`` + ``visit`` returning a reader model's summary of the page for the goal."""

    name = "visit-summary"

    def __init__(self, ctx: QuestionContext):
        self._own_reader = False
        reader_cfg = ctx.config.agent.summary_model
        if reader_cfg is not None:
            from ..model import ModelClient

            self.reader: Model = ModelClient(reader_model_config(ctx))
            self._own_reader = True
        elif ctx.model is not None:
            self.reader = ctx.model
        else:
            raise ConfigError(
                "profile 'visit-summary' needs a reader model: set [agent.summary_model] or pass the agent's "
                "model client in the question context"
            )
        super().__init__(ctx)

    def _make_tools(self) -> list[Tool]:
        return [*search_tool(self.ctx), Tool("visit", VisitArgs, self.visit)]

    def close(self) -> None:
        """Close the fetch pipeline and the reader model's client when this profile made it."""
        super().close()
        if self._own_reader:
            self._own_reader = False
            self.reader.close()

    def visit(self, args: VisitArgs) -> ToolResult:
        doc, goal, head, body = visit_page(self.fetcher, args)
        if not body:
            return ToolResult(output=f"{head}\n(The page has no text.)", meta={"source": doc.source, "page_chars": 0})
        prompt, truncated = summary_prompt(goal, head, body, self.agent_cfg.visit_summary_page_chars)
        try:
            done = self.reader.ask(prompt, system=summary_instructions())
        except ModelError as e:
            raise ToolError(f"visit failed: the reader model did not answer ({e})") from None
        summary = done.text.strip()
        if not summary:
            raise ToolError("visit failed: the reader model returned no text; try again or visit another page")
        meta = {
            "source": doc.source,
            "page_chars": len(body),
            "truncated": truncated,
            "summary_usage": dict(done.usage),
            "summary_latency_s": round(done.latency_s, 3),
        }
        return ToolResult(output=f"{head}\nEvidence for the goal (summary by the reader model):\n{summary}", meta=meta)
