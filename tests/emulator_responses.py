"""A loopback emulator of OpenAI's Responses API (``POST /v1/responses``) for reasoning models with tools.

``ResponsesEmulator(ResponsesAPI(), brain)`` serves it on 127.0.0.1 with the scaffolding of
:class:`emulators.Emulator` (its ``/v1/models``, its threaded server, its ``requests``/``raw``/``replies``).
The brain is the same policy as for the chat emulators (it sees the request as a chat-completions body:
:func:`chat_view`); the personality wraps its turns in the Responses API's documented behaviour:

- every reply starts with a ``reasoning`` item (``rs_…``) whose ``encrypted_content`` is given when the
  request has ``include: ["reasoning.encrypted_content"]``; its ``summary`` only when the request asks for
  one (``reasoning.summary``), as the real API does;
- a request is refused, with the real API's status and message, when a reasoning item is not followed by
  the item that followed it in its response ("Item 'rs_…' of type 'reasoning' was provided without its
  required following item.", 400; continuedev/continue#8933, openai/openai-node#1567), when an item that
  needs its reasoning comes without it ("Item 'fc_…' of type 'function_call' was provided without its
  required 'reasoning' item: 'rs_…'.", 400), when a reasoning item's encrypted content was altered ("The
  encrypted content gAAA...xxxx could not be verified.", 400 ``invalid_encrypted_content``;
  openai/codex#8145), when it comes without it under ``store: false`` ("Item with id 'rs_…' not found.
  Items are not persisted when `store` is set to false…", 404; vercel/ai#7543), when a
  ``function_call_output`` has no call before it ("No tool call found for function call output with
  call_id …", 400; continuedev/continue#10092) or a call has no output ("No tool output found for
  function call …", 400);
- ``strict`` (the default) also refuses what the real API would let pass but a tool loop must not do:
  a reasoning item of an earlier turn of the same conversation dropped, or the turns' items reordered —
  so a run that ends without a refusal kept its reasoning chain intact, in order;
- a prompt that does not fit ``window`` (input tokens + ``max_output_tokens``) is 400
  ``context_length_exceeded`` ("Your input exceeds the context window of this model…");
- usage has ``input_tokens_details.cached_tokens`` (the tokens of the previous request of the same
  conversation when this one starts with it) and ``output_tokens_details.reasoning_tokens``.

Token counts follow :func:`fte_shell.standins.server.tokens_for`, as in the chat emulators.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import hmac
import json
import time
from typing import Any

from emulators import Brain, Emulator, Personality, Reply, model_for, settings_for, toml_value
from emulators import settings_lines as chat_settings_lines

from fte_shell.standins.server import ScriptTurn, as_turn, tokens_for

SECRET = b"emulator-key"
SUMMARY = "Thinking about step {n} of the question."


def _err(status: int, message: str, code: Any = None, param: Any = "input") -> Reply:
    return status, {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or [] if isinstance(p, dict))


def chat_view(body: dict[str, Any]) -> dict[str, Any]:
    """The request as a chat-completions body (what the brains read): messages, tools, tool_choice."""
    msgs: list[dict[str, Any]] = []
    for item in body.get("input") or []:
        kind = item.get("type", "message")
        if kind == "message":
            msgs.append({"role": item.get("role"), "content": _text(item.get("content"))})
        elif kind == "function_call":
            call = {"id": item.get("call_id"), "type": "function",
                    "function": {"name": item.get("name"), "arguments": item.get("arguments")}}
            if msgs and msgs[-1]["role"] == "assistant":
                msgs[-1].setdefault("tool_calls", []).append(call)
            else:
                msgs.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            msgs.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": item.get("output")})
    view: dict[str, Any] = {"model": body.get("model"), "messages": msgs, "max_tokens": body.get("max_output_tokens")}
    tools = [{"type": "function", "function": {k: t.get(k) for k in ("name", "description", "parameters")}}
             for t in body.get("tools") or [] if t.get("type") == "function"]
    if tools:
        view["tools"] = tools
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        view["tool_choice"] = {"type": "function", "function": {"name": choice.get("name")}}
    elif choice is not None:
        view["tool_choice"] = choice
    return view


def _conversation(items: list[dict[str, Any]]) -> str:
    """A conversation's key: its leading system/user messages (what every one of its requests starts with)."""
    head = []
    for item in items:
        if item.get("type", "message") != "message" or item.get("role") == "assistant":
            break
        head.append(item)
    return json.dumps(head, sort_keys=True)


