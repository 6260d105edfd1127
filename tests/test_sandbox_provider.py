"""The sandbox provider seam: the registry, the one-way runtime → provider split, and the Docker box
behind the protocol."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import get_args

import pydantic
import pytest

from fte_shell import Sandbox, SandboxConfig
from fte_shell.config import RunConfig, SandboxProviderName
from fte_shell.digest import canonical_config, config_digest
from fte_shell.errors import ConfigError
from fte_shell.sandbox import base, get_provider

SANDBOX = Path(__file__).resolve().parent.parent / "fte_shell" / "sandbox"


def test_every_provider_name_has_its_module_and_only_those() -> None:
    assert list(base.PROVIDERS) == list(get_args(SandboxProviderName)) == ["docker", "podman", "bwrap"]
    for name in base.PROVIDERS:
        provider = get_provider(name)
        assert provider.name == name
        assert get_provider(name) is provider  # one per process
    assert SandboxConfig().provider == "docker"


def test_an_unknown_provider_is_refused() -> None:
    with pytest.raises(ConfigError, match="unknown sandbox provider .nope."):
        get_provider("nope")
    with pytest.raises(pydantic.ValidationError):
        SandboxConfig(provider="nope")  # type: ignore[arg-type]


def test_the_default_provider_leaves_the_config_digest_as_before() -> None:
    cfg = RunConfig()
    old = cfg.model_dump(mode="json")
    old["sandbox"].pop("provider")  # a run directory written before the fields existed
    old["sandbox"].pop("runtime")
    assert config_digest(old) == config_digest(cfg)
    assert "provider" not in canonical_config(cfg)["sandbox"]
    assert "runtime" not in canonical_config(cfg)["sandbox"]


@pytest.mark.parametrize("change", [{"provider": "podman"}, {"runtime": "runsc"}])
def test_another_provider_or_runtime_is_in_the_config_digest(change: dict[str, str]) -> None:
    cfg = RunConfig(sandbox=SandboxConfig(**change))
    assert canonical_config(cfg)["sandbox"].items() >= change.items()
    assert config_digest(cfg) != config_digest(RunConfig())


def test_a_ray_node_may_choose_its_own_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    from fte_shell.distributed.nodes import node_sandbox

    sweep = SandboxConfig(pids_limit=64)
    assert node_sandbox(sweep) is sweep  # no choice of its own: the sweep's
    monkeypatch.setenv("FTE_SANDBOX_PROVIDER", "podman")
    mine = node_sandbox(sweep)
    assert (mine.provider, mine.runtime, mine.pids_limit) == ("podman", "runc", 64)
    monkeypatch.setenv("FTE_SANDBOX_PROVIDER", "docker")
    monkeypatch.setenv("FTE_SANDBOX_RUNTIME", "runsc")
    assert (node_sandbox(sweep).provider, node_sandbox(sweep).runtime) == ("docker", "runsc")
    monkeypatch.setenv("FTE_SANDBOX_PROVIDER", "nope")
    with pytest.raises(pydantic.ValidationError):
        node_sandbox(sweep)


def test_a_podman_box_gets_the_shared_hardened_layout_as_flags(tmp_path: Path) -> None:
    from fte_shell.sandbox.hardening import box_layout
    from fte_shell.sandbox.providers.podman import cli
    from fte_shell.sandbox.providers.podman.box import run_flags

    cfg = SandboxConfig(provider="podman")
    flags = run_flags(box_layout(cfg, tmp_path / "w", tmp_path / "g", "q1", ttl_s=60), cfg)
    joined = " ".join(flags)
    assert flags[:3] == ["--runtime", "runc", "run"]
    for want in ("--network none", "--read-only", "--user 1000:1000", "--cap-drop all",
                 "--security-opt no-new-privileges", f"-v {tmp_path / 'w'}:/work:ro",
                 f"-v {tmp_path / 'g'}:/run/fte:ro", "--label fte-shell.run-id=q1", "--label fte-shell.ttl=60",
                 "--tmpfs /tmp:rw,exec,nosuid,nodev,size=256m,mode=1777"):
        assert want in joined, want
    assert ("--pids-limit 256" in joined) == cli.cgroup_limits()
    nofile, nproc = (flags[i + 1] for i, f in enumerate(flags) if f == "--ulimit")
    n_files = int(nofile.split("=")[1].split(":")[0])
    import resource

    assert n_files <= resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    assert int(nproc.split("=")[1].split(":")[0]) <= min(resource.getrlimit(resource.RLIMIT_NPROC)[1], 32768)


def _imports(path: Path, package: str) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            parts = package.split(".")
            base_mod = ".".join(parts[: len(parts) - node.level + 1]) if node.level else ""
            mod = ".".join(p for p in (base_mod, node.module or "") if p)
            names.add(mod)
            names.update(f"{mod}.{a.name}" for a in node.names)
    return names


def test_the_runtime_never_imports_a_provider() -> None:
    """Deployment → runtime only: session, facade, pool, output, gateway, ownership and base know the
    protocol, not a provider (one is found by name at run time in ``sandbox/providers/``)."""
    runtime = [p for p in SANDBOX.glob("*.py")]
    assert {p.stem for p in runtime} >= {"base", "facade", "pool", "session", "output", "gateway", "ownership"}
    for path in runtime:
        pkg = "fte_shell.sandbox"
        bad = {m for m in _imports(path, pkg) if m.startswith("fte_shell.sandbox.providers") or m == "docker"}
        assert not bad, f"{path.name} imports {bad}"


@pytest.mark.docker
def test_the_docker_box_behind_the_protocol(docker_ready: None) -> None:
    with Sandbox(SandboxConfig()) as sb:
        box = sb.box
        assert sb.describe() == {
            "provider": "docker",
            "id": sb.container_id,
            "name": box.name,
            "run_id": sb.run_id,
            "image": SandboxConfig().image,
        }
        assert box.gateway_socket == sb.gateway_dir / "gw.sock"
        assert box.workspace == sb.workspace and box.is_running()
        assert box.exec(["id", "-u"]) == (0, "1000\n")
        argv = box.terminal_argv({"TERM": "xterm"})
        assert argv[1:3] == ["exec", "-i"] and argv[-4:] == [sb.container_id, "bash", "--norc", "-i"]
        assert ["-e", "TERM=xterm"] == argv[5:7]
    assert not box.is_running()
