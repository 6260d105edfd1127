"""OpenAI's Responses API (``model.api = "responses"``), one of the wire APIs behind the model client
(:mod:`.wire`): :class:`ResponsesApi` builds the request from the conversation, sends it to
``POST {base_url}/responses`` and reads the response into the same
:class:`~fte_shell.model.completion.Completion` as chat completions.

The loop keeps chat-completions messages whichever API is used; this module converts them at the wire:

- ``system``/``user`` messages → ``message`` input items; ``tool`` messages → ``function_call_output``
  items (``call_id`` = the message's ``tool_call_id``); the profiles' chat tool schemas → ``function``
  tools (``strict: false`` unless the schema says otherwise: the Responses API defaults to strict, which
  refuses schemas without ``additionalProperties: false``); a named ``tool_choice`` →
  ``{"type": "function", "name": …}``; ``max_tokens`` → ``max_output_tokens``.
- an assistant message carries the response's whole ``output`` array under ``OUTPUT_ITEMS`` (one of the
  completion's ``OPAQUE_FIELDS``, kept by the loop as it came): it goes back item for item, the same dicts, in order — reasoning
  items (``rs_…``, with ``encrypted_content``) before the function calls they belong to, as the API
  requires ("Item 'rs_…' of type 'reasoning' was provided without its required following item"). A tool
  call of the kept message that has no ``function_call`` item there (a text call the loop salvaged) is
  added after them. A message without those items (``model.reasoning_passback = never``) goes back as
  its text and its calls, without reasoning.
- ``model.store`` false (the default) sends ``store: false`` and ``include: ["reasoning.encrypted_content"]``:
  nothing is kept server-side, so the reasoning can only come back as its encrypted content (without it
  the API answers 404 "Item with id 'rs_…' not found. Items are not persisted when `store` is set to
  false"). ``model.reasoning_effort`` → ``reasoning.effort`` (a ``reasoning`` table in ``model.extra_body``
  is merged into it, e.g. ``summary = "auto"``); an effort other than ``none`` leaves ``temperature`` and
  ``top_p`` out (reasoning models refuse them); ``presence_penalty`` does not exist on this API.
- usage: ``input_tokens``/``output_tokens`` are the completion's ``prompt_tokens``/``completion_tokens``;
  ``usage_details`` has the chat-completions shape (``prompt_tokens_details.cached_tokens``,
  ``completion_tokens_details.reasoning_tokens``) so every reader of usage sees one record. ``status:
  incomplete`` with ``max_output_tokens`` is finish reason ``length``.

Errors are the same HTTP errors as chat completions and go through the client's same retries and classes
(:mod:`fte_shell.model.errors`: 400 ``context_length_exceeded`` is a :class:`ContextOverflow`); a body that
is not a JSON object, or a response whose status is neither ``completed`` nor ``incomplete``, is an
:class:`~fte_shell.model.errors.EndpointUnavailable` (not retried).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .completion import OUTPUT_ITEMS, Completion
from .errors import EndpointUnavailable
from .wire import Ask, Channel, WireRequest

TYPED_PARAMS = ("model", "tool_choice", "max_output_tokens", "temperature", "top_p", "store", "include", "reasoning")
"""Request fields given to ``client.responses.create`` as its parameters. ``input`` and ``tools`` go in its
``extra_body``: the SDK's parameter transform walks every input item, which grows with the conversation
(perf/responses_request.py: 2.2 s against 0.05 s per request at 900 items, 2 cores), and our items
are plain JSON already."""

FINISH_OF_INCOMPLETE = {"max_output_tokens": "length", "content_filter": "content_filter"}


def function_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """A chat-completions tool schema as a Responses ``function`` tool."""
    fn = tool.get("function") or {}
    out: dict[str, Any] = {"type": "function", "name": fn.get("name")}
    if fn.get("description") is not None:
        out["description"] = fn["description"]
    out["parameters"] = fn.get("parameters") or {"type": "object", "properties": {}}
    out["strict"] = bool(fn.get("strict", False))
    return out


def function_choice(choice: str | dict[str, Any]) -> str | dict[str, Any]:
    """A chat-completions ``tool_choice`` in the Responses form (strings are the same)."""
    if isinstance(choice, dict):
        return {"type": "function", "name": (choice.get("function") or {}).get("name")}
    return choice


def _text(content: Any, kind: str) -> Any:
    """A message's content: a string as it is; chat ``text`` parts as ``input_text``/``output_text`` parts."""
    if not isinstance(content, list):
        return "" if content is None else content
    return [{"type": kind, "text": p.get("text", "")} if isinstance(p, dict) and p.get("type") == "text" else p
            for p in content]


