"""The config's secrets have one table (config/secrets.py) that every reader follows, and the config digest
leaves out a key added later while it holds its model default (digest.KEYS_ALWAYS_IN is frozen), so a new
config key can never change the digests of the runs written before it."""

from __future__ import annotations

import copy
from types import UnionType
from typing import Any, Union, get_args, get_origin

import pytest
from pydantic import BaseModel, SecretStr, create_model

from fte_shell.config import SECRETS, ModelConfig, RunConfig, load_config
from fte_shell.config.sandbox import DockerConfig, SandboxConfig
from fte_shell.config.search import EmbeddingsConfig, SearchConfig
from fte_shell.digest import canonical_config, config_digest
from fte_shell.distributed.runenv import restore_secrets, strip_secrets
from fte_shell.episode.fork import config_over


def _models(annotation: Any) -> list[type[BaseModel]]:
    args = get_args(annotation) if get_origin(annotation) in (Union, UnionType) else (annotation,)
    return [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]


def _secret_fields(cls: type[BaseModel], seen: set[type] | None = None) -> set[tuple[type, str]]:
    """(model class, field) of every SecretStr field reachable from ``cls``."""
    seen = seen if seen is not None else set()
    out: set[tuple[type, str]] = set()
    if cls in seen:
        return out
    seen.add(cls)
    for name, field in cls.model_fields.items():
        args = get_args(field.annotation) if get_origin(field.annotation) in (Union, UnionType) else (field.annotation,)
        if SecretStr in args:
            out.add((cls, name))
        for sub in _models(field.annotation):
            out |= _secret_fields(sub, seen)
    return out


def _class_at(table: str) -> type[BaseModel]:
    cls: type[BaseModel] = RunConfig
    for name in table.split("."):
        cls = _models(cls.model_fields[name].annotation)[0]
    return cls


def test_every_secret_field_of_the_config_models_is_in_the_secrets_table() -> None:
    assert _secret_fields(RunConfig) == {(_class_at(s.table), s.key) for s in SECRETS}
    assert len({s.env for s in SECRETS}) == len(SECRETS)


def _set(cfg: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    table = cfg
    for name in path[:-1]:
        table = table.setdefault(name, {})
    table[path[-1]] = value
    return cfg


def test_every_secret_is_read_from_its_variable_kept_out_of_the_digest_and_travels_outside_the_config(
        monkeypatch: pytest.MonkeyPatch) -> None:
    plain = RunConfig()
    for s in SECRETS:
        monkeypatch.delenv(s.env, raising=False)
    for s in SECRETS:
        cfg = load_config(None, {"search": {"corpus": "/nowhere"}}, environ={s.env: "k-" + s.env})
        table = cfg
        for name in s.path[:-1]:
            table = getattr(table, name)
        assert getattr(table, s.key).get_secret_value() == "k-" + s.env
        written = load_config(None, _set({"search": {"corpus": "/nowhere"}}, s.path, "other"))
        assert config_digest(cfg) == config_digest(written)  # the secret is not in the digest
        stripped, env = strip_secrets(cfg)
        assert env == {s.env: "k-" + s.env} and config_digest(stripped) == config_digest(cfg)
        assert stripped != cfg  # the shipped configuration holds no secret
        monkeypatch.setenv(s.env, "k-" + s.env)
        restore_secrets(stripped)
        assert stripped == cfg
        forked = config_over(plain.model_dump(mode="json"), {"search": {"corpus": "/nowhere"}})
        assert forked == cfg  # a fork takes it from the environment, not the recorded configuration
        monkeypatch.delenv(s.env)


def _with_new_key(table: str, default: Any) -> type[RunConfig]:
    """A copy of RunConfig whose ``table`` has one key more, ``new_knob``, defaulting to ``default``."""
    def grown(cls: type[BaseModel], path: list[str]) -> type[BaseModel]:
        if not path:
            return create_model(cls.__name__ + "Grown", __base__=cls, new_knob=(type(default), default))
        name, rest = path[0], path[1:]
        field = cls.model_fields[name]
        sub = grown(_models(field.annotation)[0], rest)
        annotation = sub | None if type(None) in get_args(field.annotation) else sub
        return create_model(cls.__name__ + "Grown", __base__=cls, **{name: (annotation, sub())})
    return grown(RunConfig, table.split("."))  # type: ignore[return-value]


OLD = [
    {},
    {"search": {"corpus": "/nowhere", "retriever": "bm25s", "embeddings": {"batch_size": 8}}},
    {"sandbox": {"provider": "bwrap", "bwrap": {"rootfs": "/srv/r.tar"}}, "agent": {"max_turns": 7}},
    {"agent": {"summary_model": {"model": "s"}}},
]


def _config(old: dict[str, Any], table: str, knob: int | None = None) -> dict[str, Any]:
    data = copy.deepcopy(old)
    if table == "search.embeddings":
        data.setdefault("search", {})["corpus"] = "/nowhere"  # the embeddings count only with a corpus
    return data if knob is None else _set(data, (*table.split("."), "new_knob"), knob)  # type: ignore[arg-type]


@pytest.mark.parametrize("table", ["model", "agent", "sandbox.docker", "sandbox.fetch_policy", "search",
                                   "search.embeddings", "snapshot"])
@pytest.mark.parametrize("old", OLD)
def test_a_new_config_key_leaves_every_old_digest_unchanged(table: str, old: dict[str, Any]) -> None:
    grown = _with_new_key(table, 7)
    before, after = RunConfig.model_validate(_config(old, table)), grown.model_validate(_config(old, table))
    assert config_digest(after) == config_digest(before)
    assert canonical_config(before.model_dump(mode="json"), grown) == canonical_config(after)  # an old sweep.json
    changed = grown.model_validate(_config(old, table, 8))
    assert config_digest(changed) != config_digest(after)  # and it counts once it is set


def test_the_model_copies_are_what_they_say() -> None:
    """The grown copies above are the config models with one key more (else the test above proves nothing)."""
    grown = _with_new_key("search.embeddings", 7)
    assert grown().search.embeddings.new_knob == 7  # type: ignore[attr-defined]
    assert issubclass(type(grown().search), SearchConfig) and isinstance(grown().search.embeddings, EmbeddingsConfig)
    docker = _with_new_key("sandbox.docker", 7)().sandbox
    assert isinstance(docker, SandboxConfig) and isinstance(docker.docker, DockerConfig)
    assert isinstance(_with_new_key("model", 7)().model, ModelConfig)


def test_the_keys_always_in_are_those_of_the_first_recorded_sweep() -> None:
    """KEYS_ALWAYS_IN is frozen at what the first digests were written with: every key it lists for a table
    of the v0 fixture's recorded config is in that config (a key added since, listed by mistake, would make
    every old sweep look changed); tables added later are listed with no key."""
    import json

    from conftest import REPO

    from fte_shell.digest import KEYS_ALWAYS_IN

    recorded = json.loads((REPO / "tests" / "fixtures" / "v0" / "sweep" / "sweep.json").read_text())["config"]
    tables = {"": recorded, **{t: recorded[t] for t in recorded}, "sandbox.fetch_policy":
              recorded["sandbox"]["fetch_policy"], "agent.summary_model": recorded["model"]}
    for table, keys in tables.items():
        assert KEYS_ALWAYS_IN[table] <= set(keys), (table, sorted(KEYS_ALWAYS_IN[table] - set(keys)))
    assert KEYS_ALWAYS_IN["agent.standard"] == KEYS_ALWAYS_IN["search.embeddings"] == frozenset()
