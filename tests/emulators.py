"""Loopback emulators of real OpenAI-compatible servers: one personality per server kind.

``Emulator(personality, brain)`` serves ``POST /v1/chat/completions`` (plus each personality's discovery
routes) on 127.0.0.1. The *brain* is a policy of :mod:`fte_shell.standins.research` /
:mod:`fte_shell.standins.server` (``request_json -> ScriptTurn``): it makes the real research moves; the
*personality* wraps it in the server's documented behaviour — its reasoning field, what it refuses in a
request and with which status and text, its context window, its discovery endpoints. Every behaviour is
commented with its source (the server's documentation or issue, or "measured here" against the stock
server).

Token counts follow :func:`fte_shell.standins.server.tokens_for` (a quarter of the JSON length), so a test can
compute a window that overflows at a known turn.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import hmac
import html
import json
import shlex
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from fte_shell.standins.server import ScriptTurn, as_turn, tokens_for

Brain = Callable[[dict[str, Any]], Any]
Reply = tuple[int, Any]  # (HTTP status, JSON payload or text)


class EmuTurn(ScriptTurn):
    """A brain's turn with reasoning text of its own (else the personality invents a line when thinking)."""

    reasoning: str | None = None


def _err(status: int, message: str, type_: str, code: Any, **extra: Any) -> Reply:
    return status, {"error": {"message": message, "type": type_, "param": None, "code": code, **extra}}


def _question(body: dict[str, Any]) -> str:
    for m in body.get("messages") or []:
        if m.get("role") == "user":
            return str(m.get("content") or "")
    return ""


class Personality:
    """The polite base: accepts everything, no reasoning, no discovery beyond ``/v1/models``."""

    name = "base"
    reasoning_field: str | None = None
    """Wire name of the reasoning text in replies (None: the server sends none)."""
    thinking = False
    """Add reasoning to every reply."""
    owned_by = "emulator"

    def __init__(self, window: int = 1_000_000):
        self.window = window

    def models_entry(self, model: str) -> dict[str, Any]:
        return {"id": model, "object": "model", "created": 1_700_000_000, "owned_by": self.owned_by}

    def get(self, path: str, model: str) -> Reply | None:
        if path == "/v1/models":
            return 200, {"object": "list", "data": [self.models_entry(model)]}
        return None

    def post(self, path: str, body: dict[str, Any], model: str) -> Reply | None:
        return None

    def check(self, body: dict[str, Any]) -> Reply | None:
        """An error reply for a request the server refuses, or None."""
        return None

    def prepare(self, body: dict[str, Any]) -> dict[str, Any]:
        """The request as the model sees it (Ollama truncates it)."""
        return body

    def shape(self, message: dict[str, Any], body: dict[str, Any], turn: ScriptTurn) -> str | None:
        """Adjust the reply message; may return a finish reason to use instead of the default."""
        return None

    def usage(self, prompt: int, completion: int, reasoning: int) -> dict[str, Any]:
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    def fingerprint(self) -> str | None:
        return None

    def think(self, body: dict[str, Any], turn: ScriptTurn, n: int) -> str | None:
        """The reasoning of reply ``n``: the brain's own, else a line when thinking, else None."""
        reasoning = getattr(turn, "reasoning", None)
        if reasoning is None and self.thinking:
            reasoning = f"Thinking about step {n} of the question."
        return reasoning

    def put_reasoning(self, message: dict[str, Any], reasoning: str | None, body: dict[str, Any], n: int) -> None:
        """Put the reasoning into the reply (under :attr:`reasoning_field`)."""
        if self.reasoning_field and reasoning is not None:
            message[self.reasoning_field] = reasoning


class TextCalls:
    """Tool calls a server leaves as text, and the brain's own ids given back for them (the harness names
    salvaged calls anew: ``text_<turn>_<i>``)."""

    def __init__(self) -> None:
        self._ids: dict[str, str] = {}

    def remember(self, call: dict[str, Any]) -> dict[str, Any]:
        """Remember a brain call written as text; returns ``{name, arguments}`` (arguments parsed)."""
        c = call["function"]
        args = json.loads(c["arguments"]) if c["arguments"] else {}
        self._ids[_canon(c["name"], json.dumps(args))] = call["id"]
        return {"name": c["name"], "arguments": args}

    def restore(self, body: dict[str, Any]) -> dict[str, Any]:
        body = copy.deepcopy(body)
        remap: dict[str, str] = {}
        for m in body.get("messages") or []:
            for tc in m.get("tool_calls") or []:
                fn = tc.get("function") or {}
                key = _canon(fn.get("name"), fn.get("arguments"))
                if key in self._ids and tc.get("id") != self._ids[key]:
                    remap[tc["id"]] = self._ids[key]
                    tc["id"] = self._ids[key]
            if m.get("role") == "tool" and m.get("tool_call_id") in remap:
                m["tool_call_id"] = remap[m["tool_call_id"]]
        return body


