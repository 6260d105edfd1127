"""The sandbox image: its build inputs, their content hash, the build, and the check before use.

The image is built from ``Dockerfile.sandbox`` plus ``sandbox/bin`` and ``sandbox/lib`` with the legacy
builder through the docker SDK (buildx is not needed). Its label holds a hash of those inputs: a process
checks it once and then creates containers from the image's id (see :func:`ensure_image`).
"""

from __future__ import annotations

import sys
import threading
import time

from ....config import SandboxConfig
from ....errors import SandboxUnavailable
from ...base import Log
from ...image_inputs import DOCKERFILE, HASH_LABEL, IMAGE_LABEL, REPO_ROOT, build_context, content_hash
from .api import client


def stderr_log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def image_status(cfg: SandboxConfig) -> tuple[bool, str]:
    """(up to date, reason) of the sandbox image for the current build inputs."""
    ok, reason, _ = _check_image(cfg)
    return ok, reason


def _check_image(cfg: SandboxConfig) -> tuple[bool, str, str | None]:
    """``image_status`` plus the id of the image that was checked (None when there is none)."""
    import docker.errors

    try:
        img = client().images.get(cfg.image)
    except docker.errors.ImageNotFound:
        return False, f"image {cfg.image} does not exist", None
    if not (REPO_ROOT / DOCKERFILE).exists():  # an installed package without the build inputs
        return True, f"image {cfg.image} exists (no {DOCKERFILE} here to check it against)", img.id
    want = content_hash(cfg)
    have = (img.labels or {}).get(HASH_LABEL)
    if have != want:
        return False, f"image {cfg.image} is out of date (Dockerfile.sandbox or sandbox/ changed)", img.id
    return True, f"image {cfg.image} is up to date ({want})", img.id


def build_image(cfg: SandboxConfig, log: Log = stderr_log) -> str:
    """Build the sandbox image (legacy builder via the SDK); returns the image id."""
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
            tag=cfg.image,
            buildargs={"BASE_IMAGE": cfg.base_image},
            labels={HASH_LABEL: digest, IMAGE_LABEL: "1"},
            rm=True,
            forcerm=True,
            decode=True,
        )
        image_id = None
        tail: list[str] = []
        for chunk in stream:
            if "error" in chunk:
                raise SandboxUnavailable(
                    f"building {cfg.image} failed: {chunk['error'].strip()}\n" + "".join(tail[-15:])
                )
            if "stream" in chunk:
                tail.append(chunk["stream"])
                tail = tail[-30:]
            aux = chunk.get("aux")
            if isinstance(aux, dict) and "ID" in aux:
                image_id = aux["ID"]
    except docker.errors.APIError as e:
        raise SandboxUnavailable(f"building {cfg.image} failed: {e}") from e
    log(f"[fte-shell] built {cfg.image} in {time.monotonic() - t0:.1f} s")
    return image_id or c.images.get(cfg.image).id


_image_lock = threading.Lock()
_image_ok: dict[tuple[str, str], str] = {}
"""(image, base image) -> id of the image this process checked against its build inputs (or built)."""


def ensure_image(cfg: SandboxConfig, *, force: bool = False, log: Log = stderr_log) -> str:
    """Make sure ``cfg.image`` exists and matches the build inputs; build it when not (or when ``force``).

    Returns the image's id. Containers are created from that id, not from the tag, so a process that
    rebuilds the tag from other build inputs (a checkout being edited) never changes the image under a
    running harness: its host code and the in-container warden and helpers always match."""
    key = (cfg.image, cfg.base_image)
    with _image_lock:
        if not force and key in _image_ok:
            return _image_ok[key]
        ok, reason, image_id = _check_image(cfg)
        if force or not ok or image_id is None:
            if not ok and not cfg.auto_build and not force:
                raise SandboxUnavailable(f"{reason}; build it with: fte-shell sandbox build")
            if not force:
                log(f"[fte-shell] {reason}")
            image_id = build_image(cfg, log)
        _image_ok[key] = image_id
        return image_id


def forget(cfg: SandboxConfig) -> None:
    """Check (and build if need be) ``cfg.image`` again at the next :func:`ensure_image` (its checked
    image was pruned meanwhile)."""
    with _image_lock:
        _image_ok.pop((cfg.image, cfg.base_image), None)


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
