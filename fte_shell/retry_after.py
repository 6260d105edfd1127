"""How long a server asks a client to wait before it asks again: the ``Retry-After`` family of headers, read
the same way by every HTTP client of fte-shell (the model endpoint's, Serper's, an embeddings endpoint's)."""

from __future__ import annotations

import email.utils
import time
from typing import Any


def retry_after_s(headers: Any) -> float | None:
    """Seconds from ``retry-after-ms`` / ``Retry-After`` (seconds or an HTTP date), or None."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
