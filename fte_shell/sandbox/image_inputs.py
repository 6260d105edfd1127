"""The sandbox image's build inputs, shared by every provider that builds or checks it (Docker, podman):
``Dockerfile.sandbox`` plus ``sandbox/bin`` and ``sandbox/lib``, their content hash (the image's label)
and the build context as a tar; :class:`CheckedImages`, the one check of an engine's image against
them before use (built or loaded when missing or stale), which each image-based provider binds to its
engine (an :class:`ImageEngine`); and :class:`ImageProvider`, the part of those providers that only
delegates to their engine's image check, gc, prune and doctor."""

from __future__ import annotations

import hashlib
import io
import sys
import tarfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from ..config import SandboxConfig
from ..errors import SandboxUnavailable
from .base import Check, GcResult, Log

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = "Dockerfile.sandbox"
CONTEXT_DIRS = ("sandbox/bin", "sandbox/lib")
HASH_LABEL = "fte-shell.content-hash"
IMAGE_LABEL = "fte-shell.image"
"""Set on every sandbox image this code builds (``prune_images`` removes superseded ones by it)."""


def context_files(root: Path) -> list[tuple[str, Path]]:
    files = [(DOCKERFILE, root / DOCKERFILE)]
    for d in CONTEXT_DIRS:
        base = root / d
        if base.is_dir():
            for p in sorted(base.rglob("*")):
                if p.is_file() and "__pycache__" not in p.parts:
                    files.append((p.relative_to(root).as_posix(), p))
    return files


def content_hash(cfg: SandboxConfig, root: Path = REPO_ROOT) -> str:
    """sha256 over the build inputs: Dockerfile, sandbox/bin, sandbox/lib (names, modes, bytes), base image."""
    h = hashlib.sha256(f"base={cfg.base_image}\n".encode())
    for name, path in context_files(root):
        h.update(f"{name}\0{path.stat().st_mode & 0o111:o}\0".encode())
        h.update(path.read_bytes())
        h.update(b"\0")
    return h.hexdigest()[:24]


def content_tag(cfg: SandboxConfig, digest: str | None = None) -> str:
    """``cfg.image``'s repository tagged by the build inputs' hash (``fte-shell-sandbox:c-<hash>``): every
    build tags it beside ``cfg.image``, and the check looks for it first, so checkouts with different
    ``sandbox/`` sharing an engine each find their own image instead of rebuilding ``cfg.image`` in turn."""
    return f"{repo_and_tag(cfg.image)[0]}:c-{digest or content_hash(cfg)}"


def repo_and_tag(name: str) -> tuple[str, str]:
    """``repo:tag`` split at the tag's colon (not a registry's port); the tag ``latest`` when none."""
    colon = name.rfind(":")
    return (name[:colon], name[colon + 1:]) if colon > name.rfind("/") else (name, "latest")


def build_context(root: Path) -> io.BytesIO:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for d in CONTEXT_DIRS:  # the directories exist in the context even when empty
            info = tarfile.TarInfo(d)
            info.type = tarfile.DIRTYPE
            info.mode = 0o755
            tar.addfile(info)
        for name, path in context_files(root):
            info = tarfile.TarInfo(name)
            info.size = path.stat().st_size
            info.mode = 0o755 if path.stat().st_mode & 0o111 else 0o644
            with path.open("rb") as f:
                tar.addfile(info, f)
    buf.seek(0)
    return buf


def stderr_log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class ImageEngine(Protocol):
    """What an engine that keeps the sandbox image (Docker, podman) gives :class:`CheckedImages`."""

    where: str
    """Where the image is, for messages (``""`` or e.g. ``" in podman"``)."""
    prepare_hint: str
    """The command that prepares the image by hand."""

    def inspect(self, name: str) -> tuple[str, dict[str, str]] | None:
        """(id, labels) of the image called ``name``; None when the engine has none."""
        ...

    def make(self, cfg: SandboxConfig, log: Log) -> None:
        """Build (or load) ``cfg.image`` from the current build inputs; raises when it cannot."""
        ...

    def tag(self, image_id: str, name: str) -> None:
        """Name the image ``image_id`` ``name`` too."""
        ...


