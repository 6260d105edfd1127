"""The sandbox: a hardened box per question with a persistent bash session and a host-side gateway.

::

    from fte_shell.sandbox import Sandbox
    with Sandbox(SandboxConfig()) as sb:
        obs = sb.run("cd /work && ls")      # Observation(output, exit_code, timed_out, truncated, ...)

The runtime here (:mod:`.facade`, :mod:`.pool`, :mod:`.session`, :mod:`.output`, :mod:`.gateway`,
:mod:`.ownership`) is provider-agnostic; a provider (:mod:`.base`: ``SandboxProvider``, ``Box``) starts
the boxes, one package of :mod:`.providers` each: ``[sandbox] provider = "docker"``
(:mod:`.providers.docker`), ``"podman"`` (:mod:`.providers.podman`) or ``"bwrap"`` (:mod:`.providers.bwrap`);
they share the hardened layout of :mod:`.hardening` and the image build inputs of :mod:`.image_inputs`.
"""

from .base import Box, BoxSpec, Check, GcResult, SandboxProvider, get_provider, stop_all_boxes
from .facade import Sandbox
from .output import Observation
from .pool import SandboxPool

__all__ = [
    "Box",
    "BoxSpec",
    "Check",
    "GcResult",
    "Observation",
    "Sandbox",
    "SandboxPool",
    "SandboxProvider",
    "get_provider",
    "stop_all_boxes",
]
