"""What the server is and how it behaves, in ONE table: :data:`SERVER_KINDS`.

Each row (:class:`ServerKind`) says how the kind is recognised and where its context window is read
(discovery), and how it behaves: how thinking is switched on and off (:attr:`ServerKind.thinking`), how a
forced first tool call must be sent so that the engine really enforces it (:attr:`ServerKind.force`),
whether it escapes what the model sees (:attr:`ServerKind.escapes`), and a notice recorded when it is
recognised. What must be passed back is the same for every kind: reasoning under the wire name it came in
(``model.reasoning_passback``) and opaque blobs (:data:`~fte_shell.model.completion.OPAQUE_FIELDS`)
unchanged; inline ``<think>`` is split out of every reply (:mod:`.completion`).

Discovery order: ``model.context_window`` from the config wins for the window (the probes still run: the
kind and its warnings are recorded); ``model.server`` names the kind when no probe can tell; else the first
kind whose probe request is answered in its way gives the kind and the window; else both are unknown:

================ ================================================ ================================================
kind             probe                                            window
================ ================================================ ================================================
sglang           ``GET /get_model_info`` answers ``model_path``   ``GET {base_url}/models`` ``max_model_len``
vllm             ``GET {base_url}/models``, ``data[].max_model_len`` the same answer (vllm ModelCard)
openrouter       ``GET {base_url}/models``, ``supported_parameters`` the same answer, ``context_length``
llama-cpp-python ``GET {base_url}/models``, ``owned_by: "me"``     none published
llama.cpp        ``GET /props``, ``default_generation_settings.n_ctx`` the same answer: ONE slot's window
ollama           ``GET /api/version`` answers at all              ``POST /api/show`` ``num_ctx``; warns if unset
================ ================================================ ================================================

Every probe is one short request (:data:`PROBE_TIMEOUT_S`, asked once per discovery even when two kinds
read its answer) whose refusal (404, 405, 501…) just means "not this kind". A probe that gets no answer at
all (connection refused, timeout) ends the discovery: the server will not answer the next one either, and
the first model call reports the problem with its own retries.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..errors import ModelError

PROBE_TIMEOUT_S = 5.0

OLLAMA_WARNING = (
    "the server is Ollama and its model has no num_ctx set: Ollama silently truncates the conversation to "
    "its default context (often 4096 tokens) with HTTP 200 and ignores num_ctx sent in OpenAI-style requests "
    "(ollama#2722). Set it on the server (Modelfile `PARAMETER num_ctx 32768`, or OLLAMA_CONTEXT_LENGTH) and "
    "give the same number as model.context_window."
)


class ServerInfo(BaseModel):
    """The context window and server kind found for an endpoint (recorded in the start event)."""

    model_config = ConfigDict(extra="forbid")

    context_window: int | None = None
    """Tokens the model's context holds (prompt + reply), or None when unknown."""

    source: str = "unknown"
    """Where :attr:`context_window` came from: ``config``, ``/v1/models max_model_len``, ``/props n_ctx``,
    ``/api/show num_ctx`` or ``unknown``."""

    server: str | None = None
    """The server kind (a name of :data:`SERVER_KINDS`) when a probe recognised it or ``model.server`` named it."""

    warnings: list[str] = Field(default_factory=list)
    """Things the user should fix (e.g. Ollama without num_ctx)."""


@dataclass(frozen=True)
class Request:
    """One probe request: ``path`` under the base URL (``base``) or under the server root (``root``: the
    base URL without its ``/v1``); ``body(model)`` is the JSON body of a POST."""

    method: Literal["GET", "POST"]
    path: str
    under: Literal["base", "root"] = "root"
    body: Callable[[str], dict[str, Any]] | None = None


Reader = Callable[[Any, str], int | None]
"""(the answer's JSON, the model name) → the window in tokens, or None."""


Thinking = Callable[[bool, str], dict[str, Any]]
"""(on, the model name) → the request fields that switch the model's thinking on or off."""


