"""Podman as a sandbox provider: the hardened box of every container provider, started by podman's
CLI (no daemon; rootful or rootless), its shell a ``podman exec -it`` driven by pexpect (:mod:`.box`)."""

from __future__ import annotations

from ....errors import SandboxError
from ...base import BoxSpec
from ...image_inputs import ImageProvider
from . import box, cli, doctor, image


class PodmanProvider(ImageProvider):
    name = "podman"

    def start(self, spec: BoxSpec) -> box.PodmanBox:
        return box.start(spec)

    @property
    def backend(self) -> str:
        return f"podman ({'rootless' if cli.rootless() else 'rootful'}, no daemon)"

    def probe(self, timeout_s: float = 10.0) -> str | None:
        try:
            cli.run(["info", "--format", "{{.Host.OCIRuntime.Name}}"], timeout=timeout_s, doing="probing")
        except SandboxError as e:
            return str(e)
        return None

    def stop_all(self) -> None:
        box.remove_all_live()


PROVIDER = PodmanProvider(image.IMAGES, gc_boxes=box.gc, prune_images=image.prune_images, doctor=doctor.doctor)
