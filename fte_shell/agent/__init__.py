"""The agent: the ReAct loop (:mod:`.loop`), what it makes of a reply (:mod:`.replies`), one tool call
(:mod:`.tools`), and what a run counts and produces (:mod:`.result`)."""

from .loop import Agent, Stop
from .replies import CUT_NOTICE, FINAL_ANSWER_REQUEST, NUDGE, extract_answer, find_answer
from .result import TOOL_USAGE_META, USAGE_KEYS, LoopState, RunResult

__all__ = [
    "CUT_NOTICE", "FINAL_ANSWER_REQUEST", "NUDGE", "TOOL_USAGE_META", "USAGE_KEYS", "Agent", "LoopState",
    "RunResult", "Stop", "extract_answer", "find_answer",
]
