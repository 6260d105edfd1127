"""Every kind of plugin is on :class:`fte_shell.plugins.Registry`, and a third-party plugin of each kind
loads by ``module:attr`` without any change to fte-shell (the plugins: tests/thirdparty_plugins.py)."""

from __future__ import annotations

from pathlib import Path

import pydantic
import pytest

from fte_shell import RunConfig, Sandbox, SandboxConfig
from fte_shell.errors import ConfigError
from fte_shell.plugins import Registry
from fte_shell.profiles import QuestionContext, make_profile
from fte_shell.sandbox import base, get_provider

REF = "tests.thirdparty_plugins:"


def test_a_registry_lists_its_names_and_what_it_loaded() -> None:
    reg: Registry[object] = Registry("thing", {"path": "pathlib:Path"})
    assert list(reg) == ["path"] and "path" in reg and "pathlib:PurePath" not in reg
    assert reg.knows("pathlib:PurePath") and not reg.knows("nope")
    assert reg.get("path") is Path and reg.get("pathlib:Path") is Path
    assert reg.loaded() == [Path]
    with pytest.raises(ConfigError, match="unknown thing 'nope' \\(known: path; or a third-party"):
        reg.get("nope")


def test_a_third_party_sandbox_provider_loads_by_reference() -> None:
    cfg = SandboxConfig(provider=REF + "PROVIDER")
    provider = get_provider(cfg.provider)
    assert provider.name == "renamed-bwrap" and provider in base.PROVIDERS.loaded()
    assert provider.backend == get_provider("bwrap").backend
    with pytest.raises(pydantic.ValidationError, match="or a third-party one as module:attr"):
        SandboxConfig(provider="nope")
    with pytest.raises(ConfigError, match="cannot import 'tests.nope'"):
        get_provider("tests.nope:PROVIDER")


def test_a_third_party_provider_runs_a_box() -> None:
    if why := get_provider("bwrap").probe(30.0):
        pytest.skip(f"bwrap is not usable here: {why}")
    cfg = SandboxConfig(provider=REF + "PROVIDER")
    get_provider(cfg.provider).prepare(cfg)
    with Sandbox(cfg) as sb:
        res = sb.run("cd /tmp && echo hi > note.txt && cat note.txt && ls")
    assert res.exit_code == 0 and res.output.split() == ["hi", "note.txt"]


def test_a_third_party_profile_loads_by_reference(tmp_path: Path) -> None:
    cfg = RunConfig.model_validate({"agent": {"profile": REF + "ReadOnlyFte"}})
    p = make_profile(cfg.agent.profile, QuestionContext(config=cfg, workspace_dir=tmp_path))
    assert [t["function"]["name"] for t in p.tools()] == ["grep", "read", "list_fetched"]
    assert p.execute("list_fetched", {}).error is False
    with pytest.raises(ConfigError, match="unknown profile 'nope'"):
        make_profile("nope", QuestionContext(config=cfg, workspace_dir=tmp_path))


def test_a_third_party_benchmark_loads_by_reference(tmp_path: Path) -> None:
    from fte_shell.benchmarks import registry

    data = tmp_path / "qa.tsv"
    data.write_text("Capital of France?\tParis\n2 + 2?\t4\n")
    ds = registry.load_dataset(f"{REF}BENCHMARK:{data}")
    assert ds.kind == REF + "BENCHMARK" and [(q.question, q.answer) for q in ds.questions] == [
        ("Capital of France?", "Paris"), ("2 + 2?", "4")]
    assert registry.get(REF + "BENCHMARK") is registry.resolve(f"{REF}BENCHMARK:{data}")[0]
    with pytest.raises(ConfigError, match="has no default source"):
        registry.resolve(REF + "BENCHMARK")
    assert list(registry.BENCHMARKS) == [b.kind for b in registry.BENCHMARKS.values()]


def test_a_third_party_answer_format_loads_by_reference() -> None:
    from fte_shell.profiles.answer_format import FORMATS, AnswerFormat

    cfg = RunConfig.model_validate({"agent": {"standard": {"answer_format": REF + "final_line"}}})
    fmt = FORMATS.get(cfg.agent.standard.answer_format)(cfg.agent.standard)
    assert isinstance(fmt, AnswerFormat)
    got = fmt.parse("thinking\nFINAL: Paris")
    assert got is not None and got.answer == "Paris" and fmt.parse("no answer yet") is None


def test_a_sweep_runs_a_third_party_benchmark_and_profile_and_resumes(tmp_path: Path) -> None:
    """``bench`` takes third-party plugins as ``run`` does: the dataset records the reference that finds its
    benchmark again (resume, judge and report read it), and a profile arm is named by its reference."""
    import json

    from typer.testing import CliRunner

    from fte_shell.benchmarks import registry
    from fte_shell.cli import app

    data = tmp_path / "qa.tsv"
    data.write_text("Capital of France?\tParis\n2 + 2?\t4\n")
    args = ["bench", f"{REF}BENCHMARK:{data}", "--profiles", f"fte,{REF}ReadOnlyFte", "--scripted",
            "--no-progress", "--out", str(tmp_path / "sweep")]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    assert "4 run(s) finished now" in r.output
    manifest = json.loads((tmp_path / "sweep" / "sweep.json").read_text())
    assert manifest["dataset"]["kind"] == REF + "BENCHMARK"
    assert registry.of_sweep(tmp_path / "sweep") is registry.get(REF + "BENCHMARK")
    assert sorted(p.name for p in (tmp_path / "sweep" / "runs").iterdir()) == ["fte", REF + "ReadOnlyFte"]
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0 and "4 already done" in again.output, again.output
    r = CliRunner().invoke(app, ["bench", f"{REF}BENCHMARK:{data}", "--profiles", "nope", "--scripted",
                                 "--out", str(tmp_path / "other")])
    assert r.exit_code == 2 and "unknown profile(s): nope" in r.output and "module:attr" in r.output