class VLLM(Personality):
    """vLLM ≥ 0.16 serving Qwen3.5 with ``--reasoning-parser qwen3 --tool-call-parser qwen3_coder``."""

    name = "vllm"
    # vLLM renamed reasoning_content -> reasoning; on input it reads only ``reasoning`` (vllm#38488)
    reasoning_field = "reasoning"
    thinking = True
    owned_by = "vllm"

    def __init__(self, window: int = 1_000_000):
        super().__init__(window)
        self.reasoning_seen: list[int] = []
        """Per request: assistant messages that carried ``reasoning`` back (Qwen3.5's template keeps it)."""

    def models_entry(self, model: str) -> dict[str, Any]:
        # GET /v1/models publishes max_model_len (vllm/entrypoints/openai/protocol.py ModelCard)
        return {**super().models_entry(model), "root": model, "max_model_len": self.window}

    def check(self, body: dict[str, Any]) -> Reply | None:
        msgs = body.get("messages") or []
        self.reasoning_seen.append(sum(1 for m in msgs if m.get("role") == "assistant" and m.get("reasoning")))
        for m in msgs:
            for tc in m.get("tool_calls") or []:
                # the chat template re-parses history arguments with json.loads: one invalid string makes
                # every later request fail (vllm#43995, #47761)
                try:
                    json.loads((tc.get("function") or {}).get("arguments") or "")
                except ValueError as e:
                    return _err(400, f"Invalid JSON in tool call arguments: {e}", "BadRequestError", 400)
        prompt = tokens_for(msgs)
        want = int(body.get("max_tokens") or 0)
        if prompt + want > self.window:
            # vLLM checks prompt + max_tokens, 400 with an integer code (vllm#20409, #33425)
            return _err(
                400,
                f"This model's maximum context length is {self.window} tokens. However, you requested {want} "
                f"output tokens and your prompt contains at least {prompt} input tokens, for a total of at least "
                f"{prompt + want} tokens. Please reduce the length of the input prompt or the number of requested "
                "output tokens.",
                "BadRequestError", 400,
            )
        return None

    def usage(self, prompt: int, completion: int, reasoning: int) -> dict[str, Any]:
        return {**super().usage(prompt, completion, reasoning), "prompt_tokens_details": None}


class DeepSeek(Personality):
    """The DeepSeek API in thinking mode (V3.2/V4) with tools."""

    name = "deepseek"
    reasoning_field = "reasoning_content"  # DeepSeek API docs, "Thinking Mode"
    thinking = True
    owned_by = "deepseek"

    def __init__(self, window: int = 131_072):
        super().__init__(window)

    def check(self, body: dict[str, Any]) -> Reply | None:
        for i, m in enumerate(body.get("messages") or []):
            if m.get("role") == "assistant" and m.get("tool_calls") and "reasoning_content" not in m:
                # thinking mode + tools: reasoning_content must be passed back (DeepSeek API docs, thinking mode)
                return _err(400, f"Missing `reasoning_content` field in the assistant message at message index {i}",
                            "invalid_request_error", "invalid_request_error")
        prompt, want = tokens_for(body.get("messages") or []), int(body.get("max_tokens") or 0)
        if prompt + want > self.window:
            return _err(400, f"This model's maximum context length is {self.window} tokens. However, you requested "
                        f"{prompt + want} tokens ({prompt} in the messages, {want} in the completion). Please reduce "
                        "the length of the messages or completion.", "invalid_request_error", "invalid_request_error")
        return None

    def usage(self, prompt: int, completion: int, reasoning: int) -> dict[str, Any]:
        # DeepSeek reports its context cache and the reasoning tokens (API docs, "Context Caching")
        return {**super().usage(prompt, completion, reasoning), "prompt_cache_hit_tokens": prompt // 2,
                "prompt_cache_miss_tokens": prompt - prompt // 2,
                "completion_tokens_details": {"reasoning_tokens": reasoning}}

    def fingerprint(self) -> str | None:
        return "fp_deepseek_emulator"


