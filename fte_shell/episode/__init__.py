"""One question's episode (:class:`Episode`): its world binding, run record, profile and sandbox, driven
by anything — fte-shell's loop, a script, an MCP server, an RL trainer (docs/library.md) — and what a
run produces (:class:`RunResult`, ``result.json``)."""

from .core import Episode, check_question, new_run_id, slugify
from .result import TOOL_USAGE_META, USAGE_KEYS, RunResult, Tally, add_usage
from .signals import sigterm_as_interrupt, sigterm_as_interrupt_if_unowned

__all__ = [
    "TOOL_USAGE_META", "USAGE_KEYS", "Episode", "RunResult", "Tally", "add_usage", "check_question", "new_run_id",
    "sigterm_as_interrupt", "sigterm_as_interrupt_if_unowned", "slugify",
]
