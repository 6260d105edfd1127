"""The model side: the client (:mod:`.client`), typed errors (:mod:`.errors`), context-window discovery
(:mod:`.window`) and tool calls left as text (:mod:`.textcalls`)."""

from .client import (
    ENDPOINT_HELP,
    PLACEHOLDER_API_KEY,
    REASONING_FIELDS,
    Completion,
    ModelClient,
    _describe,
    _retry_after_s,
    _to_completion,
    resolve_endpoint,
)
from .errors import (
    OVERFLOW_PATTERNS,
    AuthFailed,
    BadRequest,
    ContextOverflow,
    EndpointUnavailable,
    ModelCallError,
    classify_status,
    is_overflow_text,
)
from .window import ServerInfo, discover

__all__ = [
    "ENDPOINT_HELP", "OVERFLOW_PATTERNS", "PLACEHOLDER_API_KEY", "REASONING_FIELDS", "AuthFailed", "BadRequest",
    "Completion", "ContextOverflow", "EndpointUnavailable", "ModelCallError", "ModelClient", "ServerInfo",
    "_describe", "_retry_after_s", "_to_completion", "classify_status", "discover", "is_overflow_text",
    "resolve_endpoint",
]
