"""The sandbox container: image build, hardened creation, ownership labels, removal, gc, doctor.

Everything goes through the docker SDK (no ``docker`` CLI needed except for the interactive session in
:mod:`fte_shell.session`). Every container this module creates is

* hardened from :class:`~fte_shell.config.SandboxConfig` (non-root, read-only root, size-capped tmpfs,
  /work read-only, no capabilities, no-new-privileges, pids/memory/CPU limits, no network, init);
* labelled ``fte-shell=1`` plus run id, owning process (pid, its start time, host), creation time and TTL;
* running the warden (``sandbox/lib/warden.py``) as its main process: a dead-man timer, so the container
  exits within its TTL even if the harness is SIGKILLed (``auto_remove`` then deletes it);
* registered for removal at interpreter exit and on SIGINT/SIGTERM (handlers chain to the previous ones).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import io
import os
import re
import signal
import socket
import sys
import tarfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config import SandboxConfig
from .errors import DockerUnavailable, SandboxError

if TYPE_CHECKING:  # pragma: no cover
    import docker

REPO_ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = "Dockerfile.sandbox"
CONTEXT_DIRS = ("sandbox/bin", "sandbox/lib")
LABEL = "fte-shell"
HASH_LABEL = "fte-shell.content-hash"
GATEWAY_MOUNT = "/run/fte"
GATEWAY_SOCKET = f"{GATEWAY_MOUNT}/gw.sock"
RUN_MOUNT = "/opt/fte/run"
"""Private tmpfs of the session: per-command output files and the warden's state file."""
WARDEN = "/opt/fte/lib/warden.py"
FIX_DAEMON = "start Docker: bash sandbox/setup-host.sh (or: nohup dockerd >/var/log/fte-dockerd.log 2>&1 &)"

Log = Callable[[str], None]


def _stderr_log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --- client ------------------------------------------------------------------------------------------
_client: docker.DockerClient | None = None
_client_lock = threading.Lock()


def client() -> docker.DockerClient:
    """The process-wide docker client (thread-safe; a large connection pool for many sandboxes)."""
    global _client
    if _client is not None:  # no lock once made: cleanup calls this from signal handlers
        return _client
    with _client_lock:
        if _client is None:
            import docker

            try:
                c = docker.from_env(timeout=120, max_pool_size=128)
                c.ping()
            except Exception as e:
                raise DockerUnavailable(
                    f"no Docker daemon answers ({e.__class__.__name__}: {e}); {FIX_DAEMON}"
                ) from e
            _client = c
        return _client


# --- image -------------------------------------------------------------------------------------------
def _context_files(root: Path) -> list[tuple[str, Path]]:
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
    for name, path in _context_files(root):
        h.update(f"{name}\0{path.stat().st_mode & 0o111:o}\0".encode())
        h.update(path.read_bytes())
        h.update(b"\0")
    return h.hexdigest()[:24]


def _build_context(root: Path) -> io.BytesIO:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for d in CONTEXT_DIRS:  # the directories exist in the context even when empty
            info = tarfile.TarInfo(d)
            info.type = tarfile.DIRTYPE
            info.mode = 0o755
            tar.addfile(info)
        for name, path in _context_files(root):
            info = tarfile.TarInfo(name)
            info.size = path.stat().st_size
            info.mode = 0o755 if path.stat().st_mode & 0o111 else 0o644
            with path.open("rb") as f:
                tar.addfile(info, f)
    buf.seek(0)
    return buf


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


