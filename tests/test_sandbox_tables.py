"""``[sandbox]``'s provider tables: each provider's own keys in ``[sandbox.<provider>]``, the old flat keys
still read (a note per moved key, naming its new place), and the config digest of an old sweep unchanged."""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args

import pytest

from fte_shell.config import BwrapConfig, RunConfig, SandboxConfig, SandboxProviderName, load_config
from fte_shell.config.sandbox import MOVED, PROVIDER_TABLES, DockerConfig, PodmanConfig
from fte_shell.digest import canonical_config, config_digest
from fte_shell.errors import ConfigError
from fte_shell.sandbox.hardening import box_layout

# The [sandbox] table of canonical_config as fte-shell wrote it before the provider tables (commit
# 7534740, by hand from its SandboxConfig: the 28 flat keys minus the dropped and the defaulted ones).
OLD_DEFAULTS: dict[str, Any] = {
    "image": "fte-shell-sandbox:latest", "base_image": "debian:bookworm-slim", "user": "1000:1000",
    "read_only_root": True, "tmpfs_size": "256m", "memory": "1g", "cpus": 1.0, "pids_limit": 256,
    "network_mode": "none", "cap_drop_all": True, "no_new_privileges": True, "init": True,
    "protect_warden": True, "ttl_s": 21600, "command_timeout_s": 30.0, "output_cap_bytes": 50000,
    "output_buffer_size": "16m", "total_time_budget_s": None, "env": {},
}


def old_canonical(**changed: Any) -> dict[str, Any]:
    out = dict(OLD_DEFAULTS, **changed)
    return out


def sandbox_canonical(cfg: RunConfig) -> dict[str, Any]:
    sb = dict(canonical_config(cfg)["sandbox"])
    sb.pop("fetch_policy")
    return sb


def test_each_provider_has_its_table_and_the_shared_keys_stay_in_sandbox(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[sandbox]\nprovider = "bwrap"\nmemory = "2g"\n[sandbox.bwrap]\nrootfs = "/srv/r.tar"\n'
                   'cgroup_parent = "fte-me"\n[sandbox.podman]\ninit = false\n')
    sb = load_config(cfg).sandbox
    assert sb.bwrap == BwrapConfig(rootfs=Path("/srv/r.tar"), cgroup_parent="fte-me")
    assert sb.memory == "2g" and sb.podman.init is False and sb.docker.init is True
    assert sb.engine is None  # bwrap has no container engine
    podman = SandboxConfig(provider="podman", podman={"init": False}, protect_warden=False)
    assert podman.engine == podman.podman and podman.engine.init is False
    # the engine's init is the chosen provider's: docker's table says nothing about a podman box
    assert box_layout(podman, tmp_path, tmp_path, "r").init is False
    docker = SandboxConfig(provider="docker", podman={"init": False}, protect_warden=False)
    assert box_layout(docker, tmp_path, tmp_path, "r").init is True
    # a table per built-in provider, each a field of SandboxConfig holding that provider's settings model
    assert PROVIDER_TABLES == get_args(SandboxProviderName)
    assert {n: SandboxConfig.model_fields[n].annotation for n in PROVIDER_TABLES} == {
        "docker": DockerConfig, "podman": PodmanConfig, "bwrap": BwrapConfig}


@pytest.mark.parametrize(("provider", "key", "table"), [
    ("docker", "init", "docker"), ("podman", "init", "podman"), ("bwrap", "init", "docker"),
    ("bwrap", "rootfs", "bwrap"), ("docker", "rootfs_cache", "bwrap"), ("bwrap", "cgroup_parent", "bwrap"),
])
def test_an_old_flat_key_still_loads_with_a_note_naming_its_new_place(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], provider: str, key: str, table: str) -> None:
    value = {"init": "false", "rootfs": '"/srv/r"', "rootfs_cache": '"/srv/c"', "cgroup_parent": '"g"'}[key]
    cfg = tmp_path / "old.toml"
    cfg.write_text(f'[sandbox]\nprovider = "{provider}"\n{key} = {value}\n')
    sb = load_config(cfg).sandbox
    got = getattr(getattr(sb, table), key)
    assert got == {"init": False, "rootfs": Path("/srv/r"), "rootfs_cache": Path("/srv/c"), "cgroup_parent": "g"}[key]
    err = capsys.readouterr().err
    assert err.count("note:") == 1 and f"[sandbox] {key}" in err and f"[sandbox.{table}] {key}" in err


def test_every_moved_key_has_one_home_in_a_provider_table() -> None:
    for key, tables in MOVED.items():
        assert key not in SandboxConfig.model_fields
        for t in tables:
            assert key in SandboxConfig.model_fields[t].annotation.model_fields  # type: ignore[union-attr]


