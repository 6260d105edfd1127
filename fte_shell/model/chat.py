"""Chat completions (``model.api = "chat"``, the default): ``POST {base_url}/chat/completions`` with the
paper's sampling defaults, the server kind's request fields (:mod:`.window`: how a forced call is sent, the
thinking switch, the reasoning effort) and ``model.extra_body`` over them; the reply read into a
:class:`~fte_shell.model.completion.Completion` (:func:`to_completion`). One of the wire APIs behind the
model client (:mod:`.wire`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .completion import OPAQUE_FIELDS, REASONING_FIELDS, Completion, split_think
from .errors import EndpointUnavailable
from .window import forcing, thinking_fields
from .wire import Ask, Channel, WireRequest


def _has_security_option() -> bool:
    try:
        from openai._models import FinalRequestOptions

        return "security" in FinalRequestOptions.model_fields
    except Exception:  # noqa: BLE001 - another SDK layout: the explicit Authorization header is enough
        return False


_SECURITY_OPTION = _has_security_option()


@dataclass(frozen=True)
class ChatCompletions:
    """The chat-completions wire API (a :class:`~fte_shell.model.wire.WireApi`)."""

    channel: Channel

    def request(self, ask: Ask) -> WireRequest:
        cfg = self.channel.cfg
        fields: dict[str, Any] = {
            "model": self.channel.model,
            "messages": ask.messages,
            "temperature": cfg.temperature if ask.temperature is None else ask.temperature,
            "top_p": cfg.top_p,
            "max_tokens": cfg.max_tokens if ask.max_tokens is None else ask.max_tokens,
            "presence_penalty": cfg.presence_penalty,
        }
        if ask.tools:
            fields["tools"] = ask.tools
            if ask.tool_choice is not None:  # sent the way the server kind enforces it (window.forcing)
                fields.update(forcing(self.channel.kind(), ask.tool_choice, ask.tools))
        kind = self.channel.kind()
        extra = thinking_fields(kind, cfg.thinking, self.channel.model) if cfg.thinking is not None else {}
        if cfg.reasoning_effort is not None:  # the kind's field for it (OpenRouter: reasoning.effort)
            extra = merge_body(extra, kind.effort(cfg.reasoning_effort))
        if cfg.extra_body or extra:
            fields["extra_body"] = merge_body(extra, cfg.extra_body)
        return WireRequest.of(fields, ask.tools)

    def send(self, request: WireRequest, timeout: float | None) -> Any:
        """POST the request as it is. Not ``chat.completions.create``: its parameter transform walks every
        message against the SDK's TypedDicts, which took ~0.3 s of CPU per request at turn 120 and grows with
        the conversation (measured: 88 % of a 300-turn run); our messages are plain JSON already."""
        from openai.types.chat import ChatCompletion

        body = {k: v for k, v in request.fields.items() if k != "extra_body"}
        body.update(request.fields.get("extra_body") or {})
        options: dict[str, Any] = {"headers": {"Authorization": f"Bearer {self.channel.api_key}"}}
        if timeout is not None:
            options["timeout"] = timeout
        if _SECURITY_OPTION:
            options["security"] = {"bearer_auth": True}
        return self.channel.client.post("/chat/completions", body=body, cast_to=ChatCompletion, options=options)

    def reported_tokens(self, reply: Any) -> int:
        return int(getattr(getattr(reply, "usage", None), "total_tokens", 0) or 0)

    def read(self, reply: Any, request: WireRequest, latency: float, attempts: int, n: int) -> Completion:
        return to_completion(reply, latency, attempts, n, request.params)


def merge_body(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` merged into ``base``, objects merged key by key (``model.extra_body`` wins over the kind's
    thinking switch: ``reasoning = {effort = "high"}`` keeps OpenRouter's ``enabled``)."""
    out = dict(base)
    for k, v in over.items():
        out[k] = merge_body(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _dump(obj: Any) -> dict[str, Any]:
    if obj is None:
        return {}
    if hasattr(obj, "model_dump"):
        return {k: v for k, v in obj.model_dump(mode="json", exclude_unset=True).items() if v is not None}
    return dict(obj) if isinstance(obj, dict) else {}


def to_completion(resp: Any, latency: float, attempts: int, n: int, params: dict[str, Any]) -> Completion:
    """Normalize a chat-completions response. Tool calls without an id get ``call_<n>_<index>`` (some
    servers send none, and the tool messages must name one); non-string arguments are JSON-encoded."""
    if not getattr(resp, "choices", None):
        raise EndpointUnavailable(f"model response has no choices: {resp}")
    choice = resp.choices[0]
    msg = choice.message
    message: dict[str, Any] = {"role": "assistant", "content": msg.content}
    calls = []
    for i, tc in enumerate(msg.tool_calls or []):
        fn = getattr(tc, "function", None)
        if fn is None:
            continue
        args = fn.arguments
        if args is None:
            args = ""
        elif not isinstance(args, str):
            args = json.dumps(args, ensure_ascii=False)
        calls.append({"id": tc.id or f"call_{n}_{i}", "type": "function", "function": {"name": fn.name, "arguments": args}})
    if calls:
        message["tool_calls"] = calls
    extra = getattr(msg, "model_extra", None) or {}
    for f in OPAQUE_FIELDS:
        if extra.get(f) is not None:
            message[f] = extra[f]
    fields = [f for f in REASONING_FIELDS if isinstance(extra.get(f), str)]
    texts = [extra[f] for f in fields if extra[f]]
    reasoning = texts[-1] if texts else ("" if fields else None)  # vLLM's ``reasoning`` wins when both
    inline = False
    if reasoning is None:
        reasoning, _ = split_think(msg.content)
        inline = reasoning is not None
    details = _dump(resp.usage)
    usage = {k: int(details.get(k) or 0) for k in ("prompt_tokens", "completion_tokens", "total_tokens")}
    response = {
        "id": getattr(resp, "id", None),
        "model": getattr(resp, "model", None),
        "system_fingerprint": getattr(resp, "system_fingerprint", None),
    }
    return Completion(
        message=message,
        usage=usage,
        usage_details=details,
        latency_s=latency,
        finish_reason=choice.finish_reason,
        reasoning=reasoning,
        reasoning_fields=fields,
        reasoning_inline=inline,
        attempts=attempts,
        params=params,
        response=response,
    )
