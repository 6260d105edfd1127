"""The box's root file system: the sandbox image's files in a directory, made once and cached by content.

A cache entry is ``<cache>/<key>/`` (the tree) beside ``<cache>/<key>.json`` (the image's environment
and where it came from). The key is the sandbox image's content hash (its build inputs, the label the
Docker provider puts on the image: a checkout finds its entry without asking any daemon) when the tree
is exported from the image with ``docker export`` or ``podman export``, or ``tar-<sha256>`` of a tar the
user gives (``[sandbox.bwrap] rootfs``). A directory given as ``rootfs`` is used as it is (e.g. an entry on a
cluster's shared storage). Entries are written to a temporary directory and renamed into place, so
processes on many nodes may prepare the same entry at once. Device nodes are left out (bwrap makes
``/dev``) and set-uid/set-gid bits dropped (the box's mounts are nosuid anyway).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ....config import SandboxConfig
from ....digest import file_sha256
from ....errors import SandboxError
from ....safetar import extract
from ...base import WARDEN, Log
from ...image_inputs import REPO_ROOT, content_hash, content_tag

FALLBACK_ENV = {"PATH": "/opt/fte/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "HOME": "/tmp", "LANG": "C.UTF-8", "TERM": "dumb"}
"""The environment of a box whose tree came from a bare tar (a ``docker export`` carries no image
config): the image's own ENV when the tree was exported here."""


@dataclass
class Rootfs:
    """A ready root file system."""

    path: Path
    key: str
    env: dict[str, str]
    source: str


SYSTEM_CACHE = Path("/var/cache/fte-shell/rootfs")
"""Root's cache, also searched (read-only) by every user: a tree exported there once serves them all."""


def cache_dir(cfg: SandboxConfig) -> Path:
    """``[sandbox.bwrap] rootfs_cache``, else ``$XDG_CACHE_HOME/fte-shell/rootfs`` (``~/.cache``); for root
    ``/var/cache/fte-shell/rootfs`` (a box started by root runs as an unprivileged uid, which must be
    able to read the tree: root's home is private)."""
    if cfg.bwrap.rootfs_cache is not None:
        return Path(cfg.bwrap.rootfs_cache).expanduser()
    if os.geteuid() == 0:
        return SYSTEM_CACHE
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fte-shell" / "rootfs"


_lock = threading.Lock()
_ready: dict[tuple[str, str], Rootfs] = {}


def _complete(tree: Path) -> bool:
    return (tree / WARDEN.lstrip("/")).is_file() and (tree / "bin").exists()


def _entry(cache: Path, key: str) -> Rootfs | None:
    tree = cache / key
    if not _complete(tree):
        return None
    try:
        meta = json.loads((cache / f"{key}.json").read_text())
    except (OSError, ValueError):
        meta = {}
    return Rootfs(tree, key, dict(meta.get("env") or FALLBACK_ENV), str(meta.get("source", tree)))


def find(cfg: SandboxConfig) -> Rootfs | None:
    """The ready tree for ``cfg`` without making one (None when there is none yet)."""
    if cfg.bwrap.rootfs is not None:
        src = Path(cfg.bwrap.rootfs).expanduser()
        if src.is_dir():
            return Rootfs(src, "dir", FALLBACK_ENV, str(src)) if _complete(src) else None
        return None  # a tar: its key needs its hash (ensure)
    if not (REPO_ROOT / "Dockerfile.sandbox").exists():
        return None
    return _image_entry(cfg, content_hash(cfg))


def _image_entry(cfg: SandboxConfig, key: str) -> Rootfs | None:
    """The image's tree in this user's cache, else in the system's (unless a cache was configured)."""
    caches = [cache_dir(cfg)] + ([SYSTEM_CACHE] if cfg.bwrap.rootfs_cache is None else [])
    for cache in dict.fromkeys(caches):
        rf = _entry(cache, key)
        if rf is not None:
            return rf
    return None