class OpenAI(Personality):
    """api.openai.com chat completions: no reasoning text, ``context_length_exceeded``."""

    name = "openai"
    owned_by = "openai"

    def __init__(self, window: int = 128_000):
        super().__init__(window)

    def check(self, body: dict[str, Any]) -> Reply | None:
        prompt = tokens_for(body.get("messages") or [])
        if prompt + int(body.get("max_tokens") or 0) > self.window:
            # OpenAI: 400 invalid_request_error, code context_length_exceeded (API error codes)
            return _err(400, f"This model's maximum context length is {self.window} tokens. However, your messages "
                        f"resulted in {prompt} tokens. Please reduce the length of the messages.",
                        "invalid_request_error", "context_length_exceeded", param="messages")
        return None

    def usage(self, prompt: int, completion: int, reasoning: int) -> dict[str, Any]:
        return {**super().usage(prompt, completion, reasoning), "prompt_tokens_details": {"cached_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 0}}

    def fingerprint(self) -> str | None:
        return "fp_openai_emulator"


class LlamaCpp(Personality):
    """llama.cpp's own server (``llama-server --jinja --reasoning-format deepseek -np SLOTS``)."""

    name = "llama.cpp"
    reasoning_field = "reasoning_content"  # with --reasoning-format (tools/server/README.md)
    owned_by = "llamacpp"

    def __init__(self, window: int = 1_000_000, slots: int = 1, thinking: bool = False, parses_tools: bool = True):
        super().__init__(window)
        self.slots = slots
        self.thinking = thinking
        self.parses_tools = parses_tools
        """False: the model's template is one whose tool calls the server cannot parse (Qwen2.5-Coder-1.5B,
        measured here): a named ``tool_choice`` gives ``<answer>{call}</answer>``, others a fenced call, and
        only a ``response_format`` JSON schema is enforced (the call as bare JSON in the content)."""
        self.text = TextCalls()

    @property
    def slot_ctx(self) -> int:
        return self.window // self.slots  # the window is per slot: n_ctx / parallel (tools/server/README.md)

    def get(self, path: str, model: str) -> Reply | None:
        if path == "/props":  # GET /props (tools/server/README.md)
            return 200, {"default_generation_settings": {"n_ctx": self.slot_ctx, "params": {}},
                         "total_slots": self.slots, "model_path": f"/models/{model}.gguf", "build_info": "b9999-emu"}
        return super().get(path, model)

    def models_entry(self, model: str) -> dict[str, Any]:
        return {**super().models_entry(model), "meta": {"n_ctx_train": 32768}}  # no max_model_len

    def check(self, body: dict[str, Any]) -> Reply | None:
        prompt = tokens_for(body.get("messages") or [])
        if prompt > self.slot_ctx:
            # 400 exceed_context_size_error (tools/server/server.cpp)
            return _err(400, f"request ({prompt} tokens) exceeds the available context size ({self.slot_ctx} "
                        "tokens), try increasing it", "exceed_context_size_error", 400,
                        n_prompt_tokens=prompt, n_ctx=self.slot_ctx)
        return None

    def prepare(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.text.restore(body)

    def shape(self, message: dict[str, Any], body: dict[str, Any], turn: ScriptTurn) -> str | None:
        if not self.parses_tools:
            self._as_text(message, body)
        prompt = tokens_for(body.get("messages") or [])
        if prompt + tokens_for(message) > self.slot_ctx:  # generation stops when the slot is full
            return "length"
        return None

    def _as_text(self, message: dict[str, Any], body: dict[str, Any]) -> None:
        calls = message.pop("tool_calls", None) or []
        schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema")
        choice = body.get("tool_choice")
        if schema is not None:  # enforced by grammar: the reply IS a call object of the schema
            names = [o["properties"]["name"]["const"] for o in schema.get("anyOf", [schema])]
            mine = [c for c in calls if c["function"]["name"] in names] or [
                {"id": "call_forced", "type": "function",
                 "function": {"name": names[0], "arguments": json.dumps(_forced_args(names[0], body))}}]
            message["content"] = json.dumps(self.text.remember(mine[0]), indent=2)
        elif calls and isinstance(choice, dict):  # a named choice is not enforced: the call as the "answer"
            message["content"] = "<answer>" + json.dumps(self.text.remember(calls[0])) + "</answer>"
        elif calls:
            blocks = ["```json\n" + json.dumps(self.text.remember(c)) + "\n```" for c in calls]
            message["content"] = "\n".join([message.get("content") or "", *blocks]).lstrip()


class LlamaCppPython(Personality):
    """llama-cpp-python's stock ``python -m llama_cpp.server`` (measured here). With ``escaping``,
    its ``chatml-function-calling`` format as the model lives it: every message is rendered HTML-escaped
    (jinja2 ``select_autoescape``), so the model writes its answer tags escaped, ``&lt;answer&gt;…``
    (measured with the real 1.5B model: 9 of 10 runs)."""

    name = "llama-cpp-python"
    owned_by = "me"  # GET /v1/models entries (llama_cpp/server/app.py)

    def __init__(self, window: int = 1_000_000, escaping: bool = False):
        super().__init__(window)
        self.escaping = escaping
        self.text = TextCalls()

    def models_entry(self, model: str) -> dict[str, Any]:
        return {"id": model, "object": "model", "owned_by": self.owned_by, "permissions": []}

    def check(self, body: dict[str, Any]) -> Reply | None:
        for i, m in enumerate(body.get("messages") or []):
            if m.get("role") == "assistant" and not isinstance(m.get("content"), str):
                # pydantic validation of ChatCompletionRequestAssistantMessage: content null -> HTTP 500
                return 500, {"error": {"message": f"2 validation errors for ChatCompletionRequestMessage\n"
                                       f"messages.{i}.content\n  Input should be a valid string [type=string_type, "
                                       "input_value=None, input_type=NoneType]", "type": "internal_server_error",
                                       "param": None, "code": None}}
        if isinstance(body.get("tool_choice"), str):
            # a string tool_choice ("auto"/"required") -> HTTP 500 (measured here)
            return 500, {"error": {"message": "'str' object has no attribute 'get'", "type": "internal_server_error",
                                   "param": None, "code": None}}
        return None

    def prepare(self, body: dict[str, Any]) -> dict[str, Any]:
        """Give the brain back its own call ids for calls it wrote as text (the harness names them anew)."""
        return self.text.restore(body)

    def shape(self, message: dict[str, Any], body: dict[str, Any], turn: ScriptTurn) -> str | None:
        choice = body.get("tool_choice")
        forced = choice.get("function", {}).get("name") if isinstance(choice, dict) else None
        calls = message.pop("tool_calls", None) or []
        if forced:
            # a NAMED tool_choice is enforced by a grammar: a real tool call of that tool (measured here)
            mine = [c for c in calls if c["function"]["name"] == forced]
            if not mine:
                mine = [{"id": "call_forced", "type": "function",
                         "function": {"name": forced, "arguments": json.dumps(_forced_args(forced, body))}}]
            message["tool_calls"] = mine[:1]
            message["content"] = None
            return "tool_calls"
        if calls:
            # auto/required are not parsed: the model's call stays as a fenced JSON object in content
            # (Qwen2.5-Coder-1.5B, measured here)
            blocks = ["```json\n" + json.dumps(self.text.remember(call)) + "\n```" for call in calls]
            message["content"] = "\n".join([message.get("content") or "", *blocks]).lstrip()
        elif self.escaping and "<answer>" in (message.get("content") or ""):
            message["content"] = html.escape(message["content"], quote=False)  # as the model saw the prompt
        return "stop"


class Ollama(Personality):
    """Ollama's OpenAI-compatible endpoint."""

    name = "ollama"
    owned_by = "library"

    def __init__(self, window: int = 4096, num_ctx_set: bool = False):
        super().__init__(window)
        self.num_ctx_set = num_ctx_set
        self.truncated: list[int] = []
        """Per request: messages dropped to fit num_ctx."""

    def get(self, path: str, model: str) -> Reply | None:
        if path == "/api/version":
            return 200, {"version": "0.6.2"}
        if path == "/":
            return 200, "Ollama is running"
        return super().get(path, model)

    def post(self, path: str, body: dict[str, Any], model: str) -> Reply | None:
        if path == "/api/show":  # POST /api/show (docs/api.md): parameters is a Modelfile-style text
            params = f"num_ctx                        {self.window}\nstop \"<|im_end|>\"" if self.num_ctx_set else 'stop "<|im_end|>"'
            return 200, {"modelfile": "", "parameters": params, "template": "", "details": {"family": "qwen3"}}
        return None

    def prepare(self, body: dict[str, Any]) -> dict[str, Any]:
        # no error when the prompt exceeds num_ctx: the oldest messages are dropped silently, HTTP 200, and
        # num_ctx in an OpenAI-style request is ignored (ollama#2722)
        msgs = list(body.get("messages") or [])
        head = 1 if msgs and msgs[0].get("role") == "system" else 0
        sizes = [tokens_for(m) for m in msgs]
        total, dropped = sum(sizes), 0
        while len(msgs) - dropped > head + 1 and total > self.window:  # the oldest turns go first
            total -= sizes[head + dropped]
            dropped += 1
        self.truncated.append(dropped)
        return {**body, "messages": msgs[:head] + msgs[head + dropped:]}


class SGLang(Personality):
    """SGLang (``python -m sglang.launch_server --reasoning-parser … --tool-call-parser …``).

    ``template``: the model's chat template, which reads the thinking switch from ``chat_template_kwargs``:
    ``qwen3`` reads ``enable_thinking`` (default on), ``deepseek-v3`` reads ``thinking`` (default off); a key the
    template does not read is ignored (SGLang docs, "Reasoning Parser"; DeepSeek-V3.1 model card).
    ``separate_reasoning`` (request, default true) puts the reasoning in ``reasoning_content``; false leaves
    it in the content as ``<think>…</think>``. ``parser_fails_every``: every k-th reply with tool calls comes
    back with the calls as ``<tool_call>`` text in the content (a wrong or missing ``--tool-call-parser``)."""

    name = "sglang"
    reasoning_field = "reasoning_content"
    owned_by = "sglang"

    def __init__(self, window: int = 1_000_000, template: str = "qwen3", parser_fails_every: int = 3):
        super().__init__(window)
        self.template = template
        self.parser_fails_every = parser_fails_every
        self.thinking_seen: list[bool] = []
        """Per reply: was the model thinking (the switch as the template read it)."""
        self.text = TextCalls()
        self.replies_with_calls = 0

    def get(self, path: str, model: str) -> Reply | None:
        if path == "/get_model_info":  # SGLang's native route (sglang/srt/entrypoints/http_server.py)
            return 200, {"model_path": f"/models/{model}", "tokenizer_path": f"/models/{model}", "is_generation": True}
        return super().get(path, model)

    def models_entry(self, model: str) -> dict[str, Any]:
        return {**super().models_entry(model), "root": model, "max_model_len": self.window}

    def thinking_on(self, body: dict[str, Any]) -> bool:
        kwargs = body.get("chat_template_kwargs") or {}
        key, default = ("enable_thinking", True) if self.template == "qwen3" else ("thinking", False)
        return bool(kwargs.get(key, default))

    def check(self, body: dict[str, Any]) -> Reply | None:
        prompt, want = tokens_for(body.get("messages") or []), int(body.get("max_tokens") or 0)
        if prompt + want > self.window:  # sglang serving_chat / tokenizer_manager
            return _err(400, f"Requested token count exceeds the model's maximum context length of {self.window} "
                        f"tokens. You requested a total of {prompt + want} tokens: {prompt} tokens from the input "
                        f"messages and {want} tokens for the completion. Please reduce the number of tokens in the "
                        "input messages or the completion to fit within the limit.", "BadRequestError", 400)
        return None

    def prepare(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.text.restore(body)

    def shape(self, message: dict[str, Any], body: dict[str, Any], turn: ScriptTurn) -> str | None:
        self.thinking_seen.append(self.thinking_on(body))
        calls = message.get("tool_calls") or []
        if not calls:
            return None
        self.replies_with_calls += 1
        if self.parser_fails_every and self.replies_with_calls % self.parser_fails_every == 0:
            # the parser did not recognise the model's format: the Hermes/Qwen tags stay in the content
            text = "".join("<tool_call>\n" + json.dumps(self.text.remember(c)) + "\n</tool_call>" for c in message.pop("tool_calls"))
            message["content"] = ((message.get("content") or "") + "\n" + text).lstrip()
            return "stop"
        return None

    def think(self, body: dict[str, Any], turn: ScriptTurn, n: int) -> str | None:
        if not self.thinking_seen[-1]:
            return None
        return getattr(turn, "reasoning", None) or f"Thinking about step {n} of the question."

    def put_reasoning(self, message: dict[str, Any], reasoning: str | None, body: dict[str, Any], n: int) -> None:
        if reasoning is None:
            return
        if body.get("separate_reasoning", True) is False:
            message["content"] = f"<think>\n{reasoning}\n</think>\n\n" + (message.get("content") or "")
        else:
            message["reasoning_content"] = reasoning


PRESERVE = "reasoning details must be preserved"
"""OpenRouter's refusal (Gemini through OpenRouter: 400 when a tool loop drops or alters reasoning_details)."""


class OpenRouter(Personality):
    """OpenRouter's chat completions with a reasoning model (OpenRouter docs, "Reasoning Tokens").

    Replies carry ``reasoning`` and ``reasoning_details``: in turn, a signed ``reasoning.text`` (Anthropic), a
    ``reasoning.summary`` with a ``reasoning.encrypted`` blob (OpenAI), an encrypted blob alone (Gemini). A
    request whose assistant message of an earlier reply drops, reorders or alters its details — or whose
    ``reasoning.text`` signature does not match its text — is refused with 400."""

    name = "openrouter"
    reasoning_field = "reasoning"
    thinking = True
    owned_by = "openrouter"

    def __init__(self, window: int = 1_000_000):
        super().__init__(window)
        self.issued: dict[str, list[Any]] = {}
        """Canonical assistant message -> the reasoning_details sent with it."""
        self.reasoning_requests: list[Any] = []
        """Per request: its ``reasoning`` parameter (None when absent)."""
        self.preserved: list[int] = []
        """Per accepted request: assistant messages whose details came back intact."""

    def models_entry(self, model: str) -> dict[str, Any]:
        # GET /api/v1/models: context_length, supported_parameters, top_provider (API reference, "List models")
        return {"id": model, "name": model, "created": 1_700_000_000, "context_length": self.window,
                "supported_parameters": ["tools", "tool_choice", "reasoning", "include_reasoning", "max_tokens"],
                "top_provider": {"context_length": self.window, "is_moderated": False}}

    @staticmethod
    def signature(text: str) -> str:
        return base64.b64encode(hmac.new(b"emulator", text.encode(), hashlib.sha256).digest()).decode()

    def details(self, n: int, reasoning: str) -> list[dict[str, Any]]:
        blob = base64.b64encode(hashlib.sha256(f"{n}:{reasoning}".encode()).digest() * 3).decode()
        if n % 3 == 1:
            return [{"type": "reasoning.text", "text": reasoning, "signature": self.signature(reasoning),
                     "id": None, "format": "anthropic-claude-v1", "index": 0}]
        if n % 3 == 2:
            return [{"type": "reasoning.summary", "summary": reasoning, "id": f"rs_{n}", "format": "openai-responses-v1",
                     "index": 0},
                    {"type": "reasoning.encrypted", "data": blob, "id": f"rs_{n}", "format": "openai-responses-v1", "index": 1}]
        return [{"type": "reasoning.encrypted", "data": blob, "id": None, "format": "google-gemini-v1", "index": 0}]

    def check(self, body: dict[str, Any]) -> Reply | None:
        self.reasoning_requests.append(body.get("reasoning"))
        intact = 0
        for i, m in enumerate(body.get("messages") or []):
            if m.get("role") != "assistant" or (key := _message_key(m)) not in self.issued:
                continue
            got = m.get("reasoning_details")
            for d in got if isinstance(got, list) else []:
                if isinstance(d, dict) and d.get("type") == "reasoning.text" and d.get("signature") != self.signature(str(d.get("text"))):
                    return _err(400, f"messages.{i}: Invalid signature in thinking block", "invalid_request_error", 400)
            if got not in self.issued[key]:
                what = "missing" if got is None else "altered"
                return _err(400, f"messages.{i}.reasoning_details {what}: {PRESERVE} and passed back unchanged in a "
                            "tool-calling conversation", "invalid_request_error", 400)
            intact += 1
        self.preserved.append(intact)
        return None

    def put_reasoning(self, message: dict[str, Any], reasoning: str | None, body: dict[str, Any], n: int) -> None:
        if reasoning is None:
            return
        details = self.details(n, reasoning)
        message["reasoning"] = reasoning
        message["reasoning_details"] = details
        self.issued.setdefault(_message_key(message), []).append(copy.deepcopy(details))

    def usage(self, prompt: int, completion: int, reasoning: int) -> dict[str, Any]:
        return {**super().usage(prompt, completion, reasoning), "prompt_tokens_details": {"cached_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": reasoning}}


DECOY = "DECOY"
"""What the inline-think personality writes inside ``<think>`` as a call or an answer: never to be used."""


class InlineThink(Personality):
    """A host serving DeepSeek-R1 without a reasoning parser: the thinking comes inline in ``content`` as
    ``<think>…</think>`` before the reply (no reasoning field), tool calls parsed natively. Inside the thinking
    the model drafts: an ``<answer>`` it does not give (never closed on answer turns) and a ``<tool_call>`` it
    does not make. A request with an assistant call holding :data:`DECOY` is refused with 400 (an emulator
    check: the harness executed a call from inside the thinking)."""

    name = "inline-think"
    thinking = True
    owned_by = "deepseek"

    def check(self, body: dict[str, Any]) -> Reply | None:
        for i, m in enumerate(body.get("messages") or []):
            for tc in m.get("tool_calls") or []:
                if DECOY in json.dumps(tc):
                    return _err(400, f"emulator: messages.{i} calls a tool drafted inside <think>", "emulator_check", 400)
        return None

    def put_reasoning(self, message: dict[str, Any], reasoning: str | None, body: dict[str, Any], n: int) -> None:
        draft = f'<tool_call>\n{{"name": "search", "arguments": {{"query": "{DECOY}"}}}}\n</tool_call>\n'
        if not message.get("tool_calls"):
            draft += f"Perhaps <answer>{DECOY}, though I should check that first.\n"  # never closed
        else:
            draft += f"If it were easy I would say <answer>{DECOY}</answer>, but let me look.\n"
        message["content"] = f"<think>\n{reasoning or ''}\n{draft}</think>\n\n" + (message.get("content") or "")


class ChatOnly(Personality):
    """A server (or proxy in front of one) that implements only ``POST /v1/chat/completions``: every GET,
    ``/v1/models`` included, gets 501 Not Implemented (measured: such a server made ``bench`` wait 15
    minutes before its first run, issue 16 item 9)."""

    name = "chat-only"

    def __init__(self, window: int = 1_000_000):
        super().__init__(window)
        self.gets: list[str] = []
        """Every GET path asked."""

    def get(self, path: str, model: str) -> Reply | None:
        self.gets.append(path)
        return _err(501, f"GET {path} is not implemented", "not_implemented", 501)

    def post(self, path: str, body: dict[str, Any], model: str) -> Reply | None:
        return _err(501, f"POST {path} is not implemented", "not_implemented", 501)


def _canon(name: Any, arguments: Any) -> str:
    try:
        args = json.loads(arguments) if isinstance(arguments, str) and arguments else (arguments or {})
    except ValueError:
        args = arguments
    return json.dumps([name, args], sort_keys=True)


def _message_key(m: dict[str, Any]) -> str:
    """An assistant message as the harness keeps it: content ("" for null) and its calls' names and arguments."""
    calls = [_canon((tc.get("function") or {}).get("name"), (tc.get("function") or {}).get("arguments"))
             for tc in m.get("tool_calls") or []]
    return json.dumps([m.get("content") or "", calls])


def _forced_args(name: str, body: dict[str, Any]) -> dict[str, Any]:
    """What a grammar-forced call of ``name`` holds: the question for every required string."""
    q = _question(body)
    if name == "bash":
        return {"command": f"search {shlex.quote(q)}"}
    for t in body.get("tools") or []:
        fn = t.get("function") or {}
        if fn.get("name") == name:
            props = (fn.get("parameters") or {}).get("properties") or {}
            return {k: q for k in (fn.get("parameters") or {}).get("required") or [] if props.get(k, {}).get("type") == "string"}
    return {}


class Emulator:
    """A threaded loopback server: ``with Emulator(VLLM(), brain) as emu: ModelConfig(base_url=emu.base_url)``."""

    def __init__(self, personality: Personality, brain: Brain, *, model: str = "emu-model"):
        self.personality = personality
        self.brain = brain
        self.model = model
        self.requests: list[dict[str, Any]] = []
        """Every chat-completions body received (refused ones included)."""
        self.raw: list[bytes] = []
        """The bytes of every chat-completions body received."""
        self.replies: list[tuple[int, Any]] = []
        """Every (status, payload) sent for chat completions."""
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> Self:
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def complete(self, raw: bytes) -> Reply:
        body = json.loads(raw or b"{}")
        p = self.personality
        with self._lock:
            self.requests.append(body)
            self.raw.append(raw)
            n = len(self.requests)
        refused = p.check(body)
        if refused is not None:
            with self._lock:
                self.replies.append(refused)
            return refused
        seen = p.prepare(body)
        try:
            turn = as_turn(self.brain(seen))
        except Exception as e:  # noqa: BLE001 - a brain bug is reported to the client
            return 500, {"error": {"message": f"emulator brain failed: {e.__class__.__name__}: {e}", "type": "brain"}}
        if turn.status != 200:
            return turn.status, {"error": {"message": turn.error, "type": "injected", "code": turn.status}}
        message: dict[str, Any] = {"role": "assistant", "content": turn.content}
        if turn.raw_tool_calls is not None:
            message["tool_calls"] = turn.raw_tool_calls
        elif turn.tool_calls:
            message["tool_calls"] = [
                {"id": tc.id if tc.id is not None else f"call_{n}_{i}", "type": "function",
                 "function": {"name": tc.name, "arguments": tc.arguments if isinstance(tc.arguments, str)
                              else json.dumps(tc.arguments, ensure_ascii=False)}}
                for i, tc in enumerate(turn.tool_calls)
            ]
        finish = p.shape(message, body, turn)
        reasoning = p.think(body, turn, n)
        p.put_reasoning(message, reasoning, body, n)
        prompt = tokens_for(seen.get("messages") or [])
        completion = tokens_for(message)
        payload = {
            "id": f"chatcmpl-{p.name}-{n}",
            "object": "chat.completion",
            "created": 1_700_000_000 + n,
            "model": self.model,
            "system_fingerprint": p.fingerprint(),
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": turn.finish_reason or finish
                         or ("tool_calls" if message.get("tool_calls") else "stop")}],
            "usage": p.usage(prompt, completion, tokens_for(reasoning) if reasoning else 0),
        }
        with self._lock:
            self.replies.append((200, payload))
        return 200, payload

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        emu = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed-ACK stall

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _send(self, reply: Reply) -> None:
                status, payload = reply
                text = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
                data = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain" if isinstance(payload, str) else "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    return

            def do_GET(self) -> None:
                path = self.path.rstrip("/") or "/"
                self._send(emu.personality.get(path, emu.model) or (404, {"error": {"message": f"no route {path}"}}))

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                path = self.path.rstrip("/")
                if path == "/v1/chat/completions":
                    self._send(emu.complete(raw))
                    return
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {}
                self._send(emu.personality.post(path, body, emu.model) or (404, {"error": {"message": f"no route {path}"}}))

        return Handler


PERSONALITIES: dict[str, Callable[[], Personality]] = {
    "vllm": VLLM,
    "deepseek": DeepSeek,
    "openai": OpenAI,
    "llama.cpp": LlamaCpp,
    "llama-cpp-python": LlamaCppPython,
    "ollama": Ollama,
    "sglang": SGLang,
    "sglang-deepseek": lambda: SGLang(template="deepseek-v3"),
    "openrouter": OpenRouter,
    "inline-think": InlineThink,
}


MODEL_NAMES = {"sglang-deepseek": "deepseek-ai/DeepSeek-V3.1"}
"""The served model name per personality when it matters (the thinking switch follows the model's template)."""


def model_for(name: str) -> str:
    return MODEL_NAMES.get(name, "emu-model")


def toml_value(v: Any) -> str:
    """``v`` as a TOML value (inline tables for dicts; JSON's strings, numbers and booleans are TOML's)."""
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + "}"
    return json.dumps(v)


def settings_lines(name: str, extra: dict[str, dict[str, Any]] | None = None) -> dict[str, list[str]]:
    """:func:`settings_for` (plus ``extra``) as TOML lines per table."""
    st = settings_for(name)
    for table, values in (extra or {}).items():
        st.setdefault(table, {}).update(values)
    return {table: [f"{k} = {toml_value(v)}" for k, v in values.items()] for table, values in st.items()}


def settings_for(name: str) -> dict[str, Any]:
    """``[model]``/``[agent]`` settings docs/run.md gives for each server kind (what a user would set)."""
    if name == "llama-cpp-python":
        return {"model": {"parse_text_tool_calls": True}, "agent": {"first_tool_choice": "first"}}
    if name in ("sglang", "sglang-deepseek"):  # thinking switched on; calls the parser missed are executed
        return {"model": {"parse_text_tool_calls": True, "thinking": True}, "agent": {}}
    if name == "openrouter":
        return {"model": {"thinking": True, "extra_body": {"reasoning": {"effort": "high"}}}, "agent": {}}
    if name == "inline-think":  # on: a call drafted inside <think> would be executed if it counted
        return {"model": {"parse_text_tool_calls": True}, "agent": {}}
    return {"model": {}, "agent": {}}


class Steady:
    """A trivial brain for long runs: one cheap, different tool call every turn, never an answer."""

    def __init__(self) -> None:
        self.n = 0
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> ScriptTurn:
        tools = {t.get("function", {}).get("name") for t in body.get("tools") or []}
        with self._lock:  # a counter, not the history: Ollama truncates the history
            self.n += 1
            n = self.n
        if "bash" in tools:
            return ScriptTurn(content=f"step {n}", tool_calls=[{"name": "bash", "id": f"s-{n}", "arguments": {"command": f"echo {n}"}}])
        return ScriptTurn(content=f"step {n}", tool_calls=[{"name": "list_fetched", "id": f"s-{n}", "arguments": {}}])
