"""The rootless provider cases (podman-rootless, bwrap-user), run as root: their guarantee probes re-run in
a subprocess as the plain user ``ftetest`` (created by ``sandbox/setup-host.sh --tests``), so the whole harness — gateway,
temporary directories, the provider's storage and user namespaces — belongs to a user without root, as on a
machine where the researcher has none. (Run as a plain user, the case runs in-process instead.)"""

from __future__ import annotations

import os
import pwd
import re
import subprocess
import sys

import pytest

from tests.conftest import IN_CI, REPO, hotpotqa_data_dir
from tests.providers import CASES, TEST_USER, ProviderCase, case_cannot

PROBE_FILES = ["tests/test_isolation.py", "tests/test_sandbox.py", "tests/test_container.py",
               "tests/test_sandbox_exec.py", "tests/test_box_signals.py", "tests/test_corpus_in_box.py"]
"""The modules whose ``provider_case`` tests are the guarantee probes."""


ROOTLESS = [c for c in CASES if c.rootless]


@pytest.mark.parametrize("case", ROOTLESS, ids=[c.id for c in ROOTLESS])
def test_guarantee_probes_as_a_plain_user(case: ProviderCase) -> None:
    if os.geteuid() != 0:
        pytest.skip(f"not root: the {case.id} case runs in-process (tests/providers.py)")
    try:
        home = pwd.getpwnam(TEST_USER).pw_dir
    except KeyError:
        msg = f"the plain test user {TEST_USER} does not exist; run: bash sandbox/setup-host.sh --tests"
        if IN_CI:
            pytest.fail(msg)
        pytest.skip(msg)
    readable = ["-r", str(REPO), "-a", "-x", str(REPO), "-a", "-r", str(REPO / "pyproject.toml"), "-a", "-x", sys.executable]
    reach = subprocess.run(["runuser", "-u", TEST_USER, "--", "test", *readable], capture_output=True, check=False)
    if reach.returncode != 0:
        msg = (f"the plain test user {TEST_USER} cannot read the checkout {REPO} or run {sys.executable}: a "
               "directory is closed to other users (one made by `mktemp -d` has mode 700); clone where others "
               "may read, or `chmod o+rx` the checkout and `o+x` the directories above it")
        if IN_CI:
            pytest.fail(msg)
        pytest.skip(msg)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "USER": TEST_USER, "LOGNAME": TEST_USER,
           "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1", "FTE_PROVIDER_CASES": case.id,
           "FTE_HOTPOTQA_DIR": str(hotpotqa_data_dir().resolve()), "CI": os.environ.get("CI", ""), "LANG": "C.UTF-8"}
    proc = subprocess.run(
        ["runuser", "-u", TEST_USER, "--", "env", "-i", *(f"{k}={v}" for k, v in env.items()),
         sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfEsx", *PROBE_FILES],
        cwd=REPO, capture_output=True, text=True, timeout=1200, check=False,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    passed = re.search(r"(\d+) passed", out)
    assert passed and int(passed.group(1)) >= 50, out[-3000:]  # the probes ran, not just collected
    probed = {g for g in case_cannot(case) if any(f'holds(provider_case, "{g}")' in (REPO / f).read_text()
                                                  for f in PROBE_FILES)}
    for guarantee in probed:  # a guarantee it cannot hold here is named, not silently passed
        assert f"{case.id} cannot hold the guarantee '{guarantee}'" in out, out[-3000:]