def test_a_key_at_both_places_is_an_error_naming_both(tmp_path: Path) -> None:
    cfg = tmp_path / "both.toml"
    cfg.write_text('[sandbox]\nprovider = "bwrap"\nrootfs = "/a"\n[sandbox.bwrap]\nrootfs = "/b"\n')
    with pytest.raises(ConfigError, match=r"\[sandbox\] rootfs and \[sandbox.bwrap\] rootfs are both set"):
        load_config(cfg)
    with pytest.raises(ConfigError, match=r"unknown key 'sandbox.bwrap.init'"):
        load_config(None, {"sandbox": {"bwrap": {"init": False}}})


@pytest.mark.parametrize(("old", "new", "canonical"), [
    ({}, {}, old_canonical()),
    ({"provider": "bwrap", "rootfs": "/srv/r.tar", "cgroup_parent": "user.slice/fte"},
     {"provider": "bwrap", "bwrap": {"rootfs": "/srv/r.tar", "cgroup_parent": "user.slice/fte"}},
     old_canonical(provider="bwrap", rootfs="/srv/r.tar", cgroup_parent="user.slice/fte")),
    ({"provider": "podman", "init": False, "protect_warden": False},
     {"provider": "podman", "podman": {"init": False}, "protect_warden": False},
     old_canonical(provider="podman", init=False, protect_warden=False)),
    ({"runtime": "runsc", "init": False, "memory": "2g"}, {"runtime": "runsc", "docker": {"init": False}, "memory": "2g"},
     old_canonical(runtime="runsc", init=False, memory="2g")),
    ({"provider": "bwrap", "init": False}, {"provider": "bwrap", "docker": {"init": False}},
     old_canonical(provider="bwrap", init=False)),
])
def test_an_old_sweeps_digest_still_compares_equal(old: dict[str, Any], new: dict[str, Any],
                                                    canonical: dict[str, Any]) -> None:
    """The old flat config, the same config written with the tables, and the [sandbox] table as digests were
    written before the tables (by hand, above): one canonical form, so one digest."""
    a, b = RunConfig.model_validate({"sandbox": old}), RunConfig.model_validate({"sandbox": new})
    assert sandbox_canonical(a) == sandbox_canonical(b) == canonical
    assert config_digest(a) == config_digest(b)
    flat_dump = a.model_dump(mode="json")  # an old sweep's manifest holds a flat dump: folded the same
    assert canonical_config(flat_dump) == canonical_config(a)


def test_digests_written_before_the_tables_are_unchanged() -> None:
    """Measured with fte-shell at commit 7534740 (before the tables) for the same configs: their
    ``[sandbox]`` part gives the same digest now (the other tables are the defaults of that commit and may
    move on with later keys, so the pin is taken on the sandbox-only difference)."""
    base = config_digest(RunConfig())
    bwrap = RunConfig.model_validate({"sandbox": {"provider": "bwrap", "bwrap": {"rootfs": "/srv/rootfs.tar",
                                                                                 "cgroup_parent": "user.slice/fte"}}})
    if base == "53c0b0347decd11d2b7f9c4a58469f8d039d728cb57cd35edc8072c47babc9ac":  # the other tables as then
        assert config_digest(bwrap) == "47f18f7c41d077303ecaa3b4fc561d3f256a08ddb576d88ba5c0a39a02f838f3"
    assert config_digest(bwrap) != base


def test_the_provider_tables_of_providers_not_chosen_do_not_matter_unless_they_hold_a_shared_old_key() -> None:
    base = RunConfig.model_validate({"sandbox": {"provider": "docker"}})
    other = RunConfig.model_validate({"sandbox": {"provider": "docker", "bwrap": {"rootfs_cache": "/x"}}})
    # rootfs_cache folds back as it was: a flat key of every old config (kept so old digests hold)
    assert canonical_config(other)["sandbox"]["rootfs_cache"] == "/x"
    assert config_digest(base) != config_digest(other)
    podman = RunConfig.model_validate({"sandbox": {"provider": "docker", "podman": {"init": False}}})
    assert config_digest(podman) == config_digest(base)  # docker's init is the one a docker box reads


def test_the_corpus_in_the_box_enters_the_digest_by_content_and_its_cache_not_at_all(tmp_path: Path) -> None:
    from fte_shell.search.corpus import CorpusDoc, build_corpus

    a = build_corpus([CorpusDoc(docid="d1", title="T", text="one")], tmp_path / "a")
    moved = build_corpus([CorpusDoc(docid="d1", title="T", text="one")], tmp_path / "elsewhere")
    b = build_corpus([CorpusDoc(docid="d1", title="T", text="two")], tmp_path / "b")

    def digest(**sandbox: Any) -> str:
        return config_digest(RunConfig.model_validate({"sandbox": sandbox}))

    fingerprint = canonical_config(RunConfig.model_validate({"sandbox": {"corpus": str(a)}}))["sandbox"]["corpus"]
    assert fingerprint.startswith("fingerprint:")
    assert digest(corpus=str(a)) == digest(corpus=str(moved), corpus_cache=str(tmp_path / "c")) != digest()
    assert digest(corpus=str(a)) != digest(corpus=str(b))
    assert digest(corpus_cache=str(tmp_path / "c")) == digest()