def _template_switch(on: bool, model: str) -> dict[str, Any]:
    # chat templates read the switch from chat_template_kwargs: Qwen3's reads ``enable_thinking``, DeepSeek-V3.x's
    # reads ``thinking`` (SGLang and vLLM docs, "reasoning models"); a key the template does not read is ignored
    key = "thinking" if re.search(r"deepseek[-_.]?v3", model, re.IGNORECASE) else "enable_thinking"
    return {"chat_template_kwargs": {key: on}}


def _sglang_switch(on: bool, model: str) -> dict[str, Any]:
    # separate_reasoning (default true) puts the reasoning in reasoning_content instead of the content
    return {**_template_switch(on, model), "separate_reasoning": True}


def _openrouter_switch(on: bool, model: str) -> dict[str, Any]:
    # reasoning: {effort | max_tokens, exclude, enabled} (OpenRouter docs, "Reasoning Tokens"); effort and
    # max_tokens go in model.extra_body's ``reasoning``, merged with this
    return {"reasoning": {"enabled": on}}


@dataclass(frozen=True)
class ServerKind:
    """One row of the table of server kinds: how it is recognised and how it behaves."""

    name: str
    probe: Request | None
    """The discovery request (None: never discovered, only named by ``model.server``)."""
    is_kind: Callable[[Any, str], bool] = lambda a, m: False
    """Whether the probe's answer (JSON, or None when refused) comes from this kind of server."""
    window: Reader = lambda a, m: None
    """Reads the window from :attr:`window_request`'s answer (or the probe's when that is None)."""
    source: str = "unknown"
    """What :attr:`ServerInfo.source` says when the window came from here."""
    window_request: Request | None = None
    warning: str | None = None
    """Recorded when this kind is recognised but gives no window."""
    notice: str | None = None
    """Recorded whenever this kind is recognised (a trap the user should know of)."""
    thinking: Thinking | None = None
    """Request fields for ``model.thinking`` (None: the kind has no switch; a warning says it is not sent)."""
    force: Literal["tool_choice", "named", "json_schema"] = "tool_choice"
    """How a forced first call (``agent.first_tool_choice``) is sent so that the engine enforces it:
    ``tool_choice`` as asked; ``named`` = only a named ``tool_choice`` (``required`` names the first tool);
    ``json_schema`` = no ``tool_choice`` but a ``response_format`` JSON schema of the call object, which the
    engine enforces by grammar (the reply is the call as JSON text: ``model.parse_text_tool_calls``)."""
    escapes: bool = False
    """The server HTML-escapes what the model sees: answer tags written escaped count as the answer."""
    effort: Callable[[str], dict[str, Any]] = lambda e: {"reasoning_effort": e}
    """The request fields for ``model.reasoning_effort`` on chat completions (OpenAI's top-level
    ``reasoning_effort``; OpenRouter's ``reasoning.effort``)."""


def _vllm_entries(answer: Any, model: str, key: str = "max_model_len") -> list[dict[str, Any]]:
    entries = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(entries, list):
        return []
    mine = [e for e in entries if isinstance(e, dict) and e.get("id") == model]
    return [e for e in mine or entries if isinstance(e, dict) and isinstance(e.get(key), int)]


def _vllm_window(answer: Any, model: str) -> int | None:
    entries = _vllm_entries(answer, model)
    return int(entries[0]["max_model_len"]) if entries else None


def _openrouter_window(answer: Any, model: str) -> int | None:
    entries = [e for e in _vllm_entries(answer, model, "context_length") if isinstance(e.get("supported_parameters"), list)]
    return int(entries[0]["context_length"]) if entries else None


def _is_llama_cpp_python(answer: Any, model: str) -> bool:
    entries = answer.get("data") if isinstance(answer, dict) else None
    return isinstance(entries, list) and any(isinstance(e, dict) and e.get("owned_by") == "me" for e in entries)


def _llama_cpp_window(answer: Any, model: str) -> int | None:
    settings = answer.get("default_generation_settings") if isinstance(answer, dict) else None
    n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
    return int(n_ctx) if isinstance(n_ctx, int) else None


