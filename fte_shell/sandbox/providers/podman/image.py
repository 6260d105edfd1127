"""The sandbox image in podman's storage (root's, or the plain user's when rootless): taken from the
Docker image when Docker has an up-to-date one (``docker save | podman load``, about 10 s), else built by
podman from ``Dockerfile.sandbox`` with the base image podman already holds (``--pull=never``: no registry).
The check before use is the shared :class:`~fte_shell.sandbox.image_inputs.CheckedImages`."""

from __future__ import annotations

import json
import shutil
import subprocess
import time

from ....config import SandboxConfig
from ....errors import SandboxError
from ...base import Log
from ...image_inputs import (
    DOCKERFILE,
    HASH_LABEL,
    IMAGE_LABEL,
    REPO_ROOT,
    CheckedImages,
    content_hash,
    content_tag,
)
from . import cli


def _inspect(name: str) -> dict | None:
    res = cli.run(["image", "inspect", name], check=False, timeout=60)
    if res.returncode != 0:
        return None
    data = json.loads(res.stdout or b"[]")
    return data[0] if data else None


class PodmanImages:
    """podman's images (an :class:`~fte_shell.sandbox.image_inputs.ImageEngine`)."""

    where = " in podman"
    prepare_hint = "fte-shell sandbox build --sandbox-provider podman (loads it from Docker or builds it)"

    def inspect(self, name: str) -> tuple[str, dict[str, str]] | None:
        info = _inspect(name)
        if info is None:
            return None
        return info["Id"], info.get("Labels") or (info.get("Config") or {}).get("Labels") or {}

    def make(self, cfg: SandboxConfig, log: Log) -> None:
        """Load ``cfg.image`` from Docker when Docker holds it for the current build inputs, else build it."""
        checkout = (REPO_ROOT / DOCKERFILE).exists()
        for name in ([content_tag(cfg), cfg.image] if checkout else [cfg.image]):
            if _docker_has(name, content_hash(cfg) if checkout else None):
                _load_from_docker(name, log)
                return
        build_image(cfg, log)

    def tag(self, image_id: str, name: str) -> None:
        cli.run(["tag", image_id, name], timeout=60, doing=f"tagging {name}")


IMAGES = CheckedImages(PodmanImages())
ensure_image = IMAGES.ensure
forget = IMAGES.forget


def _docker_has(name: str, want: str | None) -> bool:
    """Docker is reachable from this process and holds ``name`` (with content hash ``want`` when given)."""
    docker = shutil.which("docker")
    if docker is None:
        return False
    res = subprocess.run([docker, "image", "inspect", "--format", "{{json .Config.Labels}}", name],
                         check=False, capture_output=True, timeout=60)
    if res.returncode != 0:
        return False
    labels = json.loads(res.stdout or b"null") or {}
    return want is None or labels.get(HASH_LABEL) == want


def _load_from_docker(name: str, log: Log) -> None:
    log(f"[fte-shell] loading {name} from Docker into podman (docker save | podman load)")
    t0 = time.monotonic()
    save = subprocess.Popen([shutil.which("docker") or "docker", "save", name], stdout=subprocess.PIPE)
    try:
        load = subprocess.run([cli.binary(), "--log-level=error", "load"], check=False, stdin=save.stdout,
                              capture_output=True, timeout=900, env=cli.client_env())
    finally:
        if save.stdout is not None:
            save.stdout.close()
        save.wait(timeout=60)
    if save.returncode != 0 or load.returncode != 0:
        raise SandboxError(f"docker save {name} | podman load failed: {load.stderr.decode(errors='replace')[-400:]}")
    log(f"[fte-shell] loaded {name} into podman in {time.monotonic() - t0:.1f} s")


def build_image(cfg: SandboxConfig, log: Log) -> None:
    """Build ``cfg.image`` with podman from the checkout (the base image must be in podman's storage:
    loaded from Docker here when it is there)."""
    if not (REPO_ROOT / DOCKERFILE).exists():
        raise SandboxError(f"{REPO_ROOT / DOCKERFILE} not found; run from a checkout of fte-shell")
    if _inspect(cfg.base_image) is None:
        if not _docker_has(cfg.base_image, None):
            raise SandboxError(
                f"base image {cfg.base_image} is in neither podman's storage nor Docker's; create it offline: "
                f"bash sandbox/bootstrap-base.sh {cfg.base_image}, then docker save {cfg.base_image} | podman load")
        _load_from_docker(cfg.base_image, log)
    log(f"[fte-shell] building {cfg.image} with podman from {DOCKERFILE} (~1 min)")
    t0 = time.monotonic()
    cli.run(["build", "--pull=never", "--runtime", "runc", "-f", str(REPO_ROOT / DOCKERFILE),
             "--build-arg", f"BASE_IMAGE={cfg.base_image}", "--label", f"{HASH_LABEL}={content_hash(cfg)}",
             "--label", f"{IMAGE_LABEL}=1", "-t", content_tag(cfg), "-t", cfg.image, str(REPO_ROOT)], timeout=1800,
            doing=f"building {cfg.image}")
    log(f"[fte-shell] built {cfg.image} with podman in {time.monotonic() - t0:.1f} s")


def prune_images() -> tuple[int, int]:
    """Remove dangling sandbox images (superseded by a reload or rebuild) no box uses."""
    res = cli.run(["image", "prune", "-f", "--filter", f"label={IMAGE_LABEL}=1"], check=False, timeout=300)
    return len([line for line in res.stdout.decode().splitlines() if line.strip()]), 0