def build_image(cfg: SandboxConfig, log: Log = _stderr_log) -> str:
    """Build the sandbox image (legacy builder via the SDK); returns the image id."""
    import docker.errors

    if not (REPO_ROOT / DOCKERFILE).exists():
        raise DockerUnavailable(f"{REPO_ROOT / DOCKERFILE} not found; run from a checkout of fte-shell")
    c = client()
    try:
        c.images.get(cfg.base_image)
    except docker.errors.ImageNotFound as e:
        raise DockerUnavailable(
            f"base image {cfg.base_image} is missing; create it offline: bash sandbox/bootstrap-base.sh "
            f"{cfg.base_image}"
        ) from e
    digest = content_hash(cfg)
    log(f"[fte-shell] building sandbox image {cfg.image} from {DOCKERFILE} (first use or changed; ~1 min)")
    t0 = time.monotonic()
    try:
        stream = c.api.build(
            fileobj=_build_context(REPO_ROOT),
            custom_context=True,
            dockerfile=DOCKERFILE,
            tag=cfg.image,
            buildargs={"BASE_IMAGE": cfg.base_image},
            labels={HASH_LABEL: digest, LABEL + ".image": "1"},
            rm=True,
            forcerm=True,
            decode=True,
        )
        image_id = None
        tail: list[str] = []
        for chunk in stream:
            if "error" in chunk:
                raise DockerUnavailable(
                    f"building {cfg.image} failed: {chunk['error'].strip()}\n" + "".join(tail[-15:])
                )
            if "stream" in chunk:
                tail.append(chunk["stream"])
                tail = tail[-30:]
            aux = chunk.get("aux")
            if isinstance(aux, dict) and "ID" in aux:
                image_id = aux["ID"]
    except docker.errors.APIError as e:
        raise DockerUnavailable(f"building {cfg.image} failed: {e}") from e
    log(f"[fte-shell] built {cfg.image} in {time.monotonic() - t0:.1f} s")
    return image_id or c.images.get(cfg.image).id


_image_lock = threading.Lock()
_image_ok: dict[tuple[str, str], str] = {}
"""(image, base image) -> id of the image this process checked against its build inputs (or built)."""


def ensure_image(cfg: SandboxConfig, *, force: bool = False, log: Log = _stderr_log) -> str:
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
                raise DockerUnavailable(f"{reason}; build it with: fte-shell sandbox build")
            if not force:
                log(f"[fte-shell] {reason}")
            image_id = build_image(cfg, log)
        _image_ok[key] = image_id
        return image_id


# --- ownership ---------------------------------------------------------------------------------------
def _proc_start(pid: int) -> str:
    """Start time of ``pid`` in clock ticks since boot ('' when unknown): detects pid reuse."""
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
        return data[data.rfind(b")") + 2 :].split()[19].decode()
    except (OSError, IndexError):
        return ""


HOST = socket.gethostname()


def owner_labels(run_id: str, ttl_s: int) -> dict[str, str]:
    """The labels that tie a container to this process."""
    return {
        LABEL: "1",
        f"{LABEL}.run-id": run_id,
        f"{LABEL}.owner-pid": str(os.getpid()),
        f"{LABEL}.owner-start": _proc_start(os.getpid()),
        f"{LABEL}.owner-host": HOST,
        f"{LABEL}.created": f"{time.time():.3f}",
        f"{LABEL}.ttl": str(int(ttl_s)),
    }


def _owner_alive(labels: dict[str, str]) -> bool:
    try:
        pid = int(labels.get(f"{LABEL}.owner-pid", ""))
    except ValueError:
        return False
    if pid <= 0 or not Path(f"/proc/{pid}").exists():
        return False
    want = labels.get(f"{LABEL}.owner-start", "")
    return not want or _proc_start(pid) == want


START_GRACE_S = 300.0
"""How long gc gives a container to get from its ``created`` label to running: docker create + start
can take minutes on a loaded host. A container still ``created`` after this never started; a TTL counts
from its start, which gc cannot see, so gc adds this grace to the TTL (the warden itself stops the
container at its TTL)."""


