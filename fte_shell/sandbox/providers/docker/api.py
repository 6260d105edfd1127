"""The Docker daemon's API: the process-wide client, and execs attached over the API socket.

The session's shell is an exec whose terminal this process reads and writes over the daemon's socket
(what ``docker exec -it`` does, without a ``docker`` client process per session: 5.6 MiB of host
memory each). :class:`~fte_shell.sandbox.output.SocketSpawn` drives that socket with pexpect.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from ....errors import SandboxError, SandboxUnavailable
from ...output import SocketSpawn

if TYPE_CHECKING:  # pragma: no cover
    import docker

FIX_DAEMON = "start Docker: bash sandbox/setup-host.sh (or: nohup dockerd >/var/log/fte-dockerd.log 2>&1 &)"

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
                raise SandboxUnavailable(
                    f"no Docker daemon answers ({e.__class__.__name__}: {e}); {FIX_DAEMON}"
                ) from e
            _client = c
        return _client


def exec_text(container_id: str, cmd: list[str], user: str) -> tuple[int, str]:
    """Run one command in the container with ``docker exec`` (for checks, not for the agent)."""
    res = client().api.exec_create(container_id, cmd, user=user, stdout=True, stderr=True)
    out = client().api.exec_start(res["Id"])
    code = client().api.exec_inspect(res["Id"])["ExitCode"]
    return int(code or 0), out.decode("utf-8", "replace")


# --- a terminal exec over the API socket -------------------------------------------------------------
@dataclass
class TtyExec:
    """A started terminal exec: its id (for its exit code) and the pexpect driver of its stream."""

    exec_id: str
    child: SocketSpawn

    def exit_code(self, wait_s: float = 5.0) -> int | None:
        """The process's exit status once it ended (None when it runs on or the daemon cannot say)."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                info = client().api.exec_inspect(self.exec_id)
            except Exception:  # noqa: BLE001 - the container is gone: no status
                return None
            if not info.get("Running") and info.get("ExitCode") is not None:
                return int(info["ExitCode"])
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.01)


def start_tty_exec(
    container_id: str,
    cmd: list[str],
    user: str,
    *,
    size: tuple[int, int] = (50, 200),
    timeout: float = 60.0,
    maxread: int = 1 << 20,
    via_sdk: bool = False,
) -> TtyExec:
    """Create and start ``cmd`` in the container with a terminal, attached over the API socket: a plain
    socket of our own for a unix (or TLS-less tcp) daemon, else (or with ``via_sdk``) the connection the
    docker SDK hijacks."""
    import docker.errors

    api = client().api
    try:
        exec_id = api.exec_create(container_id, cmd, stdin=True, tty=True, user=user)["Id"]
    except docker.errors.APIError as e:
        raise SandboxError(f"could not start a shell in container {container_id[:12]}: {e}") from e
    sock, initial = _attach(exec_id, timeout, via_sdk=via_sdk)
    with contextlib.suppress(Exception):  # a size is a nicety (the session does not depend on it)
        api.exec_resize(exec_id, height=size[0], width=size[1])
    return TtyExec(exec_id, SocketSpawn(sock, initial=initial, maxread=maxread, timeout=timeout))


def _daemon_address() -> tuple[str, Any] | None:
    """(family, address) of a daemon reachable by a plain socket (unix, or tcp without TLS); None for
    anything else (TLS, ssh), which the SDK's own hijacking handles."""
    host = os.environ.get("DOCKER_HOST", "") or "unix:///var/run/docker.sock"
    url = urlparse(host)
    if url.scheme == "unix":
        return "unix", url.path
    if url.scheme in ("tcp", "http") and not os.environ.get("DOCKER_TLS_VERIFY") and url.port != 2376:
        return "tcp", (url.hostname or "localhost", url.port or 2375)
    return None


def _attach(exec_id: str, timeout: float, *, via_sdk: bool = False) -> tuple[socket.socket, bytes]:
    """Start the exec and take over the connection as its raw stream (HTTP upgrade to tcp)."""
    addr = None if via_sdk else _daemon_address()
    if addr is None:
        import docker.errors

        try:
            raw = client().api.exec_start(exec_id, tty=True, socket=True)
        except docker.errors.APIError as e:
            raise SandboxError(f"the Docker daemon refused the exec: {e}") from e
        return getattr(raw, "_sock", raw), b""
    family, where = addr
    sock = socket.socket(socket.AF_UNIX if family == "unix" else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(where)
        body = json.dumps({"Detach": False, "Tty": True}).encode()
        head = (
            f"POST /v{client().api.api_version}/exec/{exec_id}/start HTTP/1.1\r\n"
            "Host: docker\r\nUser-Agent: fte-shell\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n"
        )
        sock.sendall(head.encode() + body)
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = sock.recv(65536)
            if not chunk:
                raise SandboxError(f"the Docker daemon closed the exec stream at once ({buf[:200]!r})")
            buf += chunk
            if len(buf) > 1 << 16:
                raise SandboxError("the Docker daemon answered the exec start with an oversized header")
        header, rest = buf.split(b"\r\n\r\n", 1)
        status = header.split(b"\r\n", 1)[0].decode("latin-1")
        parts = status.split(" ", 2)
        if len(parts) < 2 or parts[1] not in ("101", "200"):
            raise SandboxError(f"the Docker daemon refused the exec: {status} {_error_text(sock, rest)}")
        sock.settimeout(None)
        return sock, rest
    except BaseException:
        sock.close()
        raise


def _error_text(sock: socket.socket, rest: bytes) -> str:
    """The daemon's error message (a JSON body) after a refusal; best effort."""
    data = rest
    try:
        return str(json.loads(data.decode("utf-8", "replace")).get("message", ""))
    except ValueError:
        pass
    try:
        sock.settimeout(2)
        while len(data) < 4096:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    text = data.decode("utf-8", "replace").strip()
    try:
        return str(json.loads(text).get("message", text))
    except ValueError:
        return text[:300]


def lost_daemon(e: BaseException) -> bool:
    """True when ``e`` says the Docker daemon's socket refused or dropped the connection: the SDK raises
    ``requests``' ConnectionError/Timeout (or its own DockerException), which it does not wrap in APIError."""
    import docker.errors
    import requests

    if isinstance(e, docker.errors.APIError):  # the daemon answered (and refused)
        return False
    return isinstance(e, requests.exceptions.ConnectionError | requests.exceptions.Timeout | docker.errors.DockerException)


@contextlib.contextmanager
def daemon_errors(doing: str) -> Iterator[None]:
    """Inside, a Docker daemon that stops answering raises :class:`SandboxUnavailable` (stop reason
    ``sandbox_unavailable``) instead of the SDK's connection error."""
    try:
        yield
    except Exception as e:
        if lost_daemon(e):
            raise SandboxUnavailable(f"the Docker daemon stopped answering while {doing} "
                                    f"({e.__class__.__name__}: {e}); {FIX_DAEMON}") from e
        raise
