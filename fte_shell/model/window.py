"""What the server says about itself: its context window and its kind, found through ONE table.

Order: ``model.context_window`` from the config wins (the probes still run: the kind and its warnings are
recorded); else the first kind of :data:`SERVER_KINDS` whose probe request is answered in its way gives the
window; else it is unknown. Each kind names its probe request, the reader of the answer (is it this kind?),
where its window is read (the same answer, or a second request) and the warning when no window is set:

========== =============================================== ======================================================
kind       probe                                           window
========== =============================================== ======================================================
vllm       ``GET {base_url}/models``, ``data[].max_model_len`` the same answer (vllm ModelCard)
llama.cpp  ``GET /props``, ``default_generation_settings.n_ctx`` the same answer: ONE slot's window (n_ctx / parallel)
ollama     ``GET /api/version`` answers at all              ``POST /api/show`` ``parameters`` ``num_ctx``; warns if unset
========== =============================================== ======================================================

Every probe is one short request (:data:`PROBE_TIMEOUT_S`) whose refusal (404, 405, 501…) just means "not this
kind". A probe that gets no answer at all (connection refused, timeout) ends the discovery: the server will
not answer the next one either, and the first model call reports the problem with its own retries.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

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
    """The server kind when a probe recognised it: ``vllm``, ``llama.cpp``, ``ollama``."""

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


@dataclass(frozen=True)
class ServerKind:
    """One row of the discovery table."""

    name: str
    probe: Request
    is_kind: Callable[[Any, str], bool]
    """Whether the probe's answer (JSON, or None when refused) comes from this kind of server."""
    window: Reader
    """Reads the window from :attr:`window_request`'s answer (or the probe's when that is None)."""
    source: str
    """What :attr:`ServerInfo.source` says when the window came from here."""
    window_request: Request | None = None
    warning: str | None = None
    """Recorded when this kind is recognised but gives no window."""


def _vllm_entries(answer: Any, model: str) -> list[dict[str, Any]]:
    entries = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(entries, list):
        return []
    mine = [e for e in entries if isinstance(e, dict) and e.get("id") == model]
    return [e for e in mine or entries if isinstance(e, dict) and isinstance(e.get("max_model_len"), int)]


def _vllm_window(answer: Any, model: str) -> int | None:
    entries = _vllm_entries(answer, model)
    return int(entries[0]["max_model_len"]) if entries else None


def _llama_cpp_window(answer: Any, model: str) -> int | None:
    settings = answer.get("default_generation_settings") if isinstance(answer, dict) else None
    n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
    return int(n_ctx) if isinstance(n_ctx, int) else None


def _ollama_window(answer: Any, model: str) -> int | None:
    params = str(answer.get("parameters") or "") if isinstance(answer, dict) else ""
    m = re.search(r"^\s*num_ctx\s+(\d+)", params, re.MULTILINE)
    return int(m.group(1)) if m else None


SERVER_KINDS: tuple[ServerKind, ...] = (
    # vLLM: GET /v1/models lists a ModelCard with max_model_len (vllm/entrypoints/openai/protocol.py)
    ServerKind("vllm", Request("GET", "/models", under="base"),
               is_kind=lambda a, m: bool(_vllm_entries(a, m)), window=_vllm_window, source="/v1/models max_model_len"),
    # llama.cpp server: GET /props, default_generation_settings.n_ctx = one slot's window (tools/server/README.md)
    ServerKind("llama.cpp", Request("GET", "/props"),
               is_kind=lambda a, m: _llama_cpp_window(a, m) is not None, window=_llama_cpp_window, source="/props n_ctx"),
    # Ollama: GET /api/version answers; POST /api/show's Modelfile-style parameters hold num_ctx (docs/api.md)
    ServerKind("ollama", Request("GET", "/api/version"), is_kind=lambda a, m: a is not None,
               window=_ollama_window, source="/api/show num_ctx",
               window_request=Request("POST", "/api/show", body=lambda m: {"model": m}), warning=OLLAMA_WARNING),
)
"""The discovery table, probed in this order (the first kind recognised ends it)."""


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


def discover(base_url: str | None, api_key: str, model: str, configured: int | None = None) -> ServerInfo:
    """Probe the endpoint through :data:`SERVER_KINDS` (see the module docstring). ``configured``
    (``model.context_window``) wins, but the kinds' warnings are still looked for."""
    import httpx

    info = ServerInfo()
    if configured is not None:
        info.context_window, info.source = configured, "config"
    if base_url is None:  # api.openai.com: nothing to probe
        return info
    with httpx.Client(headers={"Authorization": f"Bearer {api_key}"}) as client:
        try:
            for kind in SERVER_KINDS:
                answer = _ask(client, base_url, kind.probe, model)
                if not kind.is_kind(answer, model):
                    continue
                info.server = kind.name
                if kind.window_request is not None:
                    answer = _ask(client, base_url, kind.window_request, model)
                window = kind.window(answer, model)
                if window is None:
                    if kind.warning:
                        info.warnings.append(kind.warning)
                elif info.context_window is None:
                    info.context_window, info.source = window, kind.source
                break
        except _NoAnswer:
            pass  # the first model call reports an endpoint that does not answer, with its retries
    return info
