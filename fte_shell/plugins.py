"""THE way fte-shell finds a plugin: one :class:`Registry` per kind — sandbox providers
(``sandbox.base.PROVIDERS``), benchmarks (``benchmarks.registry.BENCHMARKS``), profiles
(``profiles.base.IMPLEMENTATIONS``), context strategies (``agent.context.STRATEGY_CLASSES``), search backends
(``search.registry.BACKENDS``), retrievers (``search.retrievers.RETRIEVERS``), answer formats
(``profiles.answer_format.FORMATS``) and exporters (``export.base.EXPORTERS``: ``fte-shell export NAME``);
tests/thirdparty_plugins.py holds a third-party plugin of several.

A registry maps a name to a ``"module:attr"`` reference, imported on first use (so an optional heavy
dependency is imported only when its plugin is chosen). Besides the built-in names, every registry accepts
a third-party plugin as ``module:attr`` without any change to fte-shell: ``[search] backend =
"mypkg.search:MyBackend"`` imports ``mypkg.search`` and takes ``MyBackend``.

::

    BACKENDS = Registry("search backend", {"serper": "fte_shell.search.serper:PLUGIN"})
    BACKENDS.get("serper")            # the object that module holds under PLUGIN
    BACKENDS.get("mypkg.mod:Thing")   # a third-party plugin, by reference
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Iterator, Mapping
from typing import Generic, TypeVar

from .errors import ConfigError

T = TypeVar("T")


def is_reference(name: str) -> bool:
    """True when ``name`` is a ``module:attr`` reference (a dotted module path, a colon, an attribute)."""
    module, sep, attr = name.partition(":")
    return bool(sep) and bool(attr) and all(p.isidentifier() for p in module.split(".")) and all(
        p.isidentifier() for p in attr.split("."))


def load_reference(ref: str, what: str) -> object:
    """The object ``module:attr`` names; :class:`ConfigError` (naming ``what`` and the reference) when the
    module cannot be imported or has no such attribute."""
    module, _, attr = ref.partition(":")
    try:
        obj: object = importlib.import_module(module)
    except ImportError as e:
        raise ConfigError(f"{what} {ref!r}: cannot import {module!r} ({e})") from e
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ConfigError(f"{what} {ref!r}: {module!r} has no attribute {attr!r}") from None
    return obj


class Registry(Generic[T]):
    """The plugins of one kind: built-in names and ``module:attr`` references, each loaded once."""

    def __init__(self, kind: str, builtins: Mapping[str, str]):
        """``kind``: what a plugin is, for messages ("search backend"); ``builtins``: name -> ``module:attr``."""
        self.kind = kind
        self._refs: dict[str, str] = dict(builtins)
        self._loaded: dict[str, T] = {}
        self._lock = threading.Lock()

    def names(self) -> list[str]:
        """The built-in (and registered) names, in registration order."""
        return list(self._refs)

    def __iter__(self) -> Iterator[str]:
        """The built-in (and registered) names, in registration order."""
        return iter(list(self._refs))

    def __contains__(self, name: object) -> bool:
        """True when ``name`` is a built-in or registered name (a reference is not: see :meth:`knows`)."""
        return name in self._refs

    def values(self) -> list[T]:
        """Every built-in (and registered) plugin, loaded, in registration order."""
        return [self.get(name) for name in self]

    def loaded(self) -> list[T]:
        """The plugins loaded so far (by name or reference), each once."""
        with self._lock:
            return list({id(p): p for p in self._loaded.values()}.values())

    def register(self, name: str, ref: str) -> None:
        """Add ``name`` -> ``module:attr`` (e.g. from a test or an embedding program)."""
        if not is_reference(ref):
            raise ConfigError(f"{self.kind} {name!r}: {ref!r} is not a module:attr reference")
        with self._lock:
            self._refs[name] = ref
            self._loaded.pop(name, None)

    def knows(self, name: str) -> bool:
        """True when ``name`` is a built-in or registered name, or a ``module:attr`` reference."""
        return name in self._refs or is_reference(name)

    def get(self, name: str) -> T:
        """The plugin called ``name`` (or referenced by it); :class:`ConfigError` listing the known names."""
        with self._lock:
            if name in self._loaded:
                return self._loaded[name]
            ref = self._refs.get(name) or (name if is_reference(name) else None)
            if ref is None:
                raise ConfigError(
                    f"unknown {self.kind} {name!r} (known: {', '.join(self._refs)}; or a third-party one "
                    "as module:attr)"
                )
            plugin: T = load_reference(ref, self.kind)  # type: ignore[assignment]
            self._loaded[name] = plugin
            return plugin
