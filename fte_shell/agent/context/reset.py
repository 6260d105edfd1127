"""The strategies that start the conversation again past the trigger (docs/run.md "Context strategies"):

- :class:`Summary` (``summary``): the steps so far replaced by a summary a model writes through
  ``Model.ask`` (the agent's own, or ``[agent.context.summary_model]``); its tokens go into
  ``result.json``'s ``summary_usage`` and its cost into ``cost_usd`` at its own price, never into the
  agent's ``usage``. A summary that fails (the model errs or says nothing) drops the steps as
  ``discard_all`` does, and the edit says so;
- :class:`WorkspaceReset` (``workspace_reset``): the steps so far dropped; the model starts again from
  the question plus what the workspace holds (``list_fetched``'s listing) and, for a profile that has
  one (the shell's /tmp), the files it wrote (:class:`~fte_shell.profiles.ScratchFiles`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...config import ContextConfig, ModelConfig
from ...errors import ModelError
from ...model import Model, ModelClient
from ...model.prices import price_for
from ...profiles import ScratchFiles
from ...workspace import Workspace
from ..replies import ESTIMATE_CHARS_PER_TOKEN
from .base import ContextEdit, ContextView
from .edits import Editing, call_ids, trailing_start

SUMMARY_INSTRUCTIONS = (
    "You condense the working notes of a research agent whose context window is full. Write a summary it "
    "can continue from: what it has established so far (facts with their sources: URLs or workspace file "
    "paths), what it tried that did not work, and what is still open. Be specific and brief; do not answer "
    "the question yourself if it is not yet established."
)
SUMMARY_NOTE = ("Your earlier steps were replaced by this summary to free the context window{ws}:\n\n"
                "{summary}")
RESET_NOTE = ("Your earlier steps were cleared to free the context window: continue from the question and "
              "what you have gathered. The workspace holds (list_fetched):\n{listing}")
SCRATCH_NOTE = "\n\nFiles you wrote under /tmp:\n{files}"
SCRATCH_MAX = 50
"""At most this many scratch files are listed (then a count of the rest)."""
OBSERVATION_CHARS = 4000
"""Each tool result is cut to this many characters in the summary's transcript."""
SUMMARY_MAX_TOKENS = 2048


def transcript(messages: list[dict[str, Any]], limit: int | None) -> str:
    """The steps as text for the summary's writer; only the last ``limit`` characters when longer."""
    lines = []
    for m in messages:
        role = m.get("role")
        if role == "assistant":
            if isinstance(m.get("content"), str) and m["content"].strip():
                lines.append(f"Agent: {m['content'].strip()}")
            lines += [f"Agent called {(tc.get('function') or {}).get('name')}({(tc.get('function') or {}).get('arguments')})"
                      for tc in m.get("tool_calls") or []]
        elif role == "tool":
            text = str(m.get("content") or "")
            cut = f" … [{len(text) - OBSERVATION_CHARS:,} more characters]" if len(text) > OBSERVATION_CHARS else ""
            lines.append(f"Result:\n{text[:OBSERVATION_CHARS]}{cut}")
        elif role == "user":
            lines.append(f"Notice: {m.get('content')}")
    text = "\n\n".join(lines)
    if limit is not None and len(text) > limit:
        text = "[… earlier steps omitted]\n" + text[len(text) - limit:]
    return text


def writer_config(cfg: ContextConfig, agent: ModelConfig) -> ModelConfig | None:
    """``summary_model`` with its unset ``base_url``/``api_key``/``model`` taken from the agent's (None: the
    agent's own client writes the summary)."""
    if cfg.summary_model is None:
        return None
    inherit = {k: getattr(agent, k) for k in ("base_url", "api_key", "model") if getattr(cfg.summary_model, k) is None}
    return cfg.summary_model.model_copy(update=inherit)


