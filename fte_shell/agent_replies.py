"""What the loop makes of one reply: the answer in it, the message kept in the conversation, the notices
it sends back, and the prompt-size estimate that fits ``max_tokens`` to the context window."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from .model import Completion

ANSWER_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_OPEN_RE = re.compile(r"<answer>", re.IGNORECASE)

NUDGE = (
    "Your reply had no tool call and no final answer. Either call one of your tools to keep researching, "
    "or give your final answer inside <answer></answer>."
)

CUT_NOTICE = (
    "Your last reply was cut off because it reached the maximum reply length (max_tokens), so it was not "
    "used. Reply again more briefly: call one of your tools, or give your final answer inside "
    "<answer></answer>."
)

FINAL_ANSWER_REQUEST = (
    "The conversation has reached the model's context window: no more tool calls are possible. Give your "
    "final answer now, inside <answer></answer>, based on what you have found."
)

ESTIMATE_CHARS_PER_TOKEN = 3
"""New messages are estimated at one token per this many characters of their JSON (deliberately high:
most tokenizers give 3.5–4.5 characters per token on English)."""


def find_answer(text: str | None) -> tuple[str | None, bool]:
    """``(answer, unclosed)`` of a reply: the text of the last non-empty ``<answer>…</answer>``; or, when the
    last ``<answer>`` is never closed, the (non-empty) text after it, with ``unclosed`` True. An empty
    ``<answer></answer>`` is not an answer."""
    if not text:
        return None, False
    opens = list(_OPEN_RE.finditer(text))
    if opens:
        tail = text[opens[-1].end():]
        if "</answer>" not in tail.lower():
            cand = tail.strip()
            if cand:
                return cand, True
    found = [a.strip() for a in ANSWER_RE.findall(text)]
    found = [a for a in found if a]
    return (found[-1], False) if found else (None, False)


def extract_answer(text: str | None) -> str | None:
    """The answer of a reply (see :func:`find_answer`), or None."""
    return find_answer(text)[0]


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


def kept_message(
    c: Completion, passback: str, seen_fields: list[str]
) -> tuple[dict[str, Any], list[str]]:
    """The assistant message appended to the conversation, and what was changed from the server's.

    ``content`` is always a string (``""`` for null: llama-cpp-python refuses null). Tool-call arguments
    that are not a JSON object become ``"{}"`` (vLLM re-parses every history argument: one invalid string
    makes every later request 400, vllm#43995); the raw text stays in the trajectory. Reasoning goes back
    per ``model.reasoning_passback``."""
    raw = c.message
    changes: list[str] = []
    content = raw.get("content")
    if not isinstance(content, str):
        content = ""
        changes.append("content null sent as \"\"")
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    calls = []
    for call in raw.get("tool_calls") or []:
        fn = call.get("function") or {}
        args = fn.get("arguments")
        parsed, _ = parse_arguments(args)
        if parsed is None:
            args = "{}"
            changes.append(f"arguments of {call.get('id')} replaced by {{}} (not a JSON object)")
        elif not isinstance(args, str) or not args.strip():
            args = json.dumps(parsed, ensure_ascii=False)
        calls.append({"id": call.get("id"), "type": "function", "function": {"name": fn.get("name"), "arguments": args}})
    if calls:
        msg["tool_calls"] = calls
    if passback == "auto" and c.reasoning is not None:
        for f in c.reasoning_fields:
            msg[f] = c.reasoning
    elif passback == "always":
        for f in c.reasoning_fields or seen_fields or ["reasoning_content"]:
            msg[f] = c.reasoning or ""
    return msg, changes


def reply_signature(c: Completion) -> str:
    """What makes two replies "the same" for ``agent.max_repeated_replies``: text, reasoning, tool names and
    arguments (not the call ids)."""
    calls = [((tc.get("function") or {}).get("name"), (tc.get("function") or {}).get("arguments"))
             for tc in c.message.get("tool_calls") or []]
    return json.dumps([c.message.get("content"), c.reasoning, calls], ensure_ascii=False, default=str)


def estimate_tokens(messages: list[dict[str, Any]], extra: Any = None) -> int:
    """A generous token estimate of ``messages`` (and ``extra``, e.g. the tool schemas)."""
    n = len(json.dumps(messages, ensure_ascii=False))
    if extra:
        n += len(json.dumps(extra, ensure_ascii=False))
    return math.ceil(n / ESTIMATE_CHARS_PER_TOKEN)
