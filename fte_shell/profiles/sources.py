"""Where the shell profile gets a box started ahead and where it gives it back (a pool's ``acquire`` and
``release``): the seams :class:`~.base.QuestionContext` holds."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ..sandbox import Sandbox
    from ..world import RunWorld


class SandboxSource(Protocol):
    """Hands out a started box: ``source(world=, run_id=)`` (e.g. ``SandboxPool.acquire``)."""

    def __call__(self, *, world: RunWorld, run_id: str) -> Sandbox: ...


class SandboxRelease(Protocol):
    """Takes back a box a :class:`SandboxSource` handed out: ``release(sandbox)`` (e.g. ``SandboxPool.release``)."""

    def __call__(self, sandbox: Sandbox, /) -> object: ...
