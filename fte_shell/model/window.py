"""What the server says about itself: its context window and whether it is Ollama.

Order: ``model.context_window`` from the config, else vLLM's ``GET /v1/models`` ``data[].max_model_len``,
else llama.cpp's ``GET /props`` ``default_generation_settings.n_ctx`` (the window of ONE slot: n_ctx divided
by the parallel slots), else Ollama's ``POST /api/show`` ``num_ctx`` parameter, else unknown. Every probe is
a short GET/POST whose failure just means "not this kind of server".
"""

from __future__ import annotations

import re
from typing import Any

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


def _root(base_url: str) -> str:
    return re.sub(r"/v1/?$", "", base_url.rstrip("/"))


def _get_json(client: Any, method: str, url: str, **kw: Any) -> Any:
    try:
        r = client.request(method, url, timeout=PROBE_TIMEOUT_S, **kw)
    except Exception:  # noqa: BLE001 - a failed probe only means "not this server"
        return None
    if r.status_code != 200:
        return None
    try:
        return r.json()
    except ValueError:
        return None


def discover(base_url: str | None, api_key: str, model: str, configured: int | None = None) -> ServerInfo:
    """Probe the endpoint (see the module docstring). ``configured`` (``model.context_window``) wins, but
    the Ollama check still runs."""
    import httpx

    info = ServerInfo()
    if configured is not None:
        info.context_window, info.source = configured, "config"
    if base_url is None:  # api.openai.com: nothing to probe
        return info
    headers = {"Authorization": f"Bearer {api_key}"}
    root = _root(base_url)
    with httpx.Client(headers=headers) as client:
        models = _get_json(client, "GET", base_url.rstrip("/") + "/models")
        entries = models.get("data") if isinstance(models, dict) else None
        if isinstance(entries, list):
            mine = [e for e in entries if isinstance(e, dict) and e.get("id") == model] or [
                e for e in entries if isinstance(e, dict)
            ]
            for e in mine:
                if isinstance(e.get("max_model_len"), int):  # vLLM (vllm/entrypoints/openai/protocol.py ModelCard)
                    info.server = "vllm"
                    if info.context_window is None:
                        info.context_window, info.source = int(e["max_model_len"]), "/v1/models max_model_len"
                    break
        if info.server is None:
            props = _get_json(client, "GET", root + "/props")
            settings = props.get("default_generation_settings") if isinstance(props, dict) else None
            if isinstance(settings, dict) and isinstance(settings.get("n_ctx"), int):  # llama.cpp tools/server
                info.server = "llama.cpp"
                if info.context_window is None:
                    info.context_window, info.source = int(settings["n_ctx"]), "/props n_ctx"
        if info.server is None and _get_json(client, "GET", root + "/api/version") is not None:
            info.server = "ollama"
            shown = _get_json(client, "POST", root + "/api/show", json={"model": model})
            params = str(shown.get("parameters") or "") if isinstance(shown, dict) else ""
            m = re.search(r"^\s*num_ctx\s+(\d+)", params, re.MULTILINE)
            if m:
                if info.context_window is None:
                    info.context_window, info.source = int(m.group(1)), "/api/show num_ctx"
            else:
                info.warnings.append(OLLAMA_WARNING)
    return info