def stale_reason(labels: dict[str, str], status: str, now: float | None = None) -> str | None:
    """Why a labelled container may be removed by gc (None = it is still owned and alive).

    A live owner's container is never removed while it may still be starting (``created``) or running
    within its TTL: only its owner removes it then."""
    now = time.time() if now is None else now
    try:
        created = float(labels.get(f"{LABEL}.created", "0"))
        ttl = float(labels.get(f"{LABEL}.ttl", "0"))
    except ValueError:
        return "unreadable labels"
    if labels.get(f"{LABEL}.owner-host") == HOST and not _owner_alive(labels):
        return f"its owner process {labels.get(f'{LABEL}.owner-pid')} is gone"
    if now - created > ttl + START_GRACE_S:
        return "its TTL has passed"
    if status in ("exited", "dead"):  # its warden ended (auto_remove deletes it too)
        return f"it is {status}"
    if status == "created" and now - created > START_GRACE_S:
        return "it was created but never started"
    return None


# --- live registry and cleanup ------------------------------------------------------------------------
_live: dict[str, str] = {}
"""Container id -> name of every container this process created and has not removed. No lock: single
dict operations are atomic, and the signal handlers that read it must never wait for a lock that the
interrupted main thread holds."""


def _forget_in_child() -> None:
    """A forked child (e.g. a process-pool worker) owns none of its parent's containers: it must not
    remove them at its exit or on a signal."""
    _live.clear()


os.register_at_fork(after_in_child=_forget_in_child)
_handlers_installed = False
_atexit_installed = False


