"""Exceptions. Each carries a message written for whoever will read it: the model or the user.

Rule of thumb: an error the *model* caused or can work around (a refused URL, a bad regex, an unknown tool)
becomes an observation string; an error the *user* must fix (no Docker daemon, no API key, a bad config
key) stops the run with a message that names the fix.

An exception that ends a run for a named reason carries it as the class attribute ``stop_reason`` (a name of
:data:`fte_shell.stops.STOPS`), read by :func:`fte_shell.stops.stop_of_exception` along the cause chain; one
without it ends a run as ``crashed`` (in the loop) or ``failed`` (outside it).
"""

from __future__ import annotations


class FteError(Exception):
    """Base class. ``str(err)`` is a complete, human-readable one-line (or short) message."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.message


# --- errors for the user (stop the run, name the fix) -------------------------------------------------
class ConfigError(FteError):
    """The configuration is invalid (unknown key, bad value, missing endpoint)."""


class SandboxUnavailable(FteError):
    """No engine answers (the Docker daemon, podman, bubblewrap), or the sandbox image cannot be built."""

    stop_reason = "sandbox_unavailable"


class SandboxError(FteError):
    """The box or the shell session failed in a way the harness cannot recover from."""

    stop_reason = "sandbox_unavailable"


class SearchUnavailable(FteError):
    """The search backend cannot be used at all (missing key, missing index, unreachable service)."""

    stop_reason = "search_unavailable"


class ModelError(FteError):
    """The model endpoint failed after all retries, or is not configured. The subclasses in
    :mod:`fte_shell.model.errors` name finer stop reasons (``auth``, ``bad_request``, ``context_overflow``…)."""

    stop_reason = "endpoint_unavailable"


# --- errors for the model (become an observation) -----------------------------------------------------
class ToolError(FteError):
    """A tool call failed; ``message`` is shown to the model as the observation."""


class FetchRefused(ToolError):
    """A fetch was refused or failed (policy, status, size, type, timeout). ``message`` is one line."""


class BudgetExceeded(ToolError):
    """A per-question budget (pages, bytes, time) is spent."""
