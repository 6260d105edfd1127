"""The sandbox provider cases the guarantee probes run for: one table, one row per case.

A test that takes the ``provider_case`` fixture (tests/conftest.py) runs once per case available here;
the module-scoped sandbox fixtures of test_isolation.py, test_container.py, test_sandbox.py and
test_sandbox_exec.py take it, so the tests on those sandboxes are the per-provider "guarantee probes";
tests that use Docker's own API (labels, HostConfig, events, the SDK's exec) stay Docker-only
(``docker_ready``). Under ``CI=true`` a case that is not usable on the machine is a failure, not a skip.

The rootless cases (``podman-rootless``, ``bwrap-user``) need a plain user: run as root, their probes
re-run in a subprocess as ``ftetest``
(``tests/test_rootless.py``: the whole harness, gateway and temporary directories included, belongs to
that user, as on a machine without root); run as a plain user, they run in-process.

``cannot`` names, per case, the guarantees it cannot hold and why: :func:`holds` turns that into an
explicit xfail naming the guarantee (the probe is not run: a memory bomb without a memory limit would
hit the host). docs/sandbox.md's table "Guarantees by provider" says the same.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from fte_shell.config import SandboxConfig

TEST_USER = "ftetest"

GUARANTEES = {
    "memory limit": "a memory bomb is stopped by the box's memory limit (swap = memory)",
    "pids limit": "a fork bomb is contained by a per-box process limit",
    "cpu limit": "the box gets at most sandbox.cpus cores",
    "warden protected": "the agent cannot end the box's warden (PID 1) with signals from inside",
    "timeout kill": "a timed-out command's whole process tree is killed at once and the shell keeps its state",
    "timeout background jobs": "a timed-out command's background jobs (SIGINT ignored) are killed before "
                               "they go on to their next command",
}
"""Guarantees some provider cannot hold (the names :func:`holds` takes); every other probe holds for all."""


@dataclass(frozen=True)
class ProviderCase:
    id: str
    provider: str
    runtime: str = "runc"
    rootless: bool = False
    """Runs as a plain user (root's test run delegates it to a subprocess as :data:`TEST_USER`)."""
    cannot: dict[str, str] = field(default_factory=dict)

    def config(self, **kw: Any) -> SandboxConfig:
        return SandboxConfig(provider=self.provider, runtime=self.runtime, **kw)

    def problem(self) -> str | None:
        """None when the case is usable here (its box image prepared), else what is missing."""
        if self.rootless and os.geteuid() == 0:
            return f"{self.id} runs as the plain user {TEST_USER} (tests/test_rootless.py), not as root"
        if not self.rootless and self.provider == "podman" and os.geteuid() != 0:
            return f"{self.id} needs root (rootful podman)"
        from fte_shell.sandbox import get_provider

        provider = get_provider(self.provider)
        why = provider.probe(30.0)
        if why:
            return f"{self.id}: {provider.backend} is not usable ({why}); run: bash sandbox/setup-host.sh --tests"
        if self.provider == "docker" and self.runtime != "runc":
            import docker

            if self.runtime not in (docker.from_env(timeout=60).info().get("Runtimes") or {}):
                return f"{self.id}: {self.runtime} is not registered with dockerd; run: bash sandbox/setup-host.sh --tests"
        provider.prepare(self.config())
        return None


ROOTLESS_V1 = "rootless podman on cgroup v1: podman ignores the limit (\"not supported … on cgroups V1 rootless\")"

BWRAP_RLIMITS = "bwrap as a plain user without a delegated cgroup (sandbox.bwrap.cgroup_parent) has rlimits only: "

CASES = [
    ProviderCase("docker", "docker"),
    ProviderCase("docker-runsc", "docker", runtime="runsc", cannot={
        "warden protected": "the agent's `kill -9 -1` / signals to PID 1 end the box under gVisor (its own "
                            "session only: nothing outside is reached)",
        "pids limit": "gVisor's Sentry and Gofer share the box's pids cgroup: a fork bomb starves them and "
                      "the whole box dies (the host is safe; the session is lost)",
        "timeout background jobs": "gVisor's /proc/PID/status has no SigIgn line, so the warden cannot "
                                   "tell background jobs (SIGINT ignored) from the foreground command: a "
                                   "timed-out command's background subshell may go on to its next command "
                                   "before the sweep's kill loop ends it",
    }),
    ProviderCase("podman", "podman"),
    ProviderCase("podman-rootless", "podman", rootless=True, cannot={
        "memory limit": ROOTLESS_V1,
        "cpu limit": ROOTLESS_V1,
    }),
    ProviderCase("bwrap", "bwrap"),
    ProviderCase("bwrap-user", "bwrap", rootless=True, cannot={
        "memory limit": BWRAP_RLIMITS + "RLIMIT_AS caps each process, not the box's total",
        "cpu limit": BWRAP_RLIMITS + "nothing limits CPU",
    }),
]


def cgroup_v1() -> bool:
    return not os.path.exists("/sys/fs/cgroup/cgroup.controllers")


def case_cannot(case: ProviderCase) -> dict[str, str]:
    """What the case cannot hold on this host (rootless podman holds the cgroup limits on cgroup v2)."""
    if case.id == "podman-rootless" and not cgroup_v1():
        return {}
    return case.cannot


def holds(case: ProviderCase, guarantee: str) -> None:
    """Call at the top of a probe: an explicit xfail naming the guarantee when ``case`` cannot hold it."""
    assert guarantee in GUARANTEES, guarantee
    why = case_cannot(case).get(guarantee)
    if why:
        pytest.xfail(f"{case.id} cannot hold the guarantee '{guarantee}': {why}")


def box_exists(case: ProviderCase, box_id: str) -> bool:
    """Whether the provider still has the box (asked the provider's own way, not through fte-shell)."""
    if case.provider == "docker":
        import docker
        import docker.errors

        try:
            docker.from_env(timeout=60).api.inspect_container(box_id)
            return True
        except docker.errors.NotFound:
            return False
    if case.provider == "podman":
        podman = shutil.which("podman") or "podman"
        res = subprocess.run([podman, "container", "exists", box_id], check=False, capture_output=True, timeout=60)
        return res.returncode == 0
    if case.provider == "bwrap":  # the id names the warden's host pid: the box lives while it does
        pid = box_id.split("-")[1]
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False
    raise AssertionError(f"box_exists: no check for provider {case.provider} yet")


def box_inspect(case: ProviderCase, box_id: str) -> dict[str, Any]:
    """The engine's own record of the box (``docker inspect`` / ``podman inspect``: Config, HostConfig)."""
    if case.provider == "docker":
        import docker

        return docker.from_env(timeout=60).api.inspect_container(box_id)
    if case.provider == "podman":
        podman = shutil.which("podman") or "podman"
        out = subprocess.run([podman, "inspect", "--type", "container", box_id], check=True,
                             capture_output=True, timeout=60).stdout
        return json.loads(out)[0]
    if case.provider == "bwrap":
        pytest.skip("bwrap boxes carry no owner labels: a box dies with the process that started it "
                    "(--die-with-parent), and gc knows one that outlived it by its gateway bind and its "
                    "directory's owner file (tests/test_sandbox_bwrap.py: nothing is left after SIGKILL of the "
                    "host process; test_gc_kills_a_box_whose_owner_is_gone)")
    raise AssertionError(f"box_inspect: no check for provider {case.provider} yet")


def box_labels(case: ProviderCase, box_id: str) -> dict[str, str]:
    """The owner labels the provider holds for the box."""
    return box_inspect(case, box_id)["Config"]["Labels"]