def remove(container_id: str, *, api: docker.APIClient | None = None) -> None:
    """Force-remove a container; a container that is already gone is not an error."""
    import docker.errors

    _live.pop(container_id, None)
    try:
        (api or client().api).remove_container(container_id, force=True, v=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as e:
        if e.status_code != 409:  # 409: removal already in progress (auto_remove)
            raise SandboxError(f"could not remove container {container_id[:12]}: {e}") from e


def remove_all_live(*, api: docker.APIClient | None = None) -> None:
    """Remove every container this process created and has not removed yet."""
    for cid in list(_live):
        with contextlib.suppress(Exception):  # best effort at exit
            remove(cid, api=api)


_signal_api: docker.APIClient | None = None
"""A client of its own for the signal handlers: the interrupted main thread may hold a lock of the
shared client's connection pool, which the handler would then wait on forever."""


def _signal_cleanup(signum: int, frame: Any) -> None:
    remove_all_live(api=_signal_api)
    prev = _previous.get(signum)
    if callable(prev):
        prev(signum, frame)
    elif prev == signal.SIG_IGN:
        return
    else:  # SIG_DFL (or unknown): exit, but through atexit and `finally` (temporary dirs, logs)
        raise SystemExit(128 + signum)


_previous: dict[int, Any] = {}


def install_cleanup_handlers() -> None:
    """atexit (once) + SIGINT/SIGTERM handlers chained to the previous ones. Signal handlers can only be
    set from the main thread: a call from another thread installs atexit only, and a later call from the
    main thread installs the signal handlers."""
    global _handlers_installed, _atexit_installed
    if not _atexit_installed:
        _atexit_installed = True
        atexit.register(remove_all_live)
    if _handlers_installed or threading.current_thread() is not threading.main_thread():
        return
    _handlers_installed = True
    global _signal_api
    with contextlib.suppress(Exception):  # without it the handlers use the shared client
        import docker

        _signal_api = docker.APIClient(**docker.utils.kwargs_from_env(), timeout=60)
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            prev = signal.getsignal(sig)
            if prev is _signal_cleanup:
                continue
            _previous[sig] = prev
            signal.signal(sig, _signal_cleanup)
        except (ValueError, OSError):  # not the main interpreter
            pass


# --- creation ----------------------------------------------------------------------------------------
def _docker_size(text: str) -> str:
    return text.strip().lower()


def name_part(run_id: str) -> str:
    """A docker-name-safe form of a run id (the label keeps the id as given)."""
    return re.sub(r"[^a-zA-Z0-9_.-]+", "-", run_id).strip("-.")[:48] or "run"


def container_kwargs(
    cfg: SandboxConfig, workspace: Path, gateway_dir: Path, run_id: str, *, ttl_s: int | None = None
) -> dict[str, Any]:
    """The keyword arguments of ``containers.create`` for a hardened sandbox (exposed for tests)."""
    ttl = int(cfg.ttl_s if ttl_s is None else ttl_s)
    env = dict(cfg.env)
    env["FTE_GATEWAY"] = GATEWAY_SOCKET
    kwargs: dict[str, Any] = {
        "image": cfg.image,
        "command": ["python3", WARDEN, str(ttl)],
        "name": f"fte-{name_part(run_id)}-{uuid.uuid4().hex[:6]}",
        "auto_remove": True,
        "user": cfg.user,
        "working_dir": "/work",
        "hostname": "sandbox",
        "read_only": cfg.read_only_root,
        "tmpfs": {
            "/tmp": f"rw,exec,nosuid,nodev,size={_docker_size(cfg.tmpfs_size)},mode=1777",
            RUN_MOUNT: f"rw,nosuid,nodev,noexec,size={_docker_size(cfg.output_buffer_size)},mode=1777",
        },
        "volumes": {
            str(workspace): {"bind": "/work", "mode": "ro"},
            str(gateway_dir): {"bind": GATEWAY_MOUNT, "mode": "ro"},
        },
        "network_mode": cfg.network_mode,
        "pids_limit": cfg.pids_limit,
        "mem_limit": cfg.memory,
        "memswap_limit": cfg.memory,
        "nano_cpus": int(cfg.cpus * 1e9),
        "init": cfg.init and not cfg.protect_warden,
        "environment": env,
        "labels": owner_labels(run_id, ttl),
        "stop_signal": "SIGTERM",
        "shm_size": "16m",
        "ipc_mode": "private",
    }
    if cfg.cap_drop_all:
        kwargs["cap_drop"] = ["ALL"]
    if cfg.no_new_privileges:
        kwargs["security_opt"] = ["no-new-privileges:true"]
    return kwargs


@dataclass
class Handle:
    """A started sandbox container."""

    id: str
    name: str
    run_id: str


def create(
    cfg: SandboxConfig, workspace: Path, gateway_dir: Path, run_id: str, *, ttl_s: int | None = None
) -> Handle:
    """Start a hardened sandbox container and register it for removal at exit/signals."""
    import docker.errors

    if cfg.user.split(":")[0] in ("0", "root"):
        raise SandboxError("sandbox.user must not be root (uid 0)")
    image_id = ensure_image(cfg)
    install_cleanup_handlers()
    _startup_sweep()
    kwargs = container_kwargs(cfg, workspace, gateway_dir, run_id, ttl_s=ttl_s)
    c = client()
    try:
        try:
            cont = c.containers.create(**dict(kwargs, image=image_id))
        except docker.errors.ImageNotFound:  # the checked image was pruned since: check (build) again
            _image_ok.pop((cfg.image, cfg.base_image), None)
            cont = c.containers.create(**dict(kwargs, image=ensure_image(cfg)))
    except docker.errors.APIError as e:
        raise SandboxError(f"could not create the sandbox container: {e}") from e
    _live[cont.id] = kwargs["name"]
    try:
        cont.start()
    except docker.errors.APIError as e:
        remove(cont.id)
        raise SandboxError(f"could not start the sandbox container: {e}") from e
    return Handle(id=cont.id, name=kwargs["name"], run_id=run_id)


_swept = False


def _startup_sweep() -> None:
    """Once per process, before the first container: gc what crashed harnesses left behind."""
    global _swept
    if _swept:
        return
    _swept = True  # (two threads may both get here: gc twice is harmless)
    with contextlib.suppress(Exception):  # a failed sweep must not stop the run; `sandbox gc` reports
        gc()


def is_running(container_id: str) -> bool:
    import docker.errors

    try:
        return client().api.inspect_container(container_id)["State"]["Running"] is True
    except docker.errors.NotFound:
        return False


def signal_warden(container_id: str) -> None:
    """Ask the warden to kill the running command's processes (no new process in the container)."""
    import docker.errors

    try:
        client().api.kill(container_id, signal="SIGUSR1")
    except docker.errors.APIError as e:
        raise SandboxError(f"could not signal the sandbox container: {e}") from e


# --- gc ----------------------------------------------------------------------------------------------
@dataclass
class GcResult:
    removed: list[tuple[str, str]]  # (name, reason)
    kept: int
    dirs: int = 0  # temporary sandbox directories of dead owners removed


OWNER_FILE = ".fte-owner"
"""Written into each sandbox's temporary directory: ``PID START HOST KEEP`` (KEEP 1 = never gc it)."""


def write_owner_file(tmp_dir: Path, keep: bool) -> None:
    """Mark a sandbox's temporary directory as this process's (so gc can remove it if we die)."""
    (tmp_dir / OWNER_FILE).write_text(f"{os.getpid()} {_proc_start(os.getpid()) or '-'} {HOST} {int(keep)}\n")


def gc_dirs(root: Path | None = None) -> int:
    """Remove temporary sandbox directories (``fte-*`` with an owner file) whose owner on this host is
    gone and that were not meant to be kept; returns how many."""
    import shutil
    import tempfile

    base = Path(root or tempfile.gettempdir())
    removed = 0
    for d in base.glob("fte-*"):
        try:
            pid, start, host, keep = (d / OWNER_FILE).read_text().split()
        except (OSError, ValueError):
            continue
        labels = {f"{LABEL}.owner-pid": pid, f"{LABEL}.owner-start": "" if start == "-" else start}
        if keep == "1" or host != HOST or _owner_alive(labels):
            continue
        shutil.rmtree(d, ignore_errors=True)
        removed += 1
    return removed


def gc(*, log: Log | None = None) -> GcResult:
    """Remove every fte-shell container whose owner process is gone (same host) or whose TTL passed."""
    c = client()
    removed: list[tuple[str, str]] = []
    kept = 0
    for info in c.api.containers(all=True, filters={"label": f"{LABEL}=1"}):
        labels = info.get("Labels") or {}
        reason = stale_reason(labels, info.get("State", ""))
        name = (info.get("Names") or ["?"])[0].lstrip("/")
        if reason is None:
            kept += 1
            continue
        try:
            remove(info["Id"])
        except SandboxError as e:
            if log:
                log(str(e))
            continue
        removed.append((name, reason))
        if log:
            log(f"removed {name}: {reason}")
    dirs = gc_dirs()
    if log and dirs:
        log(f"removed {dirs} temporary sandbox director{'y' if dirs == 1 else 'ies'} of dead processes")
    return GcResult(removed=removed, kept=kept, dirs=dirs)


def prune_images() -> tuple[int, int]:
    """Remove superseded sandbox images (untagged by a rebuild) that no container uses; returns
    (images removed, bytes reclaimed). Not part of :func:`gc`, which harnesses run at start: a harness
    still creating containers from the old image id must not lose it under its feet."""
    filters = {"dangling": True, "label": f"{LABEL}.image=1"}
    try:
        c = client()
        before = {img.id for img in c.images.list(filters=filters)}
        res = c.images.prune(filters=filters)
        after = {img.id for img in c.images.list(filters=filters)}
    except Exception as e:
        raise DockerUnavailable(f"could not prune old sandbox images: {e}") from e
    return len(before - after), int(res.get("SpaceReclaimed") or 0)


# --- doctor ------------------------------------------------------------------------------------------
@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""


def doctor(cfg: SandboxConfig | None = None) -> list[Check]:
    """Check the daemon, the image and the hardening of a real test container; each check names its fix."""
    import tempfile

    cfg = cfg or SandboxConfig()
    checks: list[Check] = []
    try:
        info = client().info()
        checks.append(Check("daemon", True, f"Docker {info.get('ServerVersion')} answers"))
    except DockerUnavailable as e:
        checks.append(Check("daemon", False, str(e), FIX_DAEMON))
        return checks
    try:
        client().images.get(cfg.base_image)
        checks.append(Check("base image", True, f"{cfg.base_image} exists"))
    except Exception:  # noqa: BLE001
        checks.append(
            Check("base image", False, f"{cfg.base_image} is missing", "bash sandbox/bootstrap-base.sh")
        )
    try:
        ok, reason = image_status(cfg)
    except Exception as e:  # noqa: BLE001
        ok, reason = False, str(e)
    checks.append(Check("sandbox image", ok, reason, "" if ok else "fte-shell sandbox build"))
    if not ok:
        return checks
    with tempfile.TemporaryDirectory(prefix="fte-doctor-") as tmp:
        ws, gw = Path(tmp, "work"), Path(tmp, "gw")
        ws.mkdir(mode=0o755)
        gw.mkdir(mode=0o755)
        os.chmod(ws, 0o755)
        os.chmod(gw, 0o755)
        h = create(cfg, ws, gw, "doctor", ttl_s=120)
        try:
            checks.extend(_hardening_checks(h.id, cfg))
        finally:
            remove(h.id)
    return checks


def exec_text(container_id: str, cmd: list[str], user: str) -> tuple[int, str]:
    """Run one command in the container with ``docker exec`` (for checks, not for the agent)."""
    res = client().api.exec_create(container_id, cmd, user=user, stdout=True, stderr=True)
    out = client().api.exec_start(res["Id"])
    code = client().api.exec_inspect(res["Id"])["ExitCode"]
    return int(code or 0), out.decode("utf-8", "replace")


def _hardening_checks(cid: str, cfg: SandboxConfig) -> list[Check]:
    script = (
        "id -u; "
        "(touch /probe 2>/dev/null && echo rootfs=rw) || echo rootfs=ro; "
        "(touch /work/probe 2>/dev/null && echo work=rw) || echo work=ro; "
        "ls /sys/class/net | tr '\\n' ' '; echo; "
        "grep -E '^(CapEff|NoNewPrivs)' /proc/self/status | tr -s '\\t ' ' ' | tr '\\n' ' '; echo; "
        "test -S /var/run/docker.sock && echo docker-sock || echo no-docker-sock"
    )
    _, out = exec_text(cid, ["bash", "-c", script], cfg.user)
    lines = out.splitlines() + [""] * 6
    attrs = client().api.inspect_container(cid)["HostConfig"]
    checks = [
        Check("non-root user", lines[0].strip() != "0", f"uid {lines[0].strip()}", "set sandbox.user"),
        Check("read-only root", lines[1].strip() == "rootfs=ro", lines[1].strip(), "sandbox.read_only_root"),
        Check("read-only /work", lines[2].strip() == "work=ro", lines[2].strip(), "report a bug"),
        Check(
            "no network",
            lines[3].split() == ["lo"],
            f"interfaces: {lines[3].strip()}",
            "sandbox.network_mode must be none",
        ),
        Check(
            "no capabilities, no-new-privileges",
            "CapEff: 0000000000000000" in lines[4] and "NoNewPrivs: 1" in lines[4],
            lines[4].strip(),
            "sandbox.cap_drop_all / sandbox.no_new_privileges",
        ),
        Check("no docker socket", lines[5].strip() == "no-docker-sock", lines[5].strip(), "report a bug"),
        Check(
            "limits",
            bool(attrs.get("PidsLimit"))
            and attrs.get("Memory") == attrs.get("MemorySwap")
            and bool(attrs.get("NanoCpus")),
            f"pids {attrs.get('PidsLimit')}, memory {attrs.get('Memory')}, "
            f"memswap {attrs.get('MemorySwap')}, nano_cpus {attrs.get('NanoCpus')}",
            "check sandbox.pids_limit / memory / cpus",
        ),
    ]
    return checks
