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
from fte_shell.errors import SandboxError
from fte_shell.sandbox import base, get_provider

SANDBOX = Path(__file__).resolve().parent.parent / "fte_shell" / "sandbox"


def test_every_provider_name_has_its_module_and_only_those() -> None:
    assert set(base.PROVIDERS) == set(get_args(SandboxProviderName)) == {"docker", "bwrap"}
    for name in base.PROVIDERS:
        provider = get_provider(name)
        assert provider.name == name
        assert get_provider(name) is provider  # one per process
    assert SandboxConfig().provider == "docker"


def test_an_unknown_provider_is_refused() -> None:
    with pytest.raises(SandboxError, match="unknown sandbox provider 'nope'"):
        get_provider("nope")
    with pytest.raises(pydantic.ValidationError):
        SandboxConfig(provider="nope")  # type: ignore[arg-type]


def test_the_default_provider_leaves_the_config_digest_as_before() -> None:
    cfg = RunConfig()
    old = cfg.model_dump(mode="json")
    old["sandbox"].pop("provider")  # a run directory written before the field existed
    assert config_digest(old) == config_digest(cfg)
    assert "provider" not in canonical_config(cfg)["sandbox"]


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
    protocol, not Docker (a provider is found by name at run time)."""
    runtime = [p for p in SANDBOX.glob("*.py")]
    assert {p.stem for p in runtime} >= {"base", "facade", "pool", "session", "output", "gateway", "ownership"}
    for path in runtime:
        pkg = "fte_shell.sandbox"
        bad = {m for m in _imports(path, pkg) if m.startswith("fte_shell.sandbox.docker") or m == "docker"}
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
