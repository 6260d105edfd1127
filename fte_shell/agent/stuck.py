"""The stuck detector (``agent.stuck_repeats``): the same tool call with the same observation K times in a
row gets one notice; one more stops the run (stop reason ``stuck``).

A *call* is its tool name and its arguments (parsed JSON, keys sorted, so spacing and key order do not
matter; arguments that are not a JSON object compare as sent); its *observation* is the text the model was
shown. The streak counts consecutive tool calls of the run, in order, across turns (several calls in one
reply count one by one); a reply without tool calls neither extends nor breaks it. The loop asks for a
verdict after each turn's calls have run: when the streak still going has reached K and the model was not
told yet, a notice (a ``nudge`` event of kind ``stuck``, appended as a user turn after the turn's tool
results); when that streak has grown since its notice, ``stop``. A different call, or the same call with a
different observation, starts a new streak (and may earn a new notice). The rule reads only names,
arguments and observation text, so it is the same for every profile: a shell command's exit status and a
structured tool's error flag play no part.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Literal

from ..profiles import parse_arguments

STUCK_NOTICE = (
    "You have made the same {tool} call with the same arguments {n} times in a row, and it gave the same "
    "result each time: repeating it will not tell you anything new. Do something different (another "
    "query, command, file or tool), or give your final answer inside <answer></answer>. If your next call "
    "is this same call with the same result again, the run stops."
)


def notice_text(tool: str, n: int) -> str:
    """The notice sent after ``n`` identical calls of ``tool``."""
    return STUCK_NOTICE.format(tool=tool, n=n)


def call_key(name: str, arguments: Any, observation: str) -> str:
    """What makes two calls "the same call with the same observation" (a digest: observations may be long)."""
    parsed, _ = parse_arguments(arguments)
    args = json.dumps(parsed, sort_keys=True, ensure_ascii=False) if parsed is not None else str(arguments)
    blob = json.dumps([name, args, observation], ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@dataclass
class CallStreak:
    """The run of identical calls going on now."""

    key: str | None = None
    """:func:`call_key` of the last call."""
    tool: str = ""
    """Its tool name."""
    count: int = 0
    """Identical calls in a row, the last one included."""
    noticed_at: int | None = None
    """``count`` when this streak got its notice (None: not yet)."""

    def see(self, call: dict[str, Any], observation: str) -> None:
        """Count one executed call (``{function: {name, arguments}}``, arguments raw) and its observation."""
        fn = call.get("function") or {}
        name = str(fn.get("name") or "")
        key = call_key(name, fn.get("arguments"), observation)
        if key == self.key:
            self.count += 1
            return
        self.key, self.tool, self.count, self.noticed_at = key, name, 1, None

    def verdict(self, repeats: int | None) -> Literal["notice", "stop"] | None:
        """After a turn's calls: ``notice`` once the streak reaches ``repeats`` (it is then marked noticed),
        ``stop`` when it grew after its notice, else None (also when ``repeats`` is None: off)."""
        if repeats is None or self.count < repeats:
            return None
        if self.noticed_at is None:
            self.noticed_at = self.count
            return "notice"
        return "stop" if self.count > self.noticed_at else None
