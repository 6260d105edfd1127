"""Podman as a sandbox provider: the hardened box of every container provider, started by podman's
CLI (no daemon; rootful or rootless), its shell a ``podman exec -it`` driven by pexpect (:mod:`.box`)."""

from __future__ import annotations

from ....config import SandboxConfig
from ....errors import SandboxError
from ...base import BoxSpec, Check, GcResult, Log
from . import box, cli, doctor, image


class PodmanProvider:
    name = "podman"

    def start(self, spec: BoxSpec) -> box.PodmanBox:
        return box.start(spec)

    def prepare(self, cfg: SandboxConfig, *, force: bool = False, log: Log | None = None) -> str:
        return image.ensure_image(cfg, force=force, log=log)

    def status(self, cfg: SandboxConfig) -> tuple[bool, str]:
        return image.status(cfg)

    def gc(self, *, log: Log | None = None, images: bool = False) -> GcResult:
        res = box.gc(log=log)
        if images:
            res.images, res.reclaimed = image.prune_images()
        return res

    def doctor(self, cfg: SandboxConfig) -> list[Check]:
        return doctor.doctor(cfg)

    @property
    def backend(self) -> str:
        return f"podman ({'rootless' if cli.rootless() else 'rootful'}, no daemon)"

    def probe(self, timeout_s: float = 10.0) -> str | None:
        try:
            cli.run(["info", "--format", "{{.Host.OCIRuntime.Name}}"], timeout=timeout_s, doing="probing")
        except SandboxError as e:
            return str(e)
        return None

    def install_cleanup_handlers(self) -> None:
        box.install_cleanup_handlers()

    def stop_all(self) -> None:
        box.remove_all_live()


PROVIDER = PodmanProvider()
