"""The README's front door on a stock Debian 12, as a newcomer meets it: a fresh ``debian:bookworm-slim``
container (the base image ``sandbox/bootstrap-base.sh`` built here) with only ``python3`` and ``git``
installed from Debian and the checkout copied in.

- The README's first command, exactly as written, as root, with the container's own Docker engine
  (nested ``dockerd``, storage driver ``vfs``, whose image ``/`` keeps the mode of the tree it was
  imported from); the base image is bootstrapped inside (the newcomer's route), its ``/`` must be 755 and
  a box must start as uid 1000; the demo must answer both questions.
- The README's plain-user bwrap command as a user with sudo and no Docker; then ``sandbox doctor`` must
  report bwrap working for that user.

What the machine needs to reach the package registries (its pip configuration and CA bundle, e.g. a TLS
proxy's) is passed from the host as it is: the host's effective pip configuration becomes the container's
``/etc/pip.conf`` and every local path it names is mounted read-only. pip's cache and apt's archives and
lists persist in ``~/.cache/fte-shell/newcomer`` between runs. Under ``CI=true`` nothing here is skipped.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from fte_shell.config import SandboxConfig
from fte_shell.demo import DEMO_QUESTIONS
from tests.conftest import IN_CI, REPO

pytestmark = pytest.mark.slow

CACHE = Path.home() / ".cache" / "fte-shell" / "newcomer"
USER = "newcomer"
ENGINE_FLAGS = [  # a privileged container where --privileged is refused (no CAP_SYS_RESOURCE to give)
    "--cap-add", "ALL", "--cap-drop", "SYS_RESOURCE", "--security-opt", "seccomp=unconfined",
    "--security-opt", "apparmor=unconfined", "--security-opt", "systempaths=unconfined",
    "--device-cgroup-rule", "a *:* rwm", "--cgroupns", "private", "--tmpfs", "/run",
]


def readme_commands() -> tuple[str, str]:
    """(the README's first command, its plain-user bwrap command), as written there."""
    text = (REPO / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, re.DOTALL)
    lines = [ln.split("  #")[0].strip() for b in blocks for ln in b.splitlines()]
    first = next(ln for ln in lines if "sandbox/setup-host.sh" in ln)
    bwrap = next(ln for ln in lines if "setup-host.sh --provider bwrap" in ln)
    return first, bwrap


def test_readme_commands_are_found() -> None:
    first, bwrap = readme_commands()
    assert first.startswith("bash sandbox/setup-host.sh &&") and "demo" in first and "--tests" not in first
    assert "demo --sandbox-provider bwrap" in bwrap
    # CI runs the README's test command, verbatim
    ci = (REPO / ".ci" / "run").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", (REPO / "README.md").read_text(), re.DOTALL)
    tests_cmd = next(ln.split("  #")[0].strip() for b in blocks for ln in b.splitlines() if "--tests" in ln)
    assert tests_cmd in ci.splitlines()


def _problem() -> str | None:
    docker = shutil.which("docker")
    if docker is None:
        return "no docker CLI here"
    base = SandboxConfig().base_image
    r = subprocess.run([docker, "image", "inspect", base], capture_output=True, check=False)
    if r.returncode != 0:
        return f"no {base} image here: run bash sandbox/setup-host.sh"
    return None


@pytest.fixture(scope="module")
def stock() -> dict:
    problem = _problem()
    if problem:
        (pytest.fail if IN_CI else pytest.skip)(problem)
    return {"image": SandboxConfig().base_image, "mounts": _host_registry_access()}


HOST_FILES = "/host"
"""Where the host's registry files (CA bundles, local indexes) are mounted in the container: beside its
own files, never over them — the host's ``/etc/ssl/certs/ca-certificates.crt`` mounted read-only over the
container's own made ``apt-get install python3 git`` fail in ca-certificates' postinst (dpkg error 1)."""


def _host_registry_access(environ: dict[str, str] | None = None) -> list[str]:
    """``docker run`` arguments giving the container the host's way to the package registries: its pip
    configuration as ``/etc/pip.conf`` and the CA-bundle variables, each local path they name mounted
    read-only under :data:`HOST_FILES` (and renamed so in both)."""
    env = os.environ if environ is None else environ
    r = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                       check=False, env=dict(env))
    conf: dict[str, str] = {}
    for line in r.stdout.splitlines():  # global.cert='…', :env:.find-links='…'; the environment wins
        m = re.match(r"(?:global|install|:env:)\.([\w-]+)='(.*)'$", line)
        if m and m.group(1) != "config-file" and (line.startswith(":env:") or m.group(1) not in conf):
            conf[m.group(1)] = m.group(2)
    variables = {var: env[var] for var in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "PIP_CERT") if env.get(var)}
    paths = {w.removeprefix("file://").rstrip("/") for v in conf.values() for w in v.split()}
    # a local index's pages (…/simple) link to its files beside them
    paths = {str(Path(p).parent) if Path(p).name == "simple" else p for p in paths} | set(variables.values())
    mounted = sorted((p for p in paths if p.startswith("/") and Path(p).exists()
                      and not p.startswith(("/root", "/home"))), key=len, reverse=True)

    def beside(value: str) -> str:
        for p in mounted:  # the longest first: a path inside another mounted one is renamed once
            if value == p or value.startswith(p + "/") or f"//{p}" in value:
                return value.replace(p, HOST_FILES + p, 1)
        return value

    CACHE.mkdir(parents=True, exist_ok=True)
    pipconf = CACHE / "pip.conf"
    pipconf.write_text("[global]\n" + "".join(
        f"{k} = {' '.join(beside(w) for w in v.split())}\n" for k, v in sorted(conf.items())))
    args = ["-v", f"{pipconf}:/etc/pip.conf:ro"]
    for var, value in variables.items():
        args += ["-e", f"{var}={beside(value)}"]
    for p in sorted(mounted):
        args += ["-v", f"{p}:{HOST_FILES}{p}:ro"]
    return args


