"""What the loop makes of one reply and sends with each request: the answer in a reply, the message kept
in the conversation, tool calls left as text, the ``model_call`` event's fields, the notices sent back,
the first turn's ``tool_choice``, and ``max_tokens`` fitted to the context window."""

from __future__ import annotations

import html
import json
import math
import re
from typing import Any

from ..config import ModelConfig
from ..model import Completion, ServerInfo
from ..model.completion import OPAQUE_FIELDS
from ..model.errors import BadRequest, ContextOverflow
from ..model.textcalls import find_text_tool_calls
from ..profiles import parse_arguments

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


ESCAPED_ANSWER_RE = re.compile(r"&(?:amp;)*lt;answer&(?:amp;)*gt;", re.IGNORECASE)


def unescape_all(text: str) -> str:
    """``text`` HTML-unescaped until nothing changes (a model nudged on an escaping server escapes one level
    more each turn: ``&amp;lt;answer&amp;gt;``)."""
    for _ in range(8):
        once = html.unescape(text)
        if once == text:
            break
        text = once
    return text


def reply_answer(c: Completion, escapes: bool) -> tuple[str | None, bool, bool]:
    """``(answer, unclosed, unescaped)`` of a reply's text after its inline thinking (see :func:`find_answer`).
    On a server that escapes what the model sees (``escapes``), answer tags written HTML-escaped count too:
    the answer is then unescaped and ``unescaped`` is True."""
    answer, unclosed = find_answer(c.text)
    if answer is not None or not escapes or not ESCAPED_ANSWER_RE.search(c.text):
        return answer, unclosed, False
    answer, unclosed = find_answer(unescape_all(c.text))
    return answer, unclosed, answer is not None


def extract_answer(text: str | None) -> str | None:
    """The answer of a reply (see :func:`find_answer`), or None."""
    return find_answer(text)[0]


def kept_message(
    c: Completion, passback: str, seen_fields: list[str]
) -> tuple[dict[str, Any], list[str]]:
    """The assistant message appended to the conversation, and what was changed from the server's.

    ``content`` is always a string (``""`` for null: llama-cpp-python refuses null). Tool-call arguments
    that are not a JSON object become ``"{}"`` (vLLM re-parses every history argument: one invalid string
    makes every later request 400, vllm#43995); the raw text stays in the trajectory. Reasoning goes back
    per ``model.reasoning_passback``, the message's opaque fields (``OPAQUE_FIELDS``) as they came."""
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
    if passback != "never":  # opaque reasoning blobs go back exactly as they came
        msg.update({f: raw[f] for f in OPAQUE_FIELDS if f in raw})
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


def text_tool_calls(c: Completion, names: set[str], escapes: bool = False) -> tuple[str, list[dict[str, Any]]] | None:
    """Tool calls the server left as text, looked for only when the reply has no native one:
    ``(source, calls)`` with source ``content`` or ``reasoning``, or None. Inline ``<think>`` is not looked
    in (what the model thought of calling is not a call); on a server that ``escapes`` what the model sees,
    the text is unescaped first."""
    if c.message.get("tool_calls"):
        return None
    sources = [("content", c.text)] + ([] if c.reasoning_inline else [("reasoning", c.reasoning)])
    for source, text in sources:
        if escapes and isinstance(text, str):
            text = unescape_all(text)
        found = find_text_tool_calls(text if isinstance(text, str) else None, names)
        if found:
            return source, found
    return None


def salvaged_calls(turn: int, found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Text tool calls as the kept message's ``tool_calls`` (ids ``text_<turn>_<i>``)."""
    return [{"id": f"text_{turn}_{i}", "type": "function",
             "function": {"name": tc["name"], "arguments": json.dumps(tc["arguments"], ensure_ascii=False)}}
            for i, tc in enumerate(found)]


def model_call_fields(turn: int, c: Completion, changes: list[str]) -> dict[str, Any]:
    """The fields of the ``model_call`` event of ``c``."""
    fields: dict[str, Any] = {
        "turn": turn, "latency_s": round(c.latency_s, 4), "usage": c.usage, "usage_details": c.usage_details,
        "message": c.message, "finish_reason": c.finish_reason, "attempts": c.attempts, "request": c.params,
        "response": c.response,
    }
    if c.reasoning is not None:
        fields["reasoning"] = c.reasoning
        fields["reasoning_fields"] = c.reasoning_fields
    if changes:
        fields["kept_changes"] = changes
    return fields


def tool_choice(want: str | None, turn: int, tools: list[dict[str, Any]], profile: str) -> str | dict[str, Any] | None:
    """``agent.first_tool_choice`` on turn 1 (a named choice, or ``required``), else None (auto). Raises
    :class:`BadRequest` when it names a tool the profile does not have (the request cannot work)."""
    if turn != 1 or not want or not tools:
        return None
    if want in ("required", "auto", "none"):
        return want
    names = [t.get("function", {}).get("name") for t in tools]
    name = names[0] if want == "first" else want
    if name not in names:
        raise BadRequest(
            f"agent.first_tool_choice names the tool '{name}', which the profile '{profile}' "
            f"does not have (its tools: {', '.join(str(n) for n in names)}); use 'first' or 'required'"
        )
    return {"type": "function", "function": {"name": name}}


def fit_max_tokens(info: ServerInfo | None, mc: ModelConfig, estimate: int, *, final: bool = False) -> int | None:
    """``min(model.max_tokens, window − estimate − margin)``; None when the window is unknown. Raises
    :class:`ContextOverflow` when less than ``model.reply_floor`` (``min_reply_tokens``, or ``max_tokens`` when
    smaller) is left (unless ``final``)."""
    if info is None or info.context_window is None:
        return None
    room = info.context_window - estimate - mc.context_margin
    if room < mc.reply_floor and not final:
        raise ContextOverflow(
            f"the conversation (about {estimate:,} tokens) leaves {room:,} tokens of the {info.context_window:,}-token "
            f"context window ({info.source}) for the reply, below {mc.reply_floor} (model.min_reply_tokens = "
            f"{mc.min_reply_tokens}, model.max_tokens = {mc.max_tokens})"
        )
    return max(1, min(mc.max_tokens, room))
