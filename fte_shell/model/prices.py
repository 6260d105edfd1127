"""What a model's tokens cost: the built-in table of common models' prices (:data:`PRICES`), the price a run
uses (:func:`price_for`: ``[model.price]`` wins over the table) and the cost of one call's usage
(:func:`usage_cost`). Definitions: docs/run.md "Cost", docs/metrics.md "Cost".

The table is data, dated and sourced; a provider changes its prices without notice, so a user who
budgets real money sets ``[model.price]`` from the provider's page of the day.
"""

from __future__ import annotations

from typing import Any

from ..config import ModelConfig, ModelPrice


def usd(x: float | None) -> str:
    """THE way fte-shell writes an amount of dollars (live log, progress bar, report): ``$0.0042`` below a
    cent (4 decimals, so a small run never shows ``$0.00``), ``$1,234.56`` from a cent up, ``–`` when unknown."""
    if x is None:
        return "–"
    return f"${x:.4f}" if abs(x) < 0.01 else f"${x:,.2f}"


PRICES_DATE = "2025-09-05"
"""The day the prices below were in effect on the providers' pages."""

PRICES_SOURCES = {
    "openai": "https://openai.com/api/pricing (standard tier, not batch or flex)",
    "deepseek": "https://api-docs.deepseek.com/quick_start/pricing (price list from 2025-09-05 16:00 UTC)",
}
"""Where the prices of :data:`PRICES` come from, by provider."""

PRICES: dict[str, ModelPrice] = {
    # OpenAI, USD per million tokens: input, cached input, output (reasoning tokens are output tokens)
    "gpt-5": ModelPrice(input=1.25, cached_input=0.125, output=10.00),
    "gpt-5-mini": ModelPrice(input=0.25, cached_input=0.025, output=2.00),
    "gpt-5-nano": ModelPrice(input=0.05, cached_input=0.005, output=0.40),
    "gpt-4.1": ModelPrice(input=2.00, cached_input=0.50, output=8.00),
    "gpt-4.1-mini": ModelPrice(input=0.40, cached_input=0.10, output=1.60),
    "gpt-4.1-nano": ModelPrice(input=0.10, cached_input=0.025, output=0.40),
    "gpt-4o": ModelPrice(input=2.50, cached_input=1.25, output=10.00),
    "gpt-4o-mini": ModelPrice(input=0.15, cached_input=0.075, output=0.60),
    "o3": ModelPrice(input=2.00, cached_input=0.50, output=8.00),
    "o4-mini": ModelPrice(input=1.10, cached_input=0.275, output=4.40),
    # DeepSeek (V3.1: both names, one price): cache hit, cache miss, output
    "deepseek-chat": ModelPrice(input=0.56, cached_input=0.07, output=1.68),
    "deepseek-reasoner": ModelPrice(input=0.56, cached_input=0.07, output=1.68),
}
"""Prices of common API models (:data:`PRICES_DATE`, :data:`PRICES_SOURCES`), by the model name the API
takes. A name with a provider prefix (``openai/gpt-4o`` on a router) finds the entry of its last part."""


def price_for(cfg: ModelConfig) -> ModelPrice | None:
    """The price of ``cfg``'s model: ``[model.price]`` when set, else the table's entry of its name (or of
    the name after the last ``/``), else None (unknown: runs record tokens only)."""
    if cfg.price is not None:
        return cfg.price
    name = (cfg.model or "").strip()
    return PRICES.get(name) or PRICES.get(name.rsplit("/", 1)[-1])


def _int(x: Any) -> int:
    return int(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else 0


def _detail(usage: dict[str, Any], key: str, field: str) -> int:
    d = usage.get(key)
    return _int(d.get(field)) if isinstance(d, dict) else 0


def billed_tokens(usage: dict[str, Any]) -> tuple[int, int, int]:
    """``(uncached input, cached input, output)`` tokens of one call's usage object as the server sent it.

    Input: ``prompt_tokens`` (chat completions) or ``input_tokens`` (Responses API). Cached: OpenAI's
    ``prompt_tokens_details.cached_tokens`` / ``input_tokens_details.cached_tokens``, or DeepSeek's
    ``prompt_cache_hit_tokens``. Output: ``completion_tokens`` / ``output_tokens``, which include the
    reasoning tokens on OpenAI and DeepSeek; when the server reports ``reasoning_tokens`` OUTSIDE them
    (its ``total_tokens`` is prompt + completion + reasoning), they are added to the output."""
    prompt = _int(usage.get("prompt_tokens", usage.get("input_tokens")))
    output = _int(usage.get("completion_tokens", usage.get("output_tokens")))
    cached = (_detail(usage, "prompt_tokens_details", "cached_tokens")
              or _detail(usage, "input_tokens_details", "cached_tokens")
              or _int(usage.get("prompt_cache_hit_tokens")))
    cached = min(cached, prompt)
    apart = _int(usage.get("reasoning_tokens"))
    if apart and _int(usage.get("total_tokens")) == prompt + output + apart:
        output += apart
    return prompt - cached, cached, output


def reports_cached(usage: dict[str, Any]) -> bool:
    """Whether one call's usage object says how many prompt tokens the server's cache served (any of the
    fields :func:`billed_tokens` reads, 0 included); a server that never says leaves the share unknown."""
    return any(isinstance(usage.get(k), dict) and "cached_tokens" in usage[k]
               for k in ("prompt_tokens_details", "input_tokens_details")) or "prompt_cache_hit_tokens" in usage


def usage_cost(usage: dict[str, Any], price: ModelPrice) -> float:
    """USD of one call's usage at ``price``: uncached input × ``input`` + cached input × ``cached_input``
    (``input`` when unset) + output × ``output``, per million tokens (see :func:`billed_tokens`)."""
    fresh, cached, output = billed_tokens(usage)
    cached_price = price.input if price.cached_input is None else price.cached_input
    return (fresh * price.input + cached * cached_price + output * price.output) / 1_000_000


def unknown_price_note(cfg: ModelConfig) -> str:
    """The one line said when a model has no known price."""
    return (f"no price known for model {cfg.model!r}: tokens only, no cost (set [model.price] input, "
            f"cached_input, output in USD per million tokens)")
