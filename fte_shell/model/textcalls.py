"""Tool calls a server failed to parse and left as text in ``content`` or the reasoning.

Formats found (each with where it comes from):

- ``<tool_call>{"name": …, "arguments": {…}}</tool_call>`` — Hermes/Qwen2.5 templates; left as text when
  the server's tool parser is off or the model wrote it inside ``<think>`` (vllm#39056);
- ``<function=NAME><parameter=KEY>VALUE</parameter></function>`` — Qwen3-Coder/Qwen3.5 XML (qwen3_coder
  parser), left in ``content`` with thinking on (vllm#42021);
- a fenced or bare JSON object ``{"name": TOOL, "arguments"|"parameters": {…}}`` — small models on
  llama.cpp whose template the server cannot parse (measured here: Qwen2.5-Coder-1.5B on llama.cpp's server
  writes the object in ``content`` for ``tool_choice`` ``"required"``, no ``tool_calls``);
- a reply that starts with such an object and goes on with a result the model invented for it
  (``{…}`` then ``<tool_response>…</tool_response>``, the Qwen template's tag for a tool's result, or a
  fenced made-up grep output; the same model on llama.cpp's server, measured here): the call counts,
  what follows it is not an observation;
- an "answer" whose whole text is such an object, ``<answer>{"name": TOOL, …}</answer>`` — the same model on
  llama.cpp's server asked for a named ``tool_choice`` (measured here, xllamacpp).

:func:`find_text_tool_calls` only finds them; the loop records them as a ``text_tool_call`` event and
executes them when ``model.parse_text_tool_calls`` is on.
"""

from __future__ import annotations

import json
import re
from typing import Any

_TAGGED = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_FUNCTION = re.compile(r"<function=([^>\s]+)>(.*?)(?:</function>|$)", re.DOTALL)
_PARAM = re.compile(r"<parameter=([^>\s]+)>\s*(.*?)\s*(?:</parameter>|(?=<parameter=)|$)", re.DOTALL)
_ANSWER = re.compile(r"<answer>\s*(.*?)\s*</answer>", re.DOTALL | re.IGNORECASE)
_FENCED = re.compile(r"```(?:json|tool_call|tool)?\s*\n?(\{.*?\})\s*```", re.DOTALL)


def _json_call(text: str) -> tuple[str, dict[str, Any]] | None:
    try:
        obj = json.loads(text)
    except (TypeError, ValueError):
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):  # some models double-encode
        try:
            args = json.loads(args)
        except ValueError:
            return None
    if not isinstance(args, dict):
        return None
    return obj["name"], args


def _leading_object(text: str) -> str | None:
    """The JSON object ``text`` starts with (after blanks and an opening fence), or None."""
    start = text.strip().removeprefix("```json").removeprefix("```").lstrip()
    if not start.startswith("{"):
        return None
    try:
        _, end = json.JSONDecoder().raw_decode(start)
    except ValueError:
        return None
    return start[:end]


def _xml_value(raw: str) -> Any:
    try:
        return json.loads(raw)  # numbers, booleans, lists written as JSON (qwen3_coder converts by schema)
    except ValueError:
        return raw


def find_text_tool_calls(text: str | None, tool_names: set[str]) -> list[dict[str, Any]]:
    """Tool calls written as text: ``[{name, arguments, format, raw}]`` in order. Tagged formats are found
    for any name; fenced/bare JSON only when ``name`` is one of ``tool_names`` (else ordinary JSON in a reply
    would count)."""
    if not text:
        return []
    found: list[dict[str, Any]] = []
    for m in _FUNCTION.finditer(text):
        args = {k: _xml_value(v) for k, v in _PARAM.findall(m.group(2))}
        found.append({"name": m.group(1), "arguments": args, "format": "xml_function", "raw": m.group(0)})
    if found:
        return found
    for m in _TAGGED.finditer(text):
        call = _json_call(m.group(1))
        if call is not None:
            found.append({"name": call[0], "arguments": call[1], "format": "tool_call_tag", "raw": m.group(0)})
    if found:
        return found
    # a reply that starts with a bare object (also one followed by half a fence: ``{…}\n```` measured on
    # llama.cpp with this model) is that one call: whatever follows it, fenced calls included, is what the
    # model wrote in place of the result (measured: ``{call -n 1}\n```\n```\n{call -n 2}\n````)
    leading = _leading_object(text)
    bare = leading is not None and not text.lstrip().startswith("```")
    leading_call = _json_call(leading) if bare and leading is not None else None
    if leading is not None and leading_call is not None and leading_call[0] in tool_names:
        candidates = [(leading, leading, "json")]
    else:
        candidates = [(m.group(1), m.group(0), "json") for m in _FENCED.finditer(text)]
        if not candidates and leading is not None:
            candidates = [(leading, leading, "json")]
    if not candidates:  # an answer that is wholly a call object (fenced or bare)
        for m in _ANSWER.finditer(text):
            inner = m.group(1)
            fenced = _FENCED.fullmatch(inner)
            candidates.append((fenced.group(1) if fenced else inner, m.group(0), "answer_tag"))
    for body, raw, fmt in candidates:
        call = _json_call(body)
        if call is not None and call[0] in tool_names:
            found.append({"name": call[0], "arguments": call[1], "format": fmt, "raw": raw})
    return found