class ResponsesAPI(Personality):
    """api.openai.com ``/v1/responses`` serving a reasoning model (see the module docstring)."""

    name = "responses"
    owned_by = "openai"

    def __init__(self, window: int = 4_000_000, strict: bool = True):
        super().__init__(window)
        self.strict = strict
        self.items: dict[str, dict[str, Any]] = {}
        """Every output item sent, by id (a deep copy: what an unchanged item must equal)."""
        self.following: dict[str, str] = {}
        """Reasoning item id -> the id of the item after it in its response."""
        self.needs: dict[str, str] = {}
        """Item id -> the reasoning item that must come right before it."""
        self.chains: dict[str, list[str]] = {}
        """Conversation -> its reasoning item ids, in the order they were sent."""
        self.last_input: dict[str, list[dict[str, Any]]] = {}
        """Conversation -> the input of its last request (for cached tokens)."""
        self.intact: list[int] = []
        """Per accepted request: the reasoning items that came back verified, in order."""

    def check(self, body: dict[str, Any]) -> Reply | None:
        items = body.get("input") or []
        store = body.get("store", True)
        calls: set[str] = set()
        answered: set[str] = set()
        for i, item in enumerate(items):
            kind, iid = item.get("type", "message"), item.get("id")
            if kind == "reasoning":
                sent = self.items.get(iid)
                if sent is None or (not store and "encrypted_content" not in item):
                    return _err(404, f"Item with id '{iid}' not found. Items are not persisted when `store` is set to "
                                "false. Try again with `store` set to true, or remove this item from your input.")
                enc = item.get("encrypted_content")
                if enc is not None and enc != sent.get("encrypted_content"):
                    return _err(400, f"The encrypted content {enc[:4]}...{enc[-4:]} could not be verified.",
                                "invalid_encrypted_content", None)
                after = items[i + 1].get("id") if i + 1 < len(items) else None
                if after != self.following.get(iid):
                    return _err(400, f"Item '{iid}' of type 'reasoning' was provided without its required following item.")
            elif iid in self.needs:
                before = items[i - 1].get("id") if i else None
                if before != self.needs[iid]:
                    return _err(400, f"Item '{iid}' of type '{kind}' was provided without its required 'reasoning' "
                                f"item: '{self.needs[iid]}'.")
            if kind == "function_call":
                calls.add(item.get("call_id"))
            elif kind == "function_call_output":
                if item.get("call_id") not in calls:
                    return _err(400, f"No tool call found for function call output with call_id {item.get('call_id')}.")
                answered.add(item.get("call_id"))
        for call in sorted(calls - answered):
            return _err(400, f"No tool output found for function call {call}.")
        if self.strict:
            chain = self.chains.get(_conversation(items), [])
            back = [item.get("id") for item in items if item.get("type") == "reasoning"]
            if back != chain:
                missing = [r for r in chain if r not in back]
                what = (f"reasoning item '{missing[0]}' of an earlier turn is missing" if missing
                        else f"the reasoning items came back as {back}, not in the order they were sent ({chain})")
                return _err(400, f"(emulator, strict) the reasoning chain was broken: {what}.")
        prompt, want = tokens_for(items), int(body.get("max_output_tokens") or 0)
        if prompt + want > self.window:
            return _err(400, "Your input exceeds the context window of this model. Please adjust your input and try "
                        "again.", "context_length_exceeded")
        return None

    def respond(self, body: dict[str, Any], turn: ScriptTurn, n: int, model: str) -> dict[str, Any]:
        """The Responses payload of a brain's turn (``n``: the request's number)."""
        items = body.get("input") or []
        key = _conversation(items)
        rid = f"rs_emu{n:04d}"
        reasoning: dict[str, Any] = {"id": rid, "type": "reasoning", "summary": []}
        text = getattr(turn, "reasoning", None) or SUMMARY.format(n=n)
        if (body.get("reasoning") or {}).get("summary"):
            reasoning["summary"] = [{"type": "summary_text", "text": text}]
        if "reasoning.encrypted_content" in (body.get("include") or []):
            mac = hmac.new(SECRET, f"{rid}\n{text}".encode(), hashlib.sha256).digest()
            reasoning["encrypted_content"] = "gAAAAAB" + base64.urlsafe_b64encode(mac + text.encode() * 4).decode()
        output: list[dict[str, Any]] = [reasoning]
        if turn.content:
            output.append({"id": f"msg_emu{n:04d}", "type": "message", "status": "completed", "role": "assistant",
                           "content": [{"type": "output_text", "text": turn.content, "annotations": []}]})
        for i, tc in enumerate(turn.tool_calls):
            args = tc.arguments if isinstance(tc.arguments, str) else json.dumps(tc.arguments, ensure_ascii=False)
            output.append({"id": f"fc_emu{n:04d}_{i}", "type": "function_call", "status": "completed",
                           "call_id": tc.id or f"call_{n}_{i}", "name": tc.name, "arguments": args})
        if len(output) > 1:
            self.following[rid] = output[1]["id"]
            self.needs[output[1]["id"]] = rid
        for item in output:
            self.items[item["id"]] = copy.deepcopy(item)
        self.chains.setdefault(key, []).append(rid)
        prev = self.last_input.get(key)
        cached = tokens_for(prev) if prev and items[: len(prev)] == prev else 0
        self.last_input[key] = items
        self.intact.append(sum(1 for item in items if item.get("type") == "reasoning"))
        cut = turn.finish_reason == "length"
        return {
            "id": f"resp_emu{n:04d}", "object": "response", "created_at": 1_700_000_000 + n, "model": model,
            "status": "incomplete" if cut else "completed", "error": None,
            "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
            "output": output, "parallel_tool_calls": True, "tool_choice": body.get("tool_choice", "auto"),
            "tools": body.get("tools") or [], "store": body.get("store", True),
            "reasoning": {"effort": (body.get("reasoning") or {}).get("effort", "medium"), "summary": None},
            "usage": {"input_tokens": tokens_for(items), "input_tokens_details": {"cached_tokens": cached},
                      "output_tokens": tokens_for(output),
                      "output_tokens_details": {"reasoning_tokens": tokens_for(reasoning)},
                      "total_tokens": tokens_for(items) + tokens_for(output)},
        }


