"""Shared test fixtures.

Docker: tests marked ``docker`` need a running daemon and the sandbox image. Under ``CI=true`` a missing
daemon is a FAILURE, never a skip; on a developer machine the tests are skipped with the fix named.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("FTE_SHARED_DATA", REPO.parent / "shared" / "data"))
HOTPOTQA_DIR = SHARED_DATA / "hotpotqa-amor"
PYDOCS_DIR = Path("/usr/share/doc/python3.11/html")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _docker_problem() -> str | None:
    try:
        import docker

        client = docker.from_env(timeout=60)
        client.ping()
    except Exception as e:  # noqa: BLE001 - any failure means "no daemon"
        return f"no Docker daemon answers ({e.__class__.__name__}: {e}); run: bash sandbox/setup-host.sh"
    return None


@pytest.fixture(scope="session")
def docker_ready() -> None:
    """Ensure a daemon answers and the sandbox image exists (built on first use)."""
    problem = _docker_problem()
    if problem:
        if IN_CI:
            pytest.fail(problem)
        pytest.skip(problem)
    from fte_shell.config import SandboxConfig
    from fte_shell.sandbox.docker.image import ensure_image

    ensure_image(SandboxConfig())


@pytest.fixture(scope="session")
def pydocs_dir() -> Path:
    """Debian's python3.11-doc HTML (real, long pages to serve on loopback)."""
    if not (PYDOCS_DIR / "library" / "re.html").exists():
        msg = "python3.11-doc is not installed (apt-get install python3.11-doc)"
        if IN_CI:
            pytest.fail(msg)
        pytest.skip(msg)
    return PYDOCS_DIR


@pytest.fixture(scope="session")
def hotpotqa_dir() -> Path:
    if not (HOTPOTQA_DIR / "dev.jsonl").exists():
        msg = f"HotpotQA data not found at {HOTPOTQA_DIR} (set FTE_SHARED_DATA)"
        if IN_CI:
            pytest.fail(msg)
        pytest.skip(msg)
    return HOTPOTQA_DIR
