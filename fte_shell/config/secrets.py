"""The one table of the configuration's secrets (:data:`SECRETS`): each ``SecretStr`` key of the config
models, with the environment variable that gives it.

Everything that treats a secret specially reads this table: :func:`~fte_shell.config.load_config` (the
variable overrides the TOML file), the config digest (a secret is never in it), a fork (the keys come from
the environment, never from the recorded configuration) and a distributed sweep (the secrets travel in the
Ray runtime environment, not in the shipped configuration). A new secret is one row here
(tests/test_config.py checks every ``SecretStr`` field of the models has its row). A third-party search
backend's environment-only secrets come from its plugin (``fte_shell.search.registry.secrets``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ConfigSecret:
    """One secret key of the configuration."""

    table: str
    """Its table, dotted (``model``, ``search``, ``search.embeddings``); a ``model`` secret is also one in
    every other table of the model's shape (``agent.summary_model``)."""
    key: str
    """Its key in the table (``api_key``)."""
    env: str
    """The environment variable that gives it (``OPENAI_API_KEY``)."""

    @property
    def path(self) -> tuple[str, ...]:
        """Table and key as a path of keys (``("search", "embeddings", "api_key")``)."""
        return (*self.table.split("."), self.key)


SECRETS: tuple[ConfigSecret, ...] = (
    ConfigSecret("model", "api_key", "OPENAI_API_KEY"),
    ConfigSecret("search", "serper_api_key", "SERPER_API_KEY"),
    ConfigSecret("search.embeddings", "api_key", "FTE_EMBEDDINGS_API_KEY"),
)
"""Every secret of the configuration (tables in the order of :class:`~fte_shell.config.RunConfig`)."""


def secret_variable(table: str, key: str) -> str:
    """The environment variable of the secret ``table.key`` (KeyError: no such secret)."""
    for s in SECRETS:
        if (s.table, s.key) == (table, key):
            return s.env
    raise KeyError(f"{table}.{key} is no secret of the configuration (config/secrets.py SECRETS)")
