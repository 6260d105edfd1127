"""THE registry of search backends: everything fte-shell needs to know about one, declared by its plugin.

A backend plugin (:class:`BackendPlugin`) says which ``[search]`` keys it reads, its secrets (an environment
variable and, for a built-in, the config key holding it), its health check (what a sweep probes while the
backend is down), the name its searches are recorded under (the result cache's and the snapshot's key,
found without building it) with the parameters of each search, how the sweep manifest names it, and how
it is built. The rest of fte-shell asks this module and never names a backend::

    plugin = selected(cfg)           # [search] backend, or "auto": the first AUTO plugin that is usable
    plugin.build(cfg)                # the SearchBackend
    plugin.recorded_name(cfg)        # "serper", "local:hotpotqa:1a2b3c4d", …

Built in: ``serper`` (web), ``local`` (a corpus and a retriever), ``none``. A third-party backend plugs in
as ``[search] backend = "module:Class"`` (a plugin, or a class whose instance is one; its own settings in
``[search.options]``): docs/search.md "Adding a search backend".
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..errors import ConfigError
from ..plugins import Registry
from .base import SearchBackend, Secret

if TYPE_CHECKING:  # pragma: no cover
    from ..config import SearchConfig
    from .local import LocalCorpus

AUTO = ("serper", "local")
"""What ``[search] backend = "auto"`` tries, in order: the first plugin whose :meth:`BackendPlugin.usable`
is true (else no search)."""


@runtime_checkable
class BackendPlugin(Protocol):
    """A search backend plugin (see the module docstring)."""

    name: str
    """The registry name (``serper``): ``[search] backend`` and the manifest's ``search_backend``."""

    config_keys: tuple[str, ...]
    """The ``[search]`` keys it reads (``serper_url``, ``corpus``, ``options.url`` …), for ``--help`` and the
    docs; keys outside it do not change its results."""

    secrets: tuple[Secret, ...]
    """Its secrets (never recorded; the config digest leaves them out)."""

    remote: bool
    """A network service: a sweep probes it before its first run and while it is down."""

    def usable(self, cfg: SearchConfig) -> bool:
        """Whether ``auto`` may pick it: configured (a key, a corpus) without building anything."""
        ...

    def recorded_name(self, cfg: SearchConfig) -> str:
        """The name its searches are recorded under (result cache, snapshot, trajectory), found without
        building it; it changes whenever the same query could get other results (endpoint, corpus,
        retriever)."""
        ...

    def search_params(self, query: str, n: int) -> dict[str, Any]:
        """Every parameter one search sends (the snapshot's key besides the name)."""
        ...

    def probe(self, cfg: SearchConfig, timeout_s: float) -> str | None:
        """Its health check, within about ``timeout_s``: None when it answers, else one line saying what
        failed (spends no query)."""
        ...

    def build(self, cfg: SearchConfig) -> SearchBackend:
        """The backend (raises :class:`fte_shell.errors.SearchUnavailable` naming the fix)."""
        ...

    def describe(self, cfg: SearchConfig) -> str:
        """One line for ``fte-shell run``: what searches, and why."""
        ...


BACKENDS: Registry[Any] = Registry(
    "search backend",
    {
        "serper": "fte_shell.search.serper:PLUGIN",
        "local": "fte_shell.search.local:PLUGIN",
        "none": "fte_shell.search.registry:NONE",
    },
)
"""The search backends: built-in names, or a third-party one as ``module:Class``."""

_lock = threading.Lock()
_instances: dict[type, Any] = {}


def plugin(name: str) -> BackendPlugin:
    """The plugin called (or referenced by) ``name``; a class is instantiated once. :class:`ConfigError`
    naming ``[search] backend`` when it cannot be loaded or is no backend plugin."""
    try:
        obj = BACKENDS.get(name)
    except ConfigError as e:
        raise ConfigError(f"[search] backend = {name!r}: {e}") from e
    if isinstance(obj, type):
        with _lock:
            obj = _instances.get(obj) or _instances.setdefault(obj, obj())
    if not isinstance(obj, BackendPlugin):
        raise ConfigError(
            f"[search] backend = {name!r} is no search backend plugin (it needs name, config_keys, secrets, "
            "remote, usable, recorded_name, search_params, probe, build, describe: docs/search.md)"
        )
    return obj


def selected(cfg: SearchConfig) -> BackendPlugin:
    """The plugin ``cfg`` selects: ``[search] backend``, or for ``auto`` the first of :data:`AUTO` that is
    usable (``none`` when none is)."""
    if cfg.backend != "auto":
        return plugin(cfg.backend)
    for name in AUTO:
        p = plugin(name)
        if p.usable(cfg):
            return p
    return plugin("none")


def selected_for_replay(cfg: SearchConfig, recorded: Callable[[str], bool]) -> BackendPlugin:
    """:func:`selected`, where ``auto`` also takes a plugin whose searches the snapshot being replayed
    holds (``recorded(name)``), e.g. Serper's without its key."""
    if cfg.backend != "auto":
        return plugin(cfg.backend)
    for name in AUTO:
        p = plugin(name)
        if p.usable(cfg) or (p.name != "none" and recorded(p.recorded_name(cfg))):
            return p
    return plugin("none")


def secrets(cfg: SearchConfig | None = None) -> tuple[Secret, ...]:
    """The secrets of every built-in backend, and of the configured one when it is a third-party plugin."""
    out: list[Secret] = []
    names: Iterable[str] = [*BACKENDS.names(), *([cfg.backend] if cfg is not None and cfg.backend not in
                                                 ("auto", *BACKENDS.names()) else [])]
    for name in names:
        out += [s for s in plugin(name).secrets if s not in out]
    return tuple(out)


def secret_value(cfg: SearchConfig, secret: Secret) -> str | None:
    """A secret's value: the ``[search]`` key when set, else its environment variable (None: unset)."""
    value = getattr(cfg, secret.key, None) if secret.key else None
    if value is not None and hasattr(value, "get_secret_value"):
        value = value.get_secret_value()
    return str(value) if value else (os.environ.get(secret.env) or None)


class NoSearch:
    """``none``: no search tool (the agent fetches the URLs it knows)."""

    name = "none"
    config_keys: tuple[str, ...] = ()
    secrets: tuple[Secret, ...] = ()
    remote = False

    def usable(self, cfg: SearchConfig) -> bool:
        return True

    def recorded_name(self, cfg: SearchConfig) -> str:
        return "none"

    def search_params(self, query: str, n: int) -> dict[str, Any]:
        return {"n": int(n), "q": query}

    def probe(self, cfg: SearchConfig, timeout_s: float) -> str | None:
        return None

    def build(self, cfg: SearchConfig) -> SearchBackend:
        raise ConfigError("[search] backend = \"none\" has no search backend to build")

    def describe(self, cfg: SearchConfig) -> str:
        if cfg.backend == "none":
            return "search: none (backend = none): the agent can only fetch URLs it already knows"
        return ("search: none — no SERPER_API_KEY and no local corpus configured (set SERPER_API_KEY, or --corpus "
                "DIR built by `fte-shell corpus build`); the agent can only fetch URLs it already knows")


NONE = NoSearch()


def page_source(cfg: SearchConfig) -> LocalCorpus | None:
    """The local corpus of ``cfg.corpus`` as a page source (fetch serves its docids and urls with no HTTP),
    whatever the search backend, or None when no corpus is configured."""
    if cfg.corpus is None:
        return None
    from .local import open_corpus

    return open_corpus(cfg.corpus, cfg.retriever, cfg)
