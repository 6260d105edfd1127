"""Shared test fixtures.

Docker: tests marked ``docker`` need a running daemon and the sandbox image. Under ``CI=true`` a missing
daemon is a FAILURE, never a skip; on a developer machine the tests are skipped with the fix named.

Sandbox providers: a test (or module fixture) that takes ``provider_case`` runs once per case of
tests/providers.py CASES (``FTE_PROVIDER_CASES=id,…`` picks cases; then only such tests are collected:
the rootless re-run as ``ftetest`` uses that). An unusable case fails under ``CI=true``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
PYDOCS_DIR = Path("/usr/share/doc/python3.11/html")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def default_signal_dispositions() -> None:
    """The suite passes whatever signal dispositions it inherits: a run started in a script's background
    (``nohup … &``) ignores SIGINT (and often SIGQUIT, SIGHUP), and so would every harness a test starts
    and interrupts with Ctrl-C. Undone once, before any test (SIGINT back to Python's KeyboardInterrupt)."""
    import signal

    for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP, signal.SIGTERM):
        if signal.getsignal(sig) == signal.SIG_IGN:
            signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, ())


def pytest_configure(config: pytest.Config) -> None:
    default_signal_dispositions()


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
    from fte_shell.sandbox.providers.docker.image import ensure_image

    ensure_image(SandboxConfig())


def _selected_cases() -> list:
    from tests.providers import CASES

    only = os.environ.get("FTE_PROVIDER_CASES", "")
    if only:
        return [c for c in CASES if c.id in only.split(",")]
    # as root the rootless case re-runs as the plain test user (tests/test_rootless.py)
    return [c for c in CASES if not (c.rootless and os.geteuid() == 0)]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "provider_case" in metafunc.fixturenames:
        cases = _selected_cases()
        metafunc.parametrize("provider_case", cases, ids=[c.id for c in cases], indirect=True, scope="module")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("FTE_PROVIDER_CASES"):  # a per-provider re-run: only the guarantee probes
        keep = [i for i in items if "provider_case" in getattr(i, "fixturenames", ())]
        config.hook.pytest_deselected(items=[i for i in items if i not in keep])
        items[:] = keep


_case_problems: dict[str, str | None] = {}


@pytest.fixture(scope="module")
def provider_case(request: pytest.FixtureRequest):
    """The provider case of this module's sandboxes, usable on this host (else a failure under CI)."""
    case = request.param
    if case.id not in _case_problems:
        try:
            _case_problems[case.id] = case.problem()
        except Exception as e:  # noqa: BLE001 - the set-up itself failed: say how
            _case_problems[case.id] = f"{case.id}: {e.__class__.__name__}: {e}"
    problem = _case_problems[case.id]
    if problem:
        if IN_CI:
            pytest.fail(problem)
        pytest.skip(problem)
    return case


@pytest.fixture(scope="session")
def pydocs_dir() -> Path:
    """Debian's python3.11-doc HTML (real, long pages to serve on loopback)."""
    if not (PYDOCS_DIR / "library" / "re.html").exists():
        msg = "python3.11-doc is not installed (apt-get install python3.11-doc)"
        if IN_CI:
            pytest.fail(msg)
        pytest.skip(msg)
    return PYDOCS_DIR


def hotpotqa_data_dir() -> Path:
    """The package's own choice (``fte_shell.benchmarks.hotpotqa.default_hotpotqa_dir``): the copy beside
    the repository (``../shared/data/hotpotqa-amor``) or ``$FTE_HOTPOTQA_DIR``/``$FTE_SHARED_DATA``, else the
    download that ``fte-shell corpus hotpotqa --download --no-index`` (setup-host.sh --tests) made."""
    from fte_shell.benchmarks.hotpotqa import default_hotpotqa_dir

    return default_hotpotqa_dir()


@pytest.fixture(scope="session")
def hotpotqa_dir() -> Path:
    d = hotpotqa_data_dir()
    if not (d / "dev.jsonl").exists():
        msg = (f"HotpotQA data not found at {d}: download it with `fte-shell corpus hotpotqa --download "
               "--no-index` (bash sandbox/setup-host.sh --tests does), or set FTE_HOTPOTQA_DIR")
        if IN_CI:
            pytest.fail(msg)
        pytest.skip(msg)
    return d


@pytest.fixture(scope="session")
def hotpotqa_corpus(tmp_path_factory: pytest.TempPathFactory, hotpotqa_dir: Path) -> Path:
    """The HotpotQA pages as a local corpus, made once for the session (its retrievers' indexes are built
    on first use and shared too)."""
    from fte_shell.benchmarks.hotpotqa import ensure_hotpotqa_corpus

    return ensure_hotpotqa_corpus(hotpotqa_dir, tmp_path_factory.mktemp("corpus") / "hotpotqa")


def trajectory(run_dir: Path) -> list[dict]:
    """A run's events as the JSON objects written, for assertions on their keys: read through the one
    reader (``fte_shell.record.rundir.read_events``: typed, an old run converted) and dumped back."""
    from fte_shell.record.events import event_dict
    from fte_shell.record.rundir import read_events

    return [event_dict(e) for e in read_events(run_dir)]


def drive(cfg: Any, profile: Any, rec: Any, question: str, *, run_id: str | None = None, **agent_kw: Any) -> Any:
    """Run fte-shell's loop on an episode over a profile and a run writer the test holds (the start event
    carries the server's info, as ``run_question``'s does): ``Agent(cfg, model).drive(Episode(…))``."""
    from fte_shell.agent import Agent
    from fte_shell.episode import Episode
    from fte_shell.model import ModelClient

    model = ModelClient(cfg.model)
    ep = Episode(cfg, question, profile, rec, run_id=run_id, server=model.server_info())
    return Agent(cfg, model, **agent_kw).drive(ep)