def ensure(cfg: SandboxConfig, *, force: bool = False, log: Log | None = None) -> Rootfs:
    """The tree for ``cfg``: ``rootfs`` as given (a directory, or a tar extracted into the cache once),
    else the cache entry of the sandbox image's content hash (this user's cache, then the system's),
    exported from the image (the Docker
    provider builds it first when a daemon answers; else podman's copy) when it is not there yet."""
    key_in = (str(cfg.bwrap.rootfs), cfg.base_image if cfg.bwrap.rootfs is None else "")
    with _lock:
        if not force and key_in in _ready:
            return _ready[key_in]
        cache = cache_dir(cfg)
        if cfg.bwrap.rootfs is not None:
            src = Path(cfg.bwrap.rootfs).expanduser()
            if src.is_dir():
                if not _complete(src):
                    raise SandboxError(f"sandbox.bwrap.rootfs {src} is not an fte-shell sandbox tree (no {WARDEN})")
                meta = src.with_name(src.name + ".json")
                env = json.loads(meta.read_text()).get("env") if meta.is_file() else None
                rf = Rootfs(src, "dir", dict(env or FALLBACK_ENV), str(src))
            elif src.is_file():
                key = "tar-" + file_sha256(src)[:24]
                rf = _entry(cache, key) if not force else None
                if rf is None:
                    with src.open("rb") as f:
                        rf = _install(cache, key, f, {"env": FALLBACK_ENV, "source": str(src)}, log)
            else:
                raise SandboxError(f"sandbox.bwrap.rootfs {src} does not exist (a directory or a tar of the image)")
        else:
            if not (REPO_ROOT / "Dockerfile.sandbox").exists():
                raise SandboxError("no Dockerfile.sandbox here to name the image's tree: set sandbox.bwrap.rootfs "
                                   "to a tar of the sandbox image (docker export) or to an exported tree")
            key = content_hash(cfg)
            rf = None if force else _image_entry(cfg, key)
            if rf is None:
                rf = _export(cfg, cache, key, log)
        _ready[key_in] = rf
        return rf


def _engine(cfg: SandboxConfig, key: str, log: Log | None) -> tuple[str, str, list[str]] | None:
    """(CLI, image id, image env) of an engine that holds the current sandbox image; None for root
    when none does (root makes the tree without one)."""
    from ...base import get_provider

    problems = []
    try:  # the Docker provider builds the image when it is missing or out of date
        get_provider("docker").prepare(cfg, log=log)
    except Exception as e:  # noqa: BLE001 - no daemon: podman may have the image
        problems.append(f"docker: {e}")
    for cli in ("docker", "podman"):
        exe = shutil.which(cli)
        if exe is None:
            continue
        fmt = '{{.Id}} {{index .Config.Labels "fte-shell.content-hash"}} {{json .Config.Env}}'
        for name in (content_tag(cfg, key), cfg.image):  # the build's own tag first (image_inputs)
            r = subprocess.run([exe, "image", "inspect", "-f", fmt, name], capture_output=True, text=True,
                               timeout=120, check=False)
            if r.returncode != 0:
                problems.append(f"{cli}: {r.stderr.strip()[:200]}")
                continue
            image_id, label, env = r.stdout.strip().split(" ", 2)
            if label != key:
                problems.append(f"{cli}: {name} is out of date (fte-shell sandbox build)")
                continue
            return exe, image_id, json.loads(env) or []
    if os.geteuid() == 0:
        return None
    raise SandboxError(
        f"no sandbox tree {key} in {cache_dir(cfg)} or {SYSTEM_CACHE} and no engine to export it from ("
        + "; ".join(problems) + f"): make it once as root, with no Docker needed: {MAKE_AS_ROOT} "
        "(it serves every user); or set sandbox.bwrap.rootfs to a tar of the image (docker export)")


MAKE_AS_ROOT = "sudo bash sandbox/setup-host.sh --provider bwrap"
"""The one command that makes the tree in the system cache without an engine (debootstrap, :mod:`.scratch`)."""


