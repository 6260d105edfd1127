"""The model side: the :class:`Model` protocol (:mod:`.base`), its client (:mod:`.client`: pacing, retries
and one-shot :meth:`ModelClient.ask`) and the wire APIs behind it (:mod:`.wire`: chat completions,
:mod:`.chat`, or the Responses API, :mod:`.responses`), what a call returns (:mod:`.completion`), typed
errors (:mod:`.errors`), context-window discovery (:mod:`.window`) and tool calls left as text
(:mod:`.textcalls`)."""

from .base import Model, RetryListener
from .chat import to_completion
from .client import (
    ENDPOINT_HELP,
    PLACEHOLDER_API_KEY,
    ModelClient,
    describe_error,
    resolve_endpoint,
)
from .completion import REASONING_FIELDS, Completion
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
from .window import SERVER_KINDS, ServerInfo, ServerKind, discover

__all__ = [
    "ENDPOINT_HELP", "OVERFLOW_PATTERNS", "PLACEHOLDER_API_KEY", "REASONING_FIELDS", "SERVER_KINDS", "AuthFailed",
    "BadRequest", "Completion", "ContextOverflow", "EndpointUnavailable", "Model", "ModelCallError", "ModelClient",
    "RetryListener", "ServerInfo", "ServerKind", "classify_status", "describe_error", "discover",
    "is_overflow_text", "resolve_endpoint", "to_completion",
]
