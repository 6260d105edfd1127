"""The grading model: :class:`LLMJudge` calls it through :class:`fte_shell.model.ModelClient` (its retries,
error classes and recorded request parameters). What it is asked and how its reply is read are a
preset's (:mod:`.presets`: BrowseComp, BrowseComp-ZH, SimpleQA, HLE).

The judge is configured with a :class:`fte_shell.config.ModelConfig`; :func:`judge_model_config` makes
one with the judge's settings (temperature 0, sent with every request).
"""

from __future__ import annotations

from typing import Any

from ..config import ModelConfig, env_overrides
from ..errors import ModelError
from ..model import Completion, ModelClient

JUDGE_DEFAULTS: dict[str, Any] = {"temperature": 0.0, "top_p": 1.0, "max_tokens": 1024, "timeout_s": 120.0,
                                  "max_retries": 4}
"""The grading model's settings unless given: greedy (temperature 0), a short completion, a short timeout."""


def judge_model_config(model: str, *, base_url: str | None = None, api_key: str | None = None,
                       **settings: Any) -> ModelConfig:
    """The grading model's :class:`ModelConfig`: :data:`JUDGE_DEFAULTS` < ``settings``; the endpoint and
    key default to ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` (a placeholder key is sent when unset)."""
    env = env_overrides().get("model", {})
    return ModelConfig.model_validate({
        **JUDGE_DEFAULTS, **settings, "model": model,
        "base_url": base_url or env.get("base_url"), "api_key": api_key or env.get("api_key"),
    })


def ask(client: ModelClient, prompt: str, max_tokens: int | None = None,
        temperature: float | None = None) -> Completion:
    """One user prompt → the completion (no tools), through ``client``; a failed call raises
    :class:`ModelError` saying it was the judge's."""
    try:
        return client.ask(prompt, max_tokens=max_tokens, temperature=temperature)
    except ModelError as e:
        raise ModelError(f"judge model call failed: {e.__class__.__name__}: {e}") from e


class LLMJudge:
    """A grading model over :class:`ModelClient` (a preset says what to ask it)."""

    def __init__(self, cfg: ModelConfig):
        self.cfg = cfg
        self.client = ModelClient(cfg)
        self.model: str = self.client.model
        """The grading model's name (recorded with each verdict; a cached verdict of another is redone)."""

    def call(self, prompt: str, *, temperature: float | None = None) -> Completion:
        """Send one grading prompt; :class:`ModelError` when the call fails."""
        return ask(self.client, prompt, temperature=temperature)