def _export(cfg: SandboxConfig, cache: Path, key: str, log: Log | None) -> Rootfs:
    engine = _engine(cfg, key, log)
    if engine is None:  # root with no engine: the tree from debootstrap and the Dockerfile's steps
        return _from_scratch(cache, key, log)
    exe, image_id, env_list = engine
    env = dict(e.split("=", 1) for e in env_list if "=" in e)
    r = subprocess.run([exe, "create", image_id], capture_output=True, text=True, timeout=300, check=False)
    if r.returncode != 0:
        raise SandboxError(f"{exe} create {cfg.image} failed: {r.stderr.strip()[:300]}")
    cid = r.stdout.strip()
    try:
        return _install_from([exe, "export", cid], cache, key,
                             {"env": env, "source": f"{Path(exe).name} export of {cfg.image} ({image_id})"}, log)
    finally:
        subprocess.run([exe, "rm", "-f", cid], capture_output=True, timeout=120, check=False)


def _install_from(argv: list[str], cache: Path, key: str, meta: dict, log: Log | None) -> Rootfs:
    """:func:`_install` of the tar that ``argv`` (``docker export CID``) writes to its stdout. A failure
    names its cause: the extraction's exception (type and text) and the command's exit status and stderr
    (an extraction that stops early leaves the command writing into a closed pipe)."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    failure: Exception | None = None
    try:
        rf = _install(cache, key, proc.stdout, meta, log)
    except Exception as e:  # noqa: BLE001 - reported below with the command's own account
        failure = e
    finally:
        proc.stdout.close()
        err = proc.stderr.read().decode("utf-8", "replace").strip()
        code = proc.wait()
    if failure is None and code == 0:
        return rf
    causes = [f"{type(failure).__name__}: {failure}"] if failure is not None else []
    if code != 0:
        causes.append(f"{Path(argv[0]).name} exited with status {code}" + (f": {err[:300]}" if err else " and no message"))
    raise SandboxError(f"{' '.join(argv[:2])} failed: " + "; ".join(causes)) from failure


def _install(cache: Path, key: str, stream: IO[bytes], meta: dict, log: Log | None) -> Rootfs:
    """Extract a tar stream into ``cache/key`` (atomically) and write its metadata."""
    if log:
        log(f"[fte-shell] making the bwrap root file system {key} in {cache} (once; a few seconds)")

    def fill(tmp: Path) -> dict:
        dirs: list[tuple[Path, int]] = []
        with tarfile.open(fileobj=stream, mode="r|") as tar:
            for m in tar:
                if m.isdev() or m.isfifo():
                    continue
                if m.isdir():  # its mode once its files are in (a 0555 directory takes none)
                    dirs.append((tmp / m.name.lstrip("/"), m.mode & 0o1777))
                extract(tar, m, tmp, kind="tar", set_attrs=m.isfile(), numeric_owner=True)
        for d, mode in reversed(dirs):
            os.chmod(d, mode | 0o500)
        return meta

    return _publish(cache, key, fill)


def _from_scratch(cache: Path, key: str, log: Log | None) -> Rootfs:
    from . import scratch

    return _publish(cache, key, lambda tmp: {"env": scratch.build(tmp, log),
                                             "source": "debootstrap and the steps of Dockerfile.sandbox (no engine)"})


def _publish(cache: Path, key: str, fill: Callable[[Path], dict]) -> Rootfs:
    """Make ``cache/key`` atomically: ``fill`` writes the tree into a temporary directory beside it and
    returns the entry's metadata."""
    cache.mkdir(parents=True, exist_ok=True)
    os.chmod(cache, 0o755) if cache.stat().st_uid == os.geteuid() else None
    tmp = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=cache))
    try:
        meta = fill(tmp)
        os.chmod(tmp, 0o755)
        (cache / f"{key}.json.tmp{os.getpid()}").write_text(json.dumps(meta))
        os.replace(cache / f"{key}.json.tmp{os.getpid()}", cache / f"{key}.json")
        try:
            os.rename(tmp, cache / key)
        except OSError:  # another process made it meanwhile (or a rebuild: same key, same content; the
            # entry in place may be in use by running boxes, so it stays)
            if not _complete(cache / key):
                raise
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    rf = _entry(cache, key)
    if rf is None:
        raise SandboxError(f"the exported tree {cache / key} has no {WARDEN}: not an fte-shell sandbox image")
    return rf
