"""The bwrap root file system made without a container engine (root only): the base image's tree from
``sandbox/bootstrap-base.sh --tree`` (debootstrap), then ``Dockerfile.sandbox``'s own instructions done in
it — ``RUN`` in the tree through ``bwrap`` as root, ``COPY`` from the checkout, ``ENV`` into the entry's
environment — so the Dockerfile stays the one description of the box's files. ``ARG`` defaults are the
``RUN`` steps' environment; ``FROM`` is the base tree; ``USER``, ``WORKDIR`` and ``CMD`` are the box's
own business (bwrap sets the uid, the directory and the warden). Any other instruction is refused."""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import subprocess
from pathlib import Path

from ....errors import SandboxError
from ...base import Log
from ...image_inputs import DOCKERFILE, REPO_ROOT

BOOTSTRAP = REPO_ROOT / "sandbox" / "bootstrap-base.sh"
RUN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""``PATH`` of a ``RUN`` step before the Dockerfile sets one (Docker's default)."""


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, its argument) of each instruction in a Dockerfile (continuation lines joined)."""
    out: list[tuple[str, str]] = []
    pending = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        whole = pending + stripped
        pending = ""
        op, _, arg = whole.partition(" ")
        out.append((op.upper(), arg.strip()))
    return out


def pairs(arg: str) -> dict[str, str]:
    """``K=V K2="V 2"`` (ENV, ARG) as a dict; an ARG without a default is empty."""
    out = {}
    for word in shlex.split(arg):
        k, _, v = word.partition("=")
        out[k] = v
    return out


def build(tree: Path, log: Log | None = None) -> dict[str, str]:
    """Make the sandbox image's files in ``tree`` (new or empty) as root; returns the image's environment."""
    if os.geteuid() != 0:
        raise SandboxError("making the bwrap root file system without Docker or podman needs root "
                           "(sudo bash sandbox/setup-host.sh --provider bwrap)")
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxError("bwrap is not installed (apt-get install bubblewrap)")
    say = log or (lambda _m: None)
    say(f"[fte-shell] debootstrap of the base tree into {tree} (no engine here; about a minute)")
    r = subprocess.run(["bash", str(BOOTSTRAP), "--tree", str(tree)], capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise SandboxError(f"{BOOTSTRAP.name} --tree failed: {(r.stderr or r.stdout).strip()[-600:]}")
    args: dict[str, str] = {}
    env: dict[str, str] = {}
    for op, arg in instructions((REPO_ROOT / DOCKERFILE).read_text()):
        if op == "ARG":
            args.update(pairs(arg))
        elif op == "ENV":
            env.update(pairs(arg))
        elif op == "RUN":
            say(f"[fte-shell] RUN {arg[:100]}")
            run_env = {"PATH": RUN_PATH, "HOME": "/root", **args, **env}
            argv = [bwrap, "--bind", str(tree), "/", "--dev", "/dev", "--proc", "/proc",
                    "--ro-bind-try", "/etc/resolv.conf", "/etc/resolv.conf", "--cap-add", "ALL", "--clearenv"]
            for k, v in run_env.items():
                argv += ["--setenv", k, v]
            r = subprocess.run([*argv, "/bin/sh", "-c", arg], capture_output=True, text=True, check=False)
            if r.returncode != 0:
                raise SandboxError(f"{DOCKERFILE} step RUN {arg[:80]}… failed in {tree}: "
                                   f"{(r.stderr or r.stdout).strip()[-600:]}")
        elif op == "COPY":
            src, dst = shlex.split(arg)
            target = tree / dst.lstrip("/")
            if (REPO_ROOT / src).is_dir():
                shutil.copytree(REPO_ROOT / src, target, dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns("__pycache__"))
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(REPO_ROOT / src, target)
        elif op not in ("FROM", "USER", "WORKDIR", "CMD", "LABEL"):
            raise SandboxError(f"{DOCKERFILE}: {op} is not done without an engine (only ARG, FROM, RUN, ENV, "
                               "COPY, USER, WORKDIR, CMD, LABEL)")
    _drop_setid(tree)
    return env


def _drop_setid(tree: Path) -> None:
    """Set-uid/set-gid bits off, as in an exported tree (the box's mounts are nosuid anyway)."""
    for d, _dirs, files in os.walk(tree):
        for name in files:
            p = os.path.join(d, name)
            st = os.lstat(p)
            if stat.S_ISREG(st.st_mode) and st.st_mode & (stat.S_ISUID | stat.S_ISGID):
                os.chmod(p, st.st_mode & ~(stat.S_ISUID | stat.S_ISGID) & 0o7777)
