"""The base of every trajectory event (:mod:`.events`): ``t``, and unknown keys kept."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class EventBase(BaseModel):
    """What every event has: ``t`` (and any key a newer writer added, kept as it is)."""

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True)

    t: float = 0.0
    """Seconds since the run writer was opened."""