class Summary(Editing):
    """``summary``: the steps so far replaced by a model's summary."""

    def __init__(self, cfg: ContextConfig, model: ModelConfig):
        super().__init__(cfg, model)
        self.writer = writer_config(cfg, model)
        self.summary: str | None = None

    def state(self) -> dict[str, Any]:
        return {**super().state(), "summary": self.summary}

    def restore(self, state: dict[str, Any]) -> None:
        """Take back a :meth:`state`: the summary is re-used, never written again."""
        super().restore(state)
        self.summary = state.get("summary")

    def ask(self, view: ContextView, prompt_of: Callable[[int | None], str]) -> tuple[str, dict[str, int]]:
        """The summary's text ("" when the writer said nothing) and usage (raises :class:`ModelError`); the
        writer's window bounds the prompt."""
        own = self.writer is not None
        model: Model = ModelClient(self.writer) if self.writer is not None else view.model
        try:
            info = model.server_info() if own else view.server
            window = info.context_window if info is not None else None
            reply = min(SUMMARY_MAX_TOKENS, (self.writer or self.model_cfg).max_tokens, *([window // 4] if window else []))
            room = window - reply - self.model_cfg.context_margin - 200 if window else None  # 200: instructions
            done = model.ask(prompt_of(room * ESTIMATE_CHARS_PER_TOKEN if room else None),
                             system=SUMMARY_INSTRUCTIONS, max_tokens=reply)
        finally:
            if own:
                model.close()
        usage = dict(done.usage)
        view.episode.count_side_usage(usage, price_for(self.writer or self.model_cfg), done.usage_details)
        return done.text.strip(), usage

    def act(self, view: ContextView) -> ContextEdit:
        msgs = view.messages
        end = trailing_start(msgs)
        if end <= self.cut:
            return ContextEdit()
        question = str(msgs[1].get("content") or "")
        before = f"Summary of the steps before these:\n{self.summary}\n\n" if self.summary else ""

        def prompt_of(limit: int | None) -> str:
            head = f"Question: {question}\n\n{before}Steps:\n"
            return head + transcript(msgs[self.cut:end], None if limit is None else max(1000, limit - len(head)))

        usage = None
        try:
            text, usage = self.ask(view, prompt_of)
            failure = None if text else "the writer returned no text"
        except ModelError as e:
            failure = str(e)
        if failure is not None:
            dropped = self.drop_to(msgs, end)
            return ContextEdit(dropped, f"summary failed ({failure}); {len(dropped)} call(s) dropped without one",
                               usage=usage)
        dropped = [i for i in call_ids(msgs, self.cut, end) if i not in self.cleared]
        self.cleared.update(dropped)
        self.cut, self.summary = end, text
        ws = "; the workspace still holds every document you fetched" if self.workspace else ""
        self.note = SUMMARY_NOTE.format(ws=ws, summary=text)
        return ContextEdit(dropped, f"{len(dropped)} call(s) summarized in {len(text):,} characters", usage=usage)


class WorkspaceReset(Editing):
    """``workspace_reset``: start again from the question and what the workspace holds."""

    def act(self, view: ContextView) -> ContextEdit:
        ep, end = view.episode, trailing_start(view.messages)
        if end <= self.cut:
            return ContextEdit()
        dropped = self.drop_to(view.messages, end)
        if not self.workspace:  # a profile without a workspace: nothing to list (the note of discard_all)
            return ContextEdit(dropped, f"{len(dropped)} call(s) dropped; no workspace to list")
        files = ep.profile.scratch_files() if isinstance(ep.profile, ScratchFiles) else []
        note = RESET_NOTE.format(listing=Workspace(ep.workspace_dir).listing_text())
        if files:
            rest = f"\n… and {len(files) - SCRATCH_MAX} more" if len(files) > SCRATCH_MAX else ""
            note += SCRATCH_NOTE.format(files="\n".join(files[:SCRATCH_MAX]) + rest)
        self.note = note
        return ContextEdit(dropped, f"{len(dropped)} call(s) dropped; the workspace listed, "
                                    f"{len(files)} scratch file(s)")