def image_status(engine: ImageEngine, cfg: SandboxConfig) -> tuple[bool, str, str | None]:
    """(up to date, reason, id of the image checked or None) of ``cfg.image`` for the current build inputs."""
    found = engine.inspect(cfg.image)
    name = f"image {cfg.image}{engine.where}"
    if found is None:
        if (REPO_ROOT / DOCKERFILE).exists():
            mine = engine.inspect(content_tag(cfg))
            if mine is not None and mine[1].get(HASH_LABEL) == content_hash(cfg):
                return True, f"image {content_tag(cfg)}{engine.where} is up to date", mine[0]
        return False, f"{name} does not exist", None
    image_id, labels = found
    if not (REPO_ROOT / DOCKERFILE).exists():  # an installed package without the build inputs
        return True, f"{name} exists (no {DOCKERFILE} here to check it against)", image_id
    want = content_hash(cfg)
    if labels.get(HASH_LABEL) == want:
        return True, f"{name} is up to date ({want})", image_id
    mine = engine.inspect(content_tag(cfg, want))  # cfg.image was built from other inputs since
    if mine is not None and mine[1].get(HASH_LABEL) == want:
        return True, f"image {content_tag(cfg, want)}{engine.where} is up to date", mine[0]
    return False, f"{name} is out of date ({DOCKERFILE} or sandbox/ changed)", image_id


class CheckedImages:
    """The image ids one process checked against the build inputs, for one engine. Boxes are created from
    the id, not from the tag, so a process that rebuilds the tag from other build inputs (a checkout being
    edited) never changes the image under a running harness: its host code and the in-box warden and
    helpers always match."""

    def __init__(self, engine: ImageEngine) -> None:
        self.engine = engine
        self._lock = threading.Lock()
        self._ok: dict[tuple[str, str], str] = {}

    def ensure(self, cfg: SandboxConfig, *, force: bool = False, log: Log | None = None) -> str:
        """The id of an up-to-date ``cfg.image`` (built or loaded when missing, stale or ``force``; a
        missing or stale one without ``sandbox.auto_build`` is :class:`SandboxUnavailable`)."""
        say = log or stderr_log
        key = (cfg.image, cfg.base_image)
        with self._lock:
            if not force and key in self._ok:
                return self._ok[key]
            ok, reason, image_id = image_status(self.engine, cfg)
            if force or not ok or image_id is None:
                if not ok and not cfg.auto_build and not force:
                    raise SandboxUnavailable(f"{reason}; prepare it with: {self.engine.prepare_hint}")
                if not force:
                    say(f"[fte-shell] {reason}")
                self.engine.make(cfg, say)
                ok, reason, image_id = image_status(self.engine, cfg)
                if not ok or image_id is None:
                    raise SandboxUnavailable(f"after building or loading it: {reason}")
            else:
                self._name(image_id, cfg)
            self._ok[key] = image_id
            return image_id

    def _name(self, image_id: str, cfg: SandboxConfig) -> None:
        """Give the up-to-date image found under one of its names the other: ``cfg.image`` (found by its
        content tag alone) or its content tag (an image built before builds were tagged so)."""
        names = [cfg.image] + ([content_tag(cfg)] if (REPO_ROOT / DOCKERFILE).exists() else [])
        for name in names:
            if self.engine.inspect(name) is None:
                self.engine.tag(image_id, name)

    def forget(self, cfg: SandboxConfig) -> None:
        """Check (and build if need be) ``cfg.image`` again at the next :meth:`ensure` (e.g. its checked
        image was pruned meanwhile)."""
        with self._lock:
            self._ok.pop((cfg.image, cfg.base_image), None)

    def status(self, cfg: SandboxConfig) -> tuple[bool, str]:
        """(up to date, reason) of ``cfg.image`` for the current build inputs."""
        ok, reason, _ = image_status(self.engine, cfg)
        return ok, reason


class GcBoxes(Protocol):
    """An engine's gc of its boxes (owner gone or TTL passed)."""

    def __call__(self, *, log: Log | None = None) -> GcResult: ...


class ImageProvider:
    """What the image-based providers (Docker, podman) do alike, each over its own engine: ``prepare`` and
    ``status`` are its :class:`CheckedImages`', ``gc`` its box gc (and with ``images`` its prune of
    superseded images), ``doctor`` its doctor. A subclass adds ``name``, ``start``, ``backend``, ``probe``
    and ``stop_all`` (the rest of :class:`~fte_shell.sandbox.base.SandboxProvider`)."""

    def __init__(self, images: CheckedImages, *, gc_boxes: GcBoxes, prune_images: Callable[[], tuple[int, int]],
                 doctor: Callable[[SandboxConfig], list[Check]]) -> None:
        self.images = images
        self._gc_boxes = gc_boxes
        self._prune_images = prune_images
        self._doctor = doctor

    def prepare(self, cfg: SandboxConfig, *, force: bool = False, log: Log | None = None) -> str:
        return self.images.ensure(cfg, force=force, log=log)

    def status(self, cfg: SandboxConfig) -> tuple[bool, str]:
        return self.images.status(cfg)

    def gc(self, *, log: Log | None = None, images: bool = False) -> GcResult:
        res = self._gc_boxes(log=log)
        if images:
            res.images, res.reclaimed = self._prune_images()
        return res

    def doctor(self, cfg: SandboxConfig) -> list[Check]:
        return self._doctor(cfg)