class ResponsesEmulator(Emulator):
    """:class:`emulators.Emulator` with ``POST /v1/responses`` (and reply headers, for ``Retry-After``)."""

    personality: ResponsesAPI

    def __init__(self, personality: ResponsesAPI, brain: Brain, *, model: str = "emu-model"):
        super().__init__(personality, brain, model=model)

    def respond(self, raw: bytes) -> tuple[int, Any, dict[str, str]]:
        body = json.loads(raw or b"{}")
        p = self.personality
        with self._lock:
            self.requests.append(body)
            self.raw.append(raw)
            n = len(self.requests)
            refused = p.check(body)
            if refused is not None:
                self.replies.append(refused)
                return (*refused, {})
        try:
            turn = as_turn(self.brain(chat_view(body)))
        except Exception as e:  # noqa: BLE001 - a brain bug is reported to the client
            return 500, {"error": {"message": f"emulator brain failed: {e.__class__.__name__}: {e}", "type": "brain"}}, {}
        if turn.delay_s > 0:
            time.sleep(turn.delay_s)
        if turn.status != 200:
            headers = {"Retry-After": f"{turn.retry_after:g}"} if turn.retry_after is not None else {}
            reply: Reply = (turn.status, {"error": {"message": turn.error, "type": "injected", "param": None,
                                                    "code": turn.status}})
            with self._lock:
                self.replies.append(reply)
            return (*reply, headers)
        with self._lock:
            payload = p.respond(body, turn, n, self.model)
            self.replies.append((200, payload))
        return 200, payload, {}

    def _handler(self) -> Any:
        emu, base = self, super()._handler()

        class Handler(base):  # type: ignore[misc, valid-type]
            def do_POST(self) -> None:
                if self.path.rstrip("/") != "/v1/responses":
                    return super().do_POST()
                status, payload, headers = emu.respond(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                data = json.dumps(payload, ensure_ascii=False).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    return None
                return None

        return Handler


RESPONSES = {"responses": ResponsesAPI}
"""The Responses API servers, beside :data:`emulators.PERSONALITIES` (the chat-completions ones)."""


def serve(name: str, brain: Brain, personality: Personality | None = None) -> Emulator:
    """The emulator of server ``name`` (a chat personality or a Responses one) with this brain."""
    from emulators import PERSONALITIES

    if name in RESPONSES:
        return ResponsesEmulator(personality or RESPONSES[name](), brain)  # type: ignore[arg-type]
    return Emulator(personality or PERSONALITIES[name](), brain, model=model_for(name))


def settings_lines(name: str, extra: dict[str, dict[str, Any]] | None = None) -> dict[str, list[str]]:
    """What docs/run.md says to set for server ``name`` (``model.api = "responses"`` for the Responses API),
    plus ``extra``, as TOML lines per table."""
    if name not in RESPONSES:
        return chat_settings_lines(name, extra)
    st: dict[str, dict[str, Any]] = {"model": {"api": "responses"}, "agent": {}}
    for table, values in (extra or {}).items():
        st.setdefault(table, {}).update(values)
    return {table: [f"{k} = {toml_value(v)}" for k, v in values.items()] for table, values in st.items()}


def settings(name: str) -> dict[str, Any]:
    """:func:`settings_lines` as values: the ``[model]``/``[agent]`` settings of server ``name``."""
    return {"model": {"api": "responses"}, "agent": {}} if name in RESPONSES else settings_for(name)
