"""Loopback emulators of real OpenAI-compatible servers: one personality per server kind.

``Emulator(personality, brain)`` serves ``POST /v1/chat/completions`` (plus each personality's discovery
routes) on 127.0.0.1. The *brain* is a policy of :mod:`fte_shell.policies` / :mod:`fte_shell.scripted`
(``request_json -> ScriptTurn``): it makes the real research moves; the *personality* wraps it in the
server's documented behaviour — its reasoning field, what it refuses in a request and with which status and
text, its context window, its discovery endpoints. Every behaviour is commented with its source (the table
"Real model servers" in /work/shared/DESIGN.md collects them).

Token counts follow :func:`fte_shell.scripted.tokens_for` (a quarter of the JSON length), so a test can
compute a window that overflows at a known turn.
"""

from __future__ import annotations

import copy
import json
import shlex
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from fte_shell.scripted import ScriptTurn, as_turn, tokens_for

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
                # thinking mode + tools: reasoning_content must be passed back (DeepSeek docs; DESIGN.md)
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

    def __init__(self, window: int = 1_000_000, slots: int = 1, thinking: bool = False):
        super().__init__(window)
        self.slots = slots
        self.thinking = thinking

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

    def shape(self, message: dict[str, Any], body: dict[str, Any], turn: ScriptTurn) -> str | None:
        prompt = tokens_for(body.get("messages") or [])
        if prompt + tokens_for(message) > self.slot_ctx:  # generation stops when the slot is full
            return "length"
        return None


class LlamaCppPython(Personality):
    """llama-cpp-python's stock ``python -m llama_cpp.server`` (measured here; DESIGN.md)."""

    name = "llama-cpp-python"
    owned_by = "me"

    def __init__(self, window: int = 1_000_000):
        super().__init__(window)
        self._ids: dict[str, str] = {}
        """Canonical (name, arguments) of a brain call rendered as text -> the brain's id."""

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
            blocks = []
            for call in calls:
                c = call["function"]
                args = json.loads(c["arguments"]) if c["arguments"] else {}
                self._ids[_canon(c["name"], json.dumps(args))] = call["id"]
                blocks.append("```json\n" + json.dumps({"name": c["name"], "arguments": args}) + "\n```")
            message["content"] = "\n".join([message.get("content") or "", *blocks]).lstrip()
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
        # num_ctx in an OpenAI-style request is ignored (ollama#2722; DESIGN.md)
        msgs = list(body.get("messages") or [])
        head = 1 if msgs and msgs[0].get("role") == "system" else 0
        sizes = [tokens_for(m) for m in msgs]
        total, dropped = sum(sizes), 0
        while len(msgs) - dropped > head + 1 and total > self.window:  # the oldest turns go first
            total -= sizes[head + dropped]
            dropped += 1
        self.truncated.append(dropped)
        return {**body, "messages": msgs[:head] + msgs[head + dropped:]}


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
        reasoning = getattr(turn, "reasoning", None)
        if reasoning is None and p.thinking:
            reasoning = f"Thinking about step {n} of the question."
        if p.reasoning_field and reasoning is not None:
            message[p.reasoning_field] = reasoning
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
}


def settings_for(name: str) -> dict[str, Any]:
    """``[model]``/``[agent]`` settings docs/run.md gives for each server kind (what a user would set)."""
    if name == "llama-cpp-python":
        return {"model": {"parse_text_tool_calls": True}, "agent": {"first_tool_choice": "first"}}
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