def test_the_hosts_ca_bundle_is_mounted_beside_the_containers_own(tmp_path: Path) -> None:
    bundle = "/etc/ssl/certs/ca-certificates.crt"
    if not Path(bundle).exists():
        pytest.skip(f"no {bundle} on this host")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "SSL_CERT_FILE": bundle,
           "PIP_CERT": bundle, "PIP_CONFIG_FILE": os.devnull}
    args = _host_registry_access(env)
    mounts = [args[i + 1].split(":") for i, a in enumerate(args) if a == "-v"]
    assert [m[1] for m in mounts] == ["/etc/pip.conf", f"{HOST_FILES}{bundle}"], mounts
    assert ["-e", f"SSL_CERT_FILE={HOST_FILES}{bundle}"] == args[2:4]
    assert f"cert = {HOST_FILES}{bundle}" in (CACHE / "pip.conf").read_text()


def _checkout_tar() -> Path:
    """The checkout's files (tracked and untracked, not ignored) as a tar."""
    names = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, check=True,
                           capture_output=True).stdout.decode().split("\0")
    out = CACHE / "checkout.tar"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for n in names:
            if n and (REPO / n).exists():
                tar.add(REPO / n, arcname=f"fte-shell/{n}", recursive=False)
    out.write_bytes(buf.getvalue())
    return out


def _run(stock: dict, name: str, script: str, extra: list[str], timeout: int) -> tuple[str, float]:
    for d in ("apt-archives", "apt-lists", "pip"):
        (CACHE / d).mkdir(parents=True, exist_ok=True)
    (CACHE / "pip-user").mkdir(parents=True, exist_ok=True)
    os.chmod(CACHE / "pip-user", 0o777)  # the plain user's pip cache (uid 1000 in the container)
    argv = ["docker", "run", "--rm", "--name", f"fte-{name}-{os.getpid()}", *extra, *stock["mounts"],
            "-e", "PYTHONUNBUFFERED=1",
            "-v", f"{_checkout_tar()}:/checkout.tar:ro",
            "-v", f"{CACHE / 'apt-archives'}:/var/cache/apt/archives",
            "-v", f"{CACHE / 'apt-lists'}:/var/lib/apt/lists",
            "-e", "PIP_DISABLE_PIP_VERSION_CHECK=1", "-e", "DEBIAN_FRONTEND=noninteractive",
            stock["image"], "bash", "-c", "set -euo pipefail\n" + script]
    t0 = time.monotonic()
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    finally:
        subprocess.run(["docker", "rm", "-f", f"fte-{name}-{os.getpid()}"], capture_output=True, check=False)
    took = time.monotonic() - t0
    out = r.stdout + r.stderr
    (CACHE / f"{name}.log").write_text(out)
    shown = "\n".join(ln for ln in out.splitlines() if "' is ignored: it is neither" not in ln)
    assert r.returncode == 0, f"exit {r.returncode} after {took:.0f} s (all of it: {CACHE / name}.log):\n{shown[-6000:]}"
    print(f"\n[newcomer] {name}: {took:.0f} s")
    return out, took


