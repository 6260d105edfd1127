"""The strategies that clear or drop tool results (docs/run.md "Context strategies"):

- :class:`KeepRecent` (``keep_recent:K``): the K most recent tool results verbatim, each older one a
  placeholder naming its tool (its call stays); every turn by default (MiroThinker's ``keep_tool_result``,
  Anthropic's context editing), or only once past the trigger (``keep_recent_every_turn = false``: what
  was cleared stays cleared, so the prompt's prefix only changes at the trigger);
- :class:`DiscardFraction` (``discard_fraction:F``): past the trigger, the oldest steps are dropped until
  at least the share F of the tool calls still sent is gone (DeepSeek-V3.2's discard-75 %);
- :class:`DiscardAll` (``discard_all``): past the trigger, every step is dropped; the model goes on from
  the system prompt, the question and a note that earlier steps were cleared and the workspace still
  holds what was fetched.
"""

from __future__ import annotations

import math

from .base import ContextEdit, ContextView
from .edits import Editing, boundaries, call_ids, trailing_start


class KeepRecent(Editing):
    """``keep_recent``: the ``keep`` most recent tool results verbatim."""

    def wants(self, view: ContextView, over_trigger: bool) -> bool:
        return self.cfg.keep_recent_every_turn or over_trigger

    def act(self, view: ContextView) -> ContextEdit:
        ids = [str(m.get("tool_call_id")) for m in view.messages[self.cut:] if m.get("role") == "tool"]
        older = ids[:max(0, len(ids) - self.cfg.keep)]
        new = [i for i in older if i not in self.cleared]
        self.cleared.update(new)
        return ContextEdit(new, f"{len(new)} older result(s) cleared" if new else None)


class DiscardFraction(Editing):
    """``discard_fraction``: the oldest share of the tool calls still sent dropped, whole steps at a time."""

    def act(self, view: ContextView) -> ContextEdit:
        msgs = view.messages
        n = len(call_ids(msgs, self.cut, trailing_start(msgs)))
        if n == 0:
            return ContextEdit()
        target = math.ceil(self.cfg.fraction * n - 1e-9)
        cut = next(b for b in boundaries(msgs, self.cut) if len(call_ids(msgs, self.cut, b)) >= target)
        dropped = self.drop_to(msgs, cut)
        return ContextEdit(dropped, f"{len(dropped)} of {n} call(s) dropped, oldest first")


class DiscardAll(Editing):
    """``discard_all``: every earlier step dropped."""

    def act(self, view: ContextView) -> ContextEdit:
        dropped = self.drop_to(view.messages, trailing_start(view.messages))
        return ContextEdit(dropped, f"{len(dropped)} call(s) dropped")
