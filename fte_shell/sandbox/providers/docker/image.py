"""The sandbox image in Docker: the build, and the engine the one check before use binds to
(:class:`~fte_shell.sandbox.image_inputs.CheckedImages`).

The image is built from ``Dockerfile.sandbox`` plus ``sandbox/bin`` and ``sandbox/lib`` with the legacy
builder through the docker SDK (buildx is not needed). Its label holds a hash of those inputs: a process
checks it once and then creates containers from the image's id (see :func:`ensure_image`). A build is
tagged by that hash too (:func:`~fte_shell.sandbox.image_inputs.content_tag`) and then as ``cfg.image``.
"""

from __future__ import annotations

import time

from ....config import SandboxConfig
from ....errors import SandboxUnavailable
from ...base import Log
from ...image_inputs import (
    DOCKERFILE,
    HASH_LABEL,
    IMAGE_LABEL,
    REPO_ROOT,
    CheckedImages,
    build_context,
    content_hash,
    content_tag,
    repo_and_tag,
)
from .api import client


class DockerImages:
    """The Docker daemon's images (an :class:`~fte_shell.sandbox.image_inputs.ImageEngine`)."""

    where = ""
    prepare_hint = "fte-shell sandbox build"

    def inspect(self, name: str) -> tuple[str, dict[str, str]] | None:
        import docker.errors

        try:
            img = client().images.get(name)
        except docker.errors.ImageNotFound:
            return None
        return img.id, dict(img.labels or {})

    def make(self, cfg: SandboxConfig, log: Log) -> None:
        build_image(cfg, log)

    def tag(self, image_id: str, name: str) -> None:
        client().api.tag(image_id, *repo_and_tag(name))


IMAGES = CheckedImages(DockerImages())
ensure_image = IMAGES.ensure
forget = IMAGES.forget


def build_image(cfg: SandboxConfig, log: Log) -> None:
    """Build the sandbox image (legacy builder via the SDK)."""
    import docker.errors

    if not (REPO_ROOT / DOCKERFILE).exists():
        raise SandboxUnavailable(f"{REPO_ROOT / DOCKERFILE} not found; run from a checkout of fte-shell")
    c = client()
    try:
        c.images.get(cfg.base_image)
    except docker.errors.ImageNotFound as e:
        raise SandboxUnavailable(
            f"base image {cfg.base_image} is missing; create it offline: bash sandbox/bootstrap-base.sh "
            f"{cfg.base_image}"
        ) from e
    digest = content_hash(cfg)
    log(f"[fte-shell] building sandbox image {cfg.image} from {DOCKERFILE} (first use or changed; ~1 min)")
    t0 = time.monotonic()
    try:
        stream = c.api.build(
            fileobj=build_context(REPO_ROOT),
            custom_context=True,
            dockerfile=DOCKERFILE,
            tag=content_tag(cfg, digest),
            buildargs={"BASE_IMAGE": cfg.base_image},
            labels={HASH_LABEL: digest, IMAGE_LABEL: "1"},
            rm=True,
            forcerm=True,
            decode=True,
        )
        tail: list[str] = []
        for chunk in stream:
            if "error" in chunk:
                raise SandboxUnavailable(
                    f"building {cfg.image} failed: {chunk['error'].strip()}\n" + "".join(tail[-15:])
                )
            if "stream" in chunk:
                tail.append(chunk["stream"])
                tail = tail[-30:]
        c.api.tag(content_tag(cfg, digest), *repo_and_tag(cfg.image))
    except docker.errors.APIError as e:
        raise SandboxUnavailable(f"building {cfg.image} failed: {e}") from e
    log(f"[fte-shell] built {cfg.image} in {time.monotonic() - t0:.1f} s")


def prune_images() -> tuple[int, int]:
    """Remove superseded sandbox images (untagged by a rebuild) that no container uses; returns
    (images removed, bytes reclaimed). Not part of :func:`gc`, which harnesses run at start: a harness
    still creating containers from the old image id must not lose it under its feet."""
    filters = {"dangling": True, "label": f"{IMAGE_LABEL}=1"}
    try:
        c = client()
        before = {img.id for img in c.images.list(filters=filters)}
        res = c.images.prune(filters=filters)
        after = {img.id for img in c.images.list(filters=filters)}
    except Exception as e:
        raise SandboxUnavailable(f"could not prune old sandbox images: {e}") from e
    return len(before - after), int(res.get("SpaceReclaimed") or 0)
