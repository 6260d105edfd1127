"""Configuration: the reference file, precedence and error messages."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel
from typer.testing import CliRunner

from fte_shell.cli import app
from fte_shell.config import RunConfig, load_config, reference_toml
from fte_shell.errors import ConfigError

DOC = Path(__file__).resolve().parent.parent / "docs" / "config.md"


def test_reference_loads_back_to_the_defaults(tmp_path: Path) -> None:
    f = tmp_path / "ref.toml"
    f.write_text(reference_toml())
    assert load_config(f, environ={}) == RunConfig()


def test_reference_names_every_field() -> None:
    text = reference_toml()
    for table in ("[model]", "[agent]", "[agent.context]", "[agent.standard]", "[sandbox]", "[sandbox.docker]",
                  "[sandbox.podman]", "[sandbox.bwrap]", "[sandbox.fetch_policy]", "[search]", "[search.embeddings]"):
        assert f"\n{table}\n" in text
    for model in (RunConfig().model, RunConfig().agent, RunConfig().agent.context, RunConfig().sandbox,
                  RunConfig().search, RunConfig().search.embeddings):
        for name in type(model).model_fields:
            if not isinstance(getattr(model, name), BaseModel):  # tables of their own
                assert f"\n{name} = " in text or f"\n# {name} =  (" in text, name


def test_docs_config_md_is_current() -> None:
    """docs/config.md embeds the reference; regenerate with `fte-shell config` when a field changes."""
    assert reference_toml() in DOC.read_text(), "docs/config.md is stale: run python3 docs/gen_config_md.py"


def test_cli_prints_the_reference() -> None:
    res = CliRunner().invoke(app, ["config"])
    assert res.exit_code == 0 and res.output == reference_toml()


def test_precedence_toml_env_flags(tmp_path: Path) -> None:
    f = tmp_path / "c.toml"
    f.write_text('[model]\nmodel = "from-toml"\nbase_url = "http://toml/v1"\n[agent]\nmax_turns = 7\n')
    env = {"OPENAI_MODEL": "from-env", "SERPER_API_KEY": "k"}
    cfg = load_config(f, {"model": {"base_url": None}, "agent": {"max_turns": 9}}, environ=env)
    assert cfg.model.model == "from-env"  # env beats the file
    assert cfg.model.base_url == "http://toml/v1"  # a None flag changes nothing
    assert cfg.agent.max_turns == 9  # flags beat both
    assert cfg.search.serper_api_key is not None and cfg.search.serper_api_key.get_secret_value() == "k"


@pytest.mark.parametrize(
    ("toml", "needle"),
    [
        ("[sandbox]\nmemroy = '1g'\n", "unknown key 'sandbox.memroy'"),
        ("[sandbox.fetch_policy]\nmax_bytes = 'lots'\n", "sandbox.fetch_policy.max_bytes"),
        ("[model\n", "not valid TOML"),
    ],
)
def test_bad_files_name_the_problem(tmp_path: Path, toml: str, needle: str) -> None:
    f = tmp_path / "bad.toml"
    f.write_text(toml)
    with pytest.raises(ConfigError) as e:
        load_config(f, environ={})
    assert needle in str(e.value)


def test_missing_file() -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(Path("/nonexistent/fte.toml"), environ={})