def _ollama_window(answer: Any, model: str) -> int | None:
    params = str(answer.get("parameters") or "") if isinstance(answer, dict) else ""
    m = re.search(r"^\s*num_ctx\s+(\d+)", params, re.MULTILINE)
    return int(m.group(1)) if m else None


ESCAPES_NOTICE = (
    "the server is llama-cpp-python: its tool-calling chat format (chatml-function-calling) HTML-escapes every "
    "message the model sees (jinja2 select_autoescape), so the model reads <answer> as &lt;answer&gt; and may "
    "answer that way; such answers are unescaped and recorded as answer_unescaped. Serve the model with "
    "another engine (llama.cpp's server) to avoid it."
)

MODELS = Request("GET", "/models", under="base")

SERVER_KINDS: tuple[ServerKind, ...] = (
    # SGLang: GET /get_model_info answers model_path (sglang/srt/entrypoints/http_server.py); its /v1/models
    # ModelCard has max_model_len like vLLM's, so SGLang is asked first
    ServerKind("sglang", Request("GET", "/get_model_info"), is_kind=lambda a, m: isinstance(a, dict) and "model_path" in a,
               window=_vllm_window, source="/v1/models max_model_len", window_request=MODELS, thinking=_sglang_switch),
    # vLLM: GET /v1/models lists a ModelCard with max_model_len (vllm/entrypoints/openai/protocol.py)
    ServerKind("vllm", MODELS, is_kind=lambda a, m: bool(_vllm_entries(a, m)), window=_vllm_window,
               source="/v1/models max_model_len", thinking=_template_switch),
    # OpenRouter: GET /api/v1/models lists context_length and supported_parameters per model (API reference)
    ServerKind("openrouter", MODELS, is_kind=lambda a, m: _openrouter_window(a, m) is not None, window=_openrouter_window,
               source="/v1/models context_length", thinking=_openrouter_switch,
               effort=lambda e: {"reasoning": {"effort": e}}),
    # llama-cpp-python: /v1/models entries are owned_by "me" (llama_cpp/server/app.py); a named tool_choice is
    # enforced by grammar, a string one is refused with HTTP 500 (measured here)
    ServerKind("llama-cpp-python", MODELS, is_kind=_is_llama_cpp_python, notice=ESCAPES_NOTICE, force="named",
               escapes=True),
    # llama.cpp server: GET /props, default_generation_settings.n_ctx = one slot's window (tools/server/README.md);
    # tool_choice is not enforced for Qwen2.5-Coder's template, response_format json_schema is (measured here)
    ServerKind("llama.cpp", Request("GET", "/props"), is_kind=lambda a, m: _llama_cpp_window(a, m) is not None,
               window=_llama_cpp_window, source="/props n_ctx", thinking=_template_switch, force="json_schema"),
    # Ollama: GET /api/version answers; POST /api/show's Modelfile-style parameters hold num_ctx (docs/api.md)
    ServerKind("ollama", Request("GET", "/api/version"), is_kind=lambda a, m: a is not None,
               window=_ollama_window, source="/api/show num_ctx",
               window_request=Request("POST", "/api/show", body=lambda m: {"model": m}), warning=OLLAMA_WARNING),
)
"""The table of server kinds, probed in this order (the first kind recognised ends it)."""

UNKNOWN = ServerKind("unknown", None)
"""How a server no probe recognised is treated: requests as configured, no thinking switch."""


def kind_named(name: str | None) -> ServerKind:
    """The row of ``name`` (:data:`UNKNOWN` for None or an unknown name)."""
    return next((k for k in SERVER_KINDS if k.name == name), UNKNOWN)


def thinking_fields(kind: ServerKind, on: bool | None, model: str) -> dict[str, Any]:
    """The request fields that set ``model.thinking`` on this kind (``{}`` when None or no switch)."""
    return kind.thinking(on, model) if on is not None and kind.thinking is not None else {}


def _call_schema(tool: dict[str, Any]) -> dict[str, Any]:
    fn = tool.get("function") or {}
    params = fn.get("parameters") or {"type": "object"}
    return {"type": "object", "properties": {"name": {"const": fn.get("name")}, "arguments": params},
            "required": ["name", "arguments"]}


