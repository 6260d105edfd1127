"""``[model.price]`` (what a model's tokens cost) and ``[budget]`` (what a whole sweep may spend)."""

from __future__ import annotations

from pydantic import Field

from .base import StrictModel


class ModelPrice(StrictModel):
    """A model's price in USD per million tokens (what the provider's price page says). Reasoning tokens
    are output tokens unless the server reports them apart (docs/run.md, "Cost")."""

    input: float = Field(ge=0)
    """USD per million prompt (input) tokens that were not read from the provider's prompt cache."""

    cached_input: float | None = Field(default=None, ge=0)
    """USD per million prompt tokens the server reports as read from its cache. None = the ``input`` price."""

    output: float = Field(ge=0)
    """USD per million completion (output) tokens, reasoning tokens included."""


class BudgetConfig(StrictModel):
    """What one ``fte-shell bench`` sweep may spend in all (its runs on disk included; docs/run.md,
    "Budgets"). Not part of the config digest: a later ``bench`` with a higher budget resumes."""

    max_cost: float | None = Field(default=None, gt=0)
    """USD the sweep's runs may cost in all; the sweep stops starting runs before it would pass it (needs a
    price: ``[model.price]`` or a model of the built-in price table). None = no limit."""

    max_tokens_total: int | None = Field(default=None, gt=0)
    """Tokens (prompt + completion, of every run of the sweep) the sweep may spend in all; it stops
    starting runs before it would pass them. None = no limit."""