def to_input(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation as input items (see the module docstring). Kept output items are the very dicts
    the server sent: never copied, never changed."""
    items: list[dict[str, Any]] = []
    for m in messages:
        role = m.get("role")
        if role == "tool":
            items.append({"type": "function_call_output", "call_id": m.get("tool_call_id"),
                          "output": m.get("content") if isinstance(m.get("content"), str) else json.dumps(m.get("content"))})
            continue
        if role != "assistant":
            items.append({"type": "message", "role": role, "content": _text(m.get("content"), "input_text")})
            continue
        kept = m.get(OUTPUT_ITEMS)
        have: set[Any] = set()
        if isinstance(kept, list) and kept:
            items.extend(kept)
            have = {i.get("call_id") for i in kept if isinstance(i, dict) and i.get("type") == "function_call"}
        elif m.get("content"):
            items.append({"type": "message", "role": "assistant", "content": _text(m["content"], "output_text")})
        for tc in m.get("tool_calls") or []:
            if tc.get("id") not in have:
                fn = tc.get("function") or {}
                items.append({"type": "function_call", "call_id": tc.get("id"), "name": fn.get("name"),
                              "arguments": fn.get("arguments") or "{}"})
    return items


@dataclass(frozen=True)
class ResponsesApi:
    """The Responses API as a wire API (a :class:`~fte_shell.model.wire.WireApi`)."""

    channel: Channel

    def request(self, ask: Ask) -> WireRequest:
        """The request's fields (``input`` and ``tools`` converted; ``extra_body`` kept apart, merged when sent)."""
        cfg = self.channel.cfg
        fields: dict[str, Any] = {"model": self.channel.model, "input": to_input(ask.messages)}
        if cfg.reasoning_effort in (None, "none"):
            fields["temperature"] = cfg.temperature if ask.temperature is None else ask.temperature
            fields["top_p"] = cfg.top_p
        fields["max_output_tokens"] = cfg.max_tokens if ask.max_tokens is None else ask.max_tokens
        if ask.tools:
            fields["tools"] = [function_tool(t) for t in ask.tools]
            if ask.tool_choice is not None:
                fields["tool_choice"] = function_choice(ask.tool_choice)
        fields["store"] = cfg.store
        if not cfg.store:
            fields["include"] = ["reasoning.encrypted_content"]
        extra = dict(cfg.extra_body)
        reasoning = {"effort": cfg.reasoning_effort} if cfg.reasoning_effort is not None else {}
        if isinstance(extra.get("reasoning"), dict):
            reasoning.update(extra.pop("reasoning"))
        if reasoning:
            fields["reasoning"] = reasoning
        if extra:
            fields["extra_body"] = extra
        return WireRequest.of(fields, ask.tools)

    def send(self, request: WireRequest, timeout: float | None) -> dict[str, Any]:
        """Send the request through ``client.responses.create`` (no SDK retries: the client's loop retries);
        returns the response's JSON as the server sent it."""
        fields = request.fields
        typed: dict[str, Any] = {k: fields[k] for k in TYPED_PARAMS if k in fields}
        body = {k: fields[k] for k in ("input", "tools") if k in fields}
        body.update(fields.get("extra_body") or {})
        if timeout is not None:
            typed["timeout"] = timeout
        raw = self.channel.client.responses.with_raw_response.create(**typed, extra_body=body)
        try:
            data = json.loads(raw.content)
        except ValueError as e:
            raise EndpointUnavailable(f"the Responses API answered with a body that is not JSON: {raw.text[:500]!r}") from e
        if not isinstance(data, dict):
            raise EndpointUnavailable(f"the Responses API answered with a body that is not an object: {raw.text[:500]!r}")
        return data

    def reported_tokens(self, reply: dict[str, Any]) -> int:
        usage = reply.get("usage") or {}
        return int((usage.get("total_tokens") if isinstance(usage, dict) else 0) or 0)

    def read(self, reply: dict[str, Any], request: WireRequest, latency: float, attempts: int, n: int) -> Completion:
        return to_completion(reply, latency, attempts, n, request.params)


def _usage(usage: Any) -> tuple[dict[str, int], dict[str, Any]]:
    u = usage if isinstance(usage, dict) else {}
    prompt, completion = int(u.get("input_tokens") or 0), int(u.get("output_tokens") or 0)
    total = int(u.get("total_tokens") or prompt + completion)
    counts = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": total}
    details: dict[str, Any] = dict(counts)
    cached = (u.get("input_tokens_details") or {}).get("cached_tokens")
    reasoning = (u.get("output_tokens_details") or {}).get("reasoning_tokens")
    if cached is not None:
        details["prompt_tokens_details"] = {"cached_tokens": int(cached)}
    if reasoning is not None:
        details["completion_tokens_details"] = {"reasoning_tokens": int(reasoning)}
    return (counts, details) if u else ({k: 0 for k in counts}, {})


def to_completion(data: dict[str, Any], latency: float, attempts: int, n: int, params: dict[str, Any]) -> Completion:
    """Read a Responses API response (its JSON) into a :class:`Completion`. Function calls become
    ``tool_calls`` (id = ``call_id``); the text of ``output_text`` (and ``refusal``) parts is the content;
    the reasoning items' summary and text parts are the reasoning; the whole ``output`` is kept under
    :data:`OUTPUT_ITEMS` to be sent back."""
    status = data.get("status")
    if status not in ("completed", "incomplete", None):
        err = data.get("error") or {}
        raise EndpointUnavailable(f"the Responses API answered status {status!r}: "
                                  f"{err.get('code') or ''} {err.get('message') or ''}".rstrip())
    output = data.get("output") if isinstance(data.get("output"), list) else []
    texts, thoughts, calls = [], [], []
    seen_reasoning = False
    for item in output:
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "message":
            for part in item.get("content") or []:
                if part.get("type") == "output_text":
                    texts.append(part.get("text") or "")
                elif part.get("type") == "refusal":
                    texts.append(part.get("refusal") or "")
        elif kind == "function_call":
            args = item.get("arguments")
            calls.append({"id": item.get("call_id") or f"call_{n}_{len(calls)}", "type": "function",
                          "function": {"name": item.get("name"),
                                       "arguments": args if isinstance(args, str) else json.dumps(args or {})}})
        elif kind == "reasoning":
            seen_reasoning = True
            thoughts += [p.get("text") or "" for p in (item.get("summary") or []) + (item.get("content") or [])
                         if isinstance(p, dict) and p.get("text")]
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    if calls:
        message["tool_calls"] = calls
    if output:
        message[OUTPUT_ITEMS] = output
    if status == "incomplete":
        reason = (data.get("incomplete_details") or {}).get("reason")
        finish = FINISH_OF_INCOMPLETE.get(reason, reason or "length")
    else:
        finish = "tool_calls" if calls else "stop"
    usage, details = _usage(data.get("usage"))
    return Completion(
        message=message,
        usage=usage,
        usage_details=details,
        latency_s=latency,
        finish_reason=finish,
        reasoning="\n\n".join(thoughts) if thoughts else ("" if seen_reasoning else None),
        reasoning_fields=[],
        attempts=attempts,
        params=params,
        response={"id": data.get("id"), "model": data.get("model"), "system_fingerprint": None},
    )