STOCK = """\
apt-get update -qq
apt-get install -y -qq python3 git >/dev/null
"""


def _answers_ok(out: str) -> None:
    assert out.count("(matches the expected answer)") == len(DEMO_QUESTIONS), out[-4000:]
    for _, answer in DEMO_QUESTIONS:
        assert answer in out


@pytest.mark.timeout(1800)
def test_readme_first_command_on_stock_debian_with_docker(stock: dict) -> None:
    first, _ = readme_commands()
    script = STOCK + f"""\
mkdir -p /etc/docker /root/.cache && echo '{{"storage-driver": "vfs"}}' > /etc/docker/daemon.json
# the cgroup hierarchies writable (cgroup v1: one per controller, bind mounts remount cannot change)
awk '$3 ~ /^cgroup/ {{print $2, $3, $4}}' /proc/mounts | while read -r m t o; do
  umount "$m" && mount -t "$t" -o "rw,nosuid,nodev,noexec,${{o##*relatime,}}" "$t" "$m"; done
mount -o remount,rw /sys/fs/cgroup 2>/dev/null || true
tar -C /root -xf /checkout.tar && cd /root/fte-shell
bash -c {_quote(first)}
echo "driver=$(docker info -f '{{{{.Driver}}}}')"
echo "base-root-mode=$(docker run --rm --user 1000 {stock['image']} stat -c %a /)"
echo "box-uid=$(docker run --rm {SandboxConfig().image} id -u)"
"""
    out, _ = _run(stock, "newcomer-docker", script,
                  [*ENGINE_FLAGS, "-v", "/var/lib/docker", "-v", f"{CACHE / 'pip'}:/root/.cache/pip"], 1700)
    assert "creating base image" in out  # bootstrapped inside: the newcomer's route, not the host's image
    assert "driver=vfs" in out and "base-root-mode=755" in out and "box-uid=1000" in out, out[-3000:]
    _answers_ok(out)


@pytest.mark.timeout(1800)
def test_readme_bwrap_command_as_a_plain_user_without_docker(stock: dict) -> None:
    _, bwrap = readme_commands()
    script = STOCK + f"""\
apt-get install -y -qq sudo >/dev/null
useradd --create-home --shell /bin/bash {USER}
echo '{USER} ALL=(ALL) NOPASSWD: ALL' > /etc/sudoers.d/{USER}
tar -C /home/{USER} -xf /checkout.tar && chown -R {USER}: /home/{USER}
cd /home/{USER}/fte-shell
! command -v docker
runuser -u {USER} -- bash -c {_quote(bwrap)}
runuser -u {USER} -- .venv/bin/fte-shell sandbox doctor || true
"""
    out, _ = _run(stock, "newcomer-bwrap", script, [
        "--cap-add", "ALL", "--cap-drop", "SYS_RESOURCE", "--security-opt", "seccomp=unconfined",
        "--security-opt", "apparmor=unconfined", "--security-opt", "systempaths=unconfined",
        "-v", f"{CACHE / 'pip-user'}:/home/{USER}/.cache/pip"], 1700)
    _answers_ok(out)
    # the doctor: bwrap runs and the root file system is found; with no delegated cgroup (a stock machine)
    # its limits are rlimits: it works, with a note naming what to ask the admin for
    row = next((ln for ln in out.splitlines() if re.match(r"\W*bwrap\W", ln)), "")
    assert re.search(r"\byes\b", row) and "limits:" in row, out[-3000:]
    assert "root file system" not in row and "namespaces" not in row, out[-3000:]


def _quote(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'"
