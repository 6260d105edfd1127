"""The base of every configuration model: unknown keys are an error, every field has a docstring."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """A pydantic model with ``extra="forbid"``, field docstrings as descriptions, validated assignment."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, validate_assignment=True)
