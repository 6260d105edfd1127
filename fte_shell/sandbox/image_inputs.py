"""The sandbox image's build inputs, shared by every provider that builds or checks it (Docker, podman):
``Dockerfile.sandbox`` plus ``sandbox/bin`` and ``sandbox/lib``, their content hash (the image's label)
and the build context as a tar."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

from ..config import SandboxConfig

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