def forcing(kind: ServerKind, choice: str | dict[str, Any] | None, tools: list[dict[str, Any]]) -> dict[str, Any]:
    """The request fields that force ``choice`` (a ``tool_choice``) the way ``kind`` enforces it (see
    :attr:`ServerKind.force`); ``{}`` sends no choice (the server's ``auto``)."""
    if choice is None or not tools:
        return {}
    named = choice if isinstance(choice, dict) else None
    if kind.force == "tool_choice":
        return {"tool_choice": choice}
    if choice not in ("required",) and named is None:
        return {}  # "auto"/"none" as strings: the default, and llama-cpp-python refuses strings
    if kind.force == "named":
        return {"tool_choice": named or {"type": "function", "function": {"name": tools[0]["function"]["name"]}}}
    want = [t for t in tools if named is None or (t.get("function") or {}).get("name") == named["function"]["name"]]
    schemas = [_call_schema(t) for t in want or tools]
    schema = schemas[0] if len(schemas) == 1 else {"anyOf": schemas}
    return {"response_format": {"type": "json_schema", "json_schema": {"name": "tool_call", "schema": schema}}}


class _NoAnswer(Exception):
    """The server did not answer a probe at all (connection refused, timeout)."""


def _root(base_url: str) -> str:
    return re.sub(r"/v1/?$", "", base_url.rstrip("/"))


def _ask(client: Any, base_url: str, req: Request, model: str) -> Any:
    """The JSON of a 200 answer, None for any other answer; raises :class:`_NoAnswer` without one."""
    import httpx

    url = (base_url.rstrip("/") if req.under == "base" else _root(base_url)) + req.path
    kw: dict[str, Any] = {"json": req.body(model)} if req.body is not None else {}
    try:
        r = client.request(req.method, url, timeout=PROBE_TIMEOUT_S, **kw)
    except (httpx.TimeoutException, httpx.TransportError) as e:
        raise _NoAnswer(str(e)) from e
    except Exception:  # noqa: BLE001 - any other failure of a probe only means "not this server"
        return None
    if r.status_code != 200:
        return None
    try:
        return r.json()
    except ValueError:
        return None


def discover(base_url: str | None, api_key: str, model: str, configured: int | None = None,
             kind: str | None = None) -> ServerInfo:
    """Probe the endpoint through :data:`SERVER_KINDS` (see the module docstring). ``configured``
    (``model.context_window``) wins, but the kinds' warnings are still looked for; ``kind``
    (``model.server``) names the kind instead of the probes (its window request, if any, is still asked)."""
    import httpx

    info = ServerInfo()
    if configured is not None:
        info.context_window, info.source = configured, "config"
    named = None
    if kind is not None:
        named = next((k for k in SERVER_KINDS if k.name == kind), None)
        if named is None:
            raise ModelError(f"model.server = {kind!r} is not a server kind; the kinds: "
                             + ", ".join(k.name for k in SERVER_KINDS))
        info.server = named.name
    if base_url is None:  # api.openai.com: nothing to probe
        return info
    asked: dict[Request, Any] = {}

    def ask(client: Any, req: Request) -> Any:
        if req not in asked:
            asked[req] = _ask(client, base_url, req, model)
        return asked[req]

    with httpx.Client(headers={"Authorization": f"Bearer {api_key}"}) as client:
        try:
            for k in [named] if named is not None else SERVER_KINDS:
                answer = ask(client, k.probe) if k.probe is not None else None
                if named is None and not k.is_kind(answer, model):
                    continue
                info.server = k.name
                if k.window_request is not None:
                    answer = ask(client, k.window_request)
                window = k.window(answer, model)
                if window is None:
                    if k.warning:
                        info.warnings.append(k.warning)
                elif info.context_window is None:
                    info.context_window, info.source = window, k.source
                if k.notice:
                    info.warnings.append(k.notice)
                break
        except _NoAnswer:
            pass  # the first model call reports an endpoint that does not answer, with its retries
    return info
