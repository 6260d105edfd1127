"""Docker as a sandbox provider: a hardened container per box (:mod:`.container`), its shell an exec
attached over the API socket (:mod:`.api`), the image built from the checkout (:mod:`.image`)."""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from typing import Any

from ....errors import SandboxError
from ...base import BoxFields, BoxSpec
from ...image_inputs import ImageProvider
from . import container, doctor, image
from .api import TtyExec, daemon_errors, exec_text, start_tty_exec


@dataclass
class DockerBox(BoxFields):
    """A started sandbox container."""

    user: str
    image: str
    direct_channel: bool = False
    """runc passes the gateway directory's FIFOs through; gVisor's gofer does not."""
    _root_pid: int | None = None

    def root_pid(self) -> int | None:
        """The container's main process on this host (runc only: gVisor's processes are not the host's)."""
        if self.direct_channel and self._root_pid is None:
            with daemon_errors("asking for the sandbox's main process"):
                self._root_pid = container.main_pid(self.id)
        return self._root_pid if self.direct_channel else None

    def spawn(self, argv: list[str], *, timeout: float) -> TtyExec:
        with daemon_errors("starting a shell in the sandbox"):
            return start_tty_exec(self.id, argv, self.user, timeout=timeout)

    def is_running(self) -> bool:
        with daemon_errors("asking whether the sandbox runs"):
            return container.is_running(self.id)

    def exec(self, argv: list[str]) -> tuple[int, str]:
        return exec_text(self.id, argv, self.user)

    def signal_warden(self) -> None:
        container.signal_warden(self.id)

    def terminal_argv(self, env: dict[str, str]) -> list[str]:
        docker = shutil.which("docker")
        if docker is None:
            raise SandboxError("the docker CLI is not on PATH; install docker.io")
        flags = [f for k, v in env.items() for f in ("-e", f"{k}={v}")]
        return [docker, "exec", "-it" if sys.stdin.isatty() else "-i", "-u", self.user, *flags, self.id, "bash", "--norc", "-i"]

    def stop(self) -> None:
        container.remove(self.id)

    def describe(self) -> dict[str, Any]:
        return {"provider": "docker", "id": self.id, "name": self.name, "run_id": self.run_id, "image": self.image}


class DockerProvider(ImageProvider):
    """Boxes are hardened Docker containers (see :mod:`.container`)."""

    name = "docker"

    def start(self, spec: BoxSpec) -> DockerBox:
        """A started container; a daemon that stops answering raises ``SandboxUnavailable`` (stop reason
        ``sandbox_unavailable``), not the SDK's connection error."""
        with daemon_errors("starting the sandbox container"):
            h = container.create(spec.config, spec.workspace, spec.gateway_dir, spec.run_id, ttl_s=spec.ttl_s,
                                 corpus=spec.corpus)
        return DockerBox(h.id, h.name, spec.run_id, spec.workspace, spec.gateway_dir, spec.config.user,
                         spec.config.image, direct_channel=spec.config.runtime == "runc")

    @property
    def backend(self) -> str:
        return f"the Docker daemon ({os.environ.get('DOCKER_HOST') or 'unix:///var/run/docker.sock'})"

    def probe(self, timeout_s: float = 10.0) -> str | None:
        """``docker ping`` with a fresh client (``DOCKER_HOST`` or the default socket)."""
        try:
            import docker

            c = docker.from_env(timeout=timeout_s)
            try:
                c.ping()
            finally:
                c.close()
        except Exception as e:  # noqa: BLE001 - any failure means "no daemon"
            return f"{e.__class__.__name__}: {e}"
        return None

    def stop_all(self) -> None:
        container.remove_all_live()


PROVIDER = DockerProvider(image.IMAGES, gc_boxes=container.gc, prune_images=image.prune_images,
                          doctor=doctor.doctor)
