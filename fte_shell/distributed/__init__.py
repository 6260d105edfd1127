"""Sweeps across many machines on Ray (the optional ``ray`` extra: ``pip install 'fte-shell[ray]'``).

Every (question, profile, repetition) of a sweep is one Ray task that does the whole run on the node it
lands on (container, gateway, loop; the unix socket never leaves the node) in a temporary directory and
returns that run directory as compressed bytes with its result. The driver alone writes the sweep
directory, in the same format as a local sweep (:mod:`fte_shell.sweep`), so resume, judge and
report work unchanged. Search results and converted pages go through one cache actor on the driver's
node, so every node sees the same results and page text and a URL is downloaded once per sweep.

Modules: :mod:`.packing` (run directory <-> bytes, atomic placement), :mod:`.caches` (the cache actor and
its node-side proxies), :mod:`.task` (what runs on a node), :mod:`.nodes` (Docker and image checks,
image shipping), :mod:`.executor` (:class:`RayExecutor`, the driver side). ``ray`` is imported lazily:
nothing here is needed by a local sweep. Guide: docs/distributed.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from .executor import RayExecutor

__all__ = ["RayExecutor"]


def __getattr__(name: str) -> Any:
    if name == "RayExecutor":
        from .executor import RayExecutor

        return RayExecutor
    raise AttributeError(name)
