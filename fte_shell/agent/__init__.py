"""The agent: the ReAct loop (:mod:`.loop`: ask → context → apply, driving an
:class:`~fte_shell.episode.Episode`), what is sent of the conversation (:mod:`.context`), what it makes
of a reply (:mod:`.replies`) and what it counts to decide when to stop (:mod:`.state`)."""

from .context import ContextEdit, ContextPolicy, ContextView, KeepAll, Sent, estimate_request
from .loop import Agent, RunOver
from .replies import CUT_NOTICE, FINAL_ANSWER_REQUEST, NUDGE, extract_answer, find_answer
from .state import LoopState

__all__ = [
    "CUT_NOTICE", "FINAL_ANSWER_REQUEST", "NUDGE", "Agent", "ContextEdit", "ContextPolicy", "ContextView", "KeepAll",
    "LoopState", "RunOver", "Sent", "estimate_request", "extract_answer", "find_answer",
]
