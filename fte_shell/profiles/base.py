"""What every profile shares: the :class:`Profile` seam, :class:`ToolResult`, :class:`QuestionContext`, and
:class:`ToolProfile`, a base class that turns a list of typed tools into OpenAI function-tool schemas and
validates the model's arguments before a handler runs.

A tool is a pydantic model of its arguments (``extra="forbid"``) plus a handler; the schema the model sees
is built from its fields and ``fte_shell/prompts/tools.toml``, so schema and validation always agree.

Errors the model can act on (unknown tool, bad arguments, bad regex, refused URL) come back as
``ToolResult(error=True)``; errors the user must fix (no Docker, no endpoint, bad config) are raised.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..config import RunConfig
from ..errors import ConfigError, SearchUnavailable, ToolError
from ..plugins import Registry
from ..prompts import ToolDescriptions, profile_addendum
from ..record.events import SearchFact
from ..world import RunWorld
from .schema import ToolArgs, describe_args, json_type, validation_problem
from .sources import SandboxRelease, SandboxSource

if TYPE_CHECKING:  # imported for annotations only: these modules are heavy or optional
    from ..fetch import FetchService
    from ..model import Model

IMPLEMENTATIONS: Registry[Callable[[QuestionContext], Profile]] = Registry("profile", {
    "shell": f"{__package__}.shell:ShellProfile",
    "fte": f"{__package__}.fte:FteProfile",
    "snippet-only": f"{__package__}.snippet_only:SnippetOnlyProfile",
    "visit-snippet": f"{__package__}.visit_snippet:VisitSnippetProfile",
    "visit-summary": f"{__package__}.visit_summary:VisitSummaryProfile",
    "open-find": f"{__package__}.open_find:OpenFindProfile",
    "fte-no-grep": f"{__package__}.fte_without:FteNoGrepProfile",  # ablation arms (paper Table 5)
    "fte-no-read": f"{__package__}.fte_without:FteNoReadProfile",
    "fte-single-grep": f"{__package__}.fte_single_grep:FteSingleGrepProfile",
    "standard": f"{__package__}.standard:StandardProfile",  # BrowseComp-Plus's own scaffold and answer format
})
"""The profiles: each built-in name -> its class (imported on first use); a third-party profile is
``agent.profile = "module:attr"``, a class (or factory) taking a :class:`QuestionContext`."""

PROFILES: tuple[str, ...] = tuple(IMPLEMENTATIONS)
"""The built-in profile names (:func:`make_profile` and ``agent.profile`` take ``module:attr`` too)."""



def parse_arguments(raw: Any) -> tuple[dict[str, Any] | None, str | None]:
    """Parse tool-call arguments: ``(dict, None)`` or ``(None, problem)``; empty means ``{}``."""
    if isinstance(raw, dict):
        return raw, None
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}, None
    try:
        value = json.loads(raw)
    except (TypeError, json.JSONDecodeError) as e:
        return None, f"are not valid JSON ({e})"
    if not isinstance(value, dict):
        return None, f"must be a JSON object, got {type(value).__name__}"
    return value, None


class ToolResult(BaseModel):
    """What one tool call produced."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    output: str
    """The observation shown to the model."""

    error: bool = False
    """True when the call failed (unknown tool, bad arguments, refused fetch…); ``output`` says why."""

    meta: dict[str, Any] = Field(default_factory=dict)
    """Machine-readable facts for the trajectory and the metrics (exit code, path, match count…)."""


@dataclass
class QuestionContext:
    """Everything a profile needs for one question. Built by the episode (`fte_shell.episode.Episode.open`)."""

    config: RunConfig
    """The run's configuration (the agent's bounds, the sandbox, the fetch policy, search defaults)."""

    workspace_dir: Path
    """Host directory of this question's workspace (mounted at /work in the shell profile)."""

    world: RunWorld = dataclasses.field(default_factory=RunWorld)
    """The run's search, page source (local corpus) and page cache or snapshot view
    (:mod:`fte_shell.world`): shared by every profile of a comparison, so each sees the same results and
    page text. The default: no search, web only, no cache."""

    run_id: str = ""
    """Identifier of the run (labels the shell profile's container)."""

    model: Model | None = None
    """The agent's model client; visit-summary uses it when ``agent.summary_model`` is None."""

    sandbox_source: SandboxSource | None = None
    """Where the shell profile gets its box (a pool's ready box: ``SandboxPool.acquire``, used by
    ``fte_shell.rl`` and ``fte-shell mcp --warm``); the profile closes it, keeping a copy of its /work as the
    run's workspace. None: the profile starts its own."""

    sandbox_release: SandboxRelease | None = None
    """Where the shell profile gives back a box of ``sandbox_source`` once the run's workspace is copied
    out of it (``SandboxPool.release``: reset and handed out again; ``fte_shell.rl``'s box reuse), instead
    of closing it. None: the profile closes it."""


@runtime_checkable
class Profile(Protocol):
    """A set of tools plus their executor. The agent loop sees only this."""

    name: str

    def tools(self) -> list[dict[str, Any]]:
        """OpenAI function-tool schemas (``[{"type": "function", "function": {...}}]``)."""
        ...

    def system_addendum(self) -> str:
        """Profile-specific text appended to the system prompt body ("" for none)."""
        ...

    def execute(self, name: str, args: dict[str, Any]) -> ToolResult:
        """Run tool ``name`` with decoded JSON ``args``; never raises for the model's mistakes."""
        ...

    def close(self) -> None:
        """Release what the profile holds (container, pools). Idempotent."""
        ...


@runtime_checkable
class ScratchFiles(Protocol):
    """A profile whose model writes files beside the workspace (shell's /tmp), listed by ``workspace_reset``."""

    def scratch_files(self) -> list[str]:
        """One line per file the model wrote (its path and size), oldest first; [] when none."""
        ...


@dataclass(frozen=True)
class Tool:
    """One tool of a profile."""

    name: str
    """Function name the model calls."""

    args: type[ToolArgs]
    """Pydantic model of the arguments (its fields become the JSON schema's properties)."""

    handler: Callable[[Any], ToolResult | str]
    """Called with a validated ``args`` instance; a plain string means a successful observation."""


class ToolProfile:
    """Base class of the built-in profiles: typed tools, schemas from ``tools.toml``, safe dispatch.

    Subclasses set :attr:`name` and implement :meth:`_make_tools` (and extend :meth:`close` if they
    hold resources of their own). Profiles that read pages use :attr:`fetcher`.
    """

    name: ClassVar[str] = ""
    uses_box: ClassVar[bool] = False
    """Whether it runs its questions in a box (:func:`runs_in_a_box`)."""

    def __init__(self, ctx: QuestionContext):
        self.ctx = ctx
        self._fetcher: FetchService | None = None
        self.agent_cfg = ctx.config.agent
        self._descriptions = ToolDescriptions.load(self.agent_cfg.tool_descriptions_file, PROFILES)
        self._tools: dict[str, Tool] = {t.name: t for t in self._make_tools()}
        self._schemas = [self._schema(t) for t in self._tools.values()]

    # --- to override ---------------------------------------------------------------------------------
    def _make_tools(self) -> list[Tool]:
        raise NotImplementedError

    def close(self) -> None:
        """Release held resources (the fetch pipeline, if one was opened)."""
        fetcher, self._fetcher = self._fetcher, None
        if fetcher is not None:
            fetcher.close()

    @property
    def fetcher(self) -> FetchService:
        """The question's fetch pipeline (:func:`make_fetch_service`), created on first use."""
        if self._fetcher is None:
            self._fetcher = make_fetch_service(self.ctx)
        return self._fetcher

    # --- Profile -------------------------------------------------------------------------------------
    def system_addendum(self) -> str:
        return profile_addendum(self.name)

    def tools(self) -> list[dict[str, Any]]:
        return [dict(s) for s in self._schemas]

    def execute(self, name: str, args: dict[str, Any]) -> ToolResult:
        tool = self._tools.get(name)
        if tool is None:
            known = ", ".join(self._tools)
            return ToolResult(output=f"Error: unknown tool '{name}'. Available tools: {known}.", error=True)
        if args is None:
            args = {}
        if not isinstance(args, dict):
            return ToolResult(
                output=f"Error: invalid arguments for {name}: expected a JSON object, got {type(args).__name__}. "
                f"Expected: {describe_args(tool.args)}.",
                error=True,
            )
        args = {k: v for k, v in args.items() if v is not None}  # null = "not given" (models send it)
        try:
            parsed = tool.args.model_validate(args)
        except ValidationError as e:
            return ToolResult(output=f"Error: {validation_problem(tool.name, tool.args, e)}", error=True)
        try:
            out = tool.handler(parsed)
        except ToolError as e:
            return ToolResult(output=f"Error: {e}", error=True, meta={"error_type": e.__class__.__name__})
        return out if isinstance(out, ToolResult) else ToolResult(output=out)

    # --- schema --------------------------------------------------------------------------------------
    def placeholder_values(self) -> dict[str, object]:
        """Values of the ``{name}`` placeholders in tool descriptions (the configured bounds)."""
        a = self.agent_cfg
        return {
            "grep_max_matches": a.grep_max_matches,
            "find_max_matches": a.grep_max_matches,
            "grep_context": a.grep_context,
            "grep_max_context": a.grep_max_context,
            "read_max_lines": a.read_max_lines,
            "read_max_kb": max(1, round(a.read_max_bytes / 1000)),
            "visit_snippet_chars": a.visit_snippet_chars,
            "open_window_lines": a.open_window_lines,
            "search_n": self.ctx.config.search.num_results,
            "search_max_n": a.search_max_results,
        }

    def _schema(self, tool: Tool) -> dict[str, Any]:
        text = self._descriptions.describe(self.name, tool.name, self.placeholder_values())
        fields = tool.args.model_fields
        unknown = self._descriptions.overridden_parameters(self.name, tool.name) - set(fields)
        if unknown:
            raise ConfigError(
                f"tool descriptions file: tool '{tool.name}' has no parameter(s) {', '.join(sorted(unknown))} "
                f"(its parameters: {', '.join(fields) or 'none'})"
            )
        props: dict[str, Any] = {}
        required: list[str] = []
        for pname, field in fields.items():
            prop = json_type(field.annotation)
            if pname in text.parameters:
                prop["description"] = text.parameters[pname]
            props[pname] = prop
            if field.is_required():
                required.append(pname)
        params = {"type": "object", "properties": props, "required": required, "additionalProperties": False}
        return {
            "type": "function",
            "function": {"name": tool.name, "description": text.description, "parameters": params},
        }


# --- helpers shared by several profiles ---------------------------------------------------------------
class SearchArgs(ToolArgs):
    """Arguments of ``search``."""

    query: str
    """What to search for."""

    n: int | None = None
    """Number of results (default: ``search.num_results``)."""


def run_search(ctx: QuestionContext, args: SearchArgs) -> ToolResult:
    """``search`` as every non-shell profile offers it: the backend's results rendered by
    :func:`fte_shell.search.format_results` — the same text the shell helper prints."""
    from ..search import format_results
    from ..search.base import cache_hit

    if ctx.world.search is None:
        raise ToolError("search is not available in this run (no search backend is configured)")
    query = args.query.strip()
    if not query:
        raise ToolError("search needs a non-empty query")
    n = ctx.config.search.num_results if args.n is None else args.n
    if n < 1:
        raise ToolError(f"n must be at least 1, got {n}")
    n = min(n, ctx.config.agent.search_max_results)
    try:
        results = ctx.world.search.search(query, n)
    except SearchUnavailable as e:  # same wording as the shell helper's gateway
        raise ToolError(f"search unavailable: {one_line(str(e))}") from None
    fact = SearchFact(query=query, n=n, backend=ctx.world.search.name, urls=[r.url for r in results],
                      cache_hit=cache_hit(results))
    meta = {"query": query, "n": n, "results": len(results), "searches": [fact.model_dump()]}
    return ToolResult(output=format_results(query, results), meta=meta)


def search_tool(ctx: QuestionContext) -> list[Tool]:
    """The ``search`` tool, or no tool when the run has no search backend."""
    if ctx.world.search is None:
        return []
    return [Tool("search", SearchArgs, lambda a: run_search(ctx, a))]


def make_fetch_service(ctx: QuestionContext) -> FetchService:
    """The question's :class:`~fte_shell.fetch.FetchService` over its workspace (same pipeline as the
    shell's ``fetch`` helper)."""
    from ..fetch import FetchService
    from ..workspace import Workspace

    return FetchService(
        Workspace(ctx.workspace_dir),
        ctx.config.sandbox.fetch_policy,
        local=ctx.world.page_source,
        page_cache=ctx.world.page_cache,
    )


_WS_RE = re.compile(r"\s+")


def one_line(text: str, limit: int = 300) -> str:
    """``text`` with whitespace runs collapsed, cut to ``limit`` characters (for error messages)."""
    t = _WS_RE.sub(" ", text).strip()
    return t if len(t) <= limit else t[: limit - 1] + "…"


def check_profile_name(name: str) -> None:
    """Raise :class:`ConfigError` naming the choices when ``name`` is neither a profile nor a reference."""
    if not IMPLEMENTATIONS.knows(name):
        raise ConfigError(f"unknown profile {name!r} (choose one of: {', '.join(PROFILES)}; or a third-party "
                          "one as module:attr)")


def runs_in_a_box(name: str) -> bool:
    """Whether profile ``name`` runs its questions in a box: its class's ``uses_box`` (``shell``; a
    third-party profile that opens one sets it too, else it is taken as False). A sweep of such a profile
    probes the sandbox engine before its first run, and ``--corpus-arm`` gives it an arm with ``/corpus``."""
    check_profile_name(name)
    return getattr(IMPLEMENTATIONS.get(name), "uses_box", False) is True


def make_profile(name: str, ctx: QuestionContext) -> Profile:
    """The profile called ``name`` for one question. Raises :class:`ConfigError` for an unknown name."""
    check_profile_name(name)
    return IMPLEMENTATIONS.get(name)(ctx)
