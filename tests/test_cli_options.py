"""The one option table (fte_shell/cli/options.py): run, bench, shell, demo, judge and sandbox doctor take
their config flags from it, run and bench share the same set, and every flag sets the config path it names."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
import typer
from pydantic import SecretStr
from typer.main import get_command
from typer.testing import CliRunner

from fte_shell.cli import app
from fte_shell.cli.options import FLAGS, SWEEP_FLAGS, ConfigFlag, config_flags, flags_for, overrides_of
from fte_shell.config import ContextConfig, RunConfig, load_config

ROOT: Any = get_command(app)  # typer's own (vendored) click group
TABLE_PARAMS = {f.param for f in FLAGS}
# what each command needs before its flags parse: the positional argument and required options
PREFIX = {"run": ["a question"], "bench": ["hotpotqa", "--out", "sweep"], "shell": [], "demo": [], "judge": ["sweep"],
          "doctor": [], "mcp": [], "fork": ["runs/q1", "--at-turn", "2", "--out", "forked"]}
COMMANDS = list(PREFIX)


def command(name: str) -> Any:
    return ROOT.commands["sandbox"].commands[name] if name == "doctor" else ROOT.commands[name]


def table_opts(name: str) -> set[str]:
    """The flag names of ``name``'s options that come from the table."""
    return {o for p in command(name).params if p.name in TABLE_PARAMS for o in [*p.opts, *p.secondary_opts]}


def all_opts(name: str) -> set[str]:
    return {o for p in command(name).params for o in [*p.opts, *p.secondary_opts]}


def test_run_and_bench_share_the_same_config_flags() -> None:
    run, bench = table_opts("run"), table_opts("bench")
    dataset_opts = {"--gaia-text-only", "--no-gaia-text-only", "--frames-closed", "--no-frames-closed"}
    assert dataset_opts <= bench and not dataset_opts & run  # the [benchmark] options are bench's only
    # bench sweeps its own --profiles (and context strategies); it also judges; a sweep's budget is bench's alone
    assert run - {"--profile", "-p", "--context"} == bench - dataset_opts - {"--judge-preset", "--max-cost", "--max-tokens-total"}
    assert {"--max-cost", "--max-tokens-total"} <= bench
    for flag in ("--rpm", "--tpm", "--max-run-tokens"):
        assert flag in run and flag in bench, flag
    for flag in ("--temperature", "--max-tokens", "--context-window", "--first-tool-choice",
                 "--parse-text-tool-calls", "--no-parse-text-tool-calls", "--time-budget", "--date", "--max-turns",
                 "--base-url", "--model", "--api-key", "--corpus", "--search", "--snapshot", "--snapshot-mode",
                 "--snapshot-manifest"):
        assert flag in bench, flag
    # nothing else is defined twice: the flags both commands have outside the table are their own
    assert (all_opts("run") & all_opts("bench")) - run == {"--config", "-c", "--out", "-o"}


def test_every_command_shows_exactly_its_rows() -> None:
    for name in COMMANDS:
        params = {p.name for p in command(name).params} & TABLE_PARAMS
        assert params == {f.param for f in flags_for(name)}, name
    assert {f.path.split(".")[0] for f in flags_for("shell")} == {"search", "sandbox", "snapshot"}
    assert [f.flag for f in flags_for("demo")] == ["--profile", "--sandbox-provider", "--sandbox-runtime"]
    assert [f.flag for f in flags_for("judge")] == ["--judge-preset"]
    assert [f.flag for f in flags_for("doctor")] == ["--sandbox-provider", "--sandbox-runtime"]


def test_every_row_names_a_documented_field() -> None:
    paths = [f.path for f in FLAGS]
    assert len(paths) == len(set(paths)) and len({f.flag for f in FLAGS}) == len(FLAGS)
    for f in FLAGS:
        assert f.field.description, f.path  # the help comes from the field's docstring
        assert f.help.endswith("]") and f"`{f.path}`" in f.help


def _sample(f: ConfigFlag, tmp: Path) -> tuple[list[str], Any]:
    """Arguments giving ``f`` a value that is not the default, and the value the config should then hold."""
    vt = f.value_type
    if f.spelling is not None:  # --context SPEC
        return [f.flag, "keep_recent:3"], ContextConfig(strategy="keep_recent", keep=3)
    if vt is bool:
        return [f.flag], True
    if f.choices:
        choice = next(c for c in reversed(f.choices) if c != f.field.default)
        return [f.flag, choice], choice
    if vt is Path:
        return [f.flag, str(tmp / f.param)], tmp / f.param
    if vt is int:
        return [f.flag, "77"], 77
    if vt is float:
        return [f.flag, "0.25"], 0.25
    assert vt in (str, SecretStr), (f.path, vt)
    value = NAMED.get(f.path, f"v-{f.param}")
    return [f.flag, value], value


NAMED = {"agent.profile": "fte", "sandbox.provider": "podman"}
"""Text flags whose value is a plugin's name (a built-in name or module:attr): a real one that is not the default."""


def _at(cfg: RunConfig, path: str) -> Any:
    node: Any = cfg
    for key in path.split("."):
        node = getattr(node, key)
    return node.get_secret_value() if hasattr(node, "get_secret_value") else node


@pytest.mark.parametrize("name", COMMANDS)
def test_each_flag_sets_its_config_path(name: str, tmp_path: Path) -> None:
    flags = flags_for(name)
    for f in flags:
        args, want = _sample(f, tmp_path)
        ctx = command(name).make_context(name, [*PREFIX[name], *args])
        given = {k: v for k, v in ctx.params.items() if k in TABLE_PARAMS and v is not None}
        assert set(given) == {f.param}, (f.flag, given)
        cfg = load_config(None, overrides_of(flags, ctx.params), environ={})
        assert _at(cfg, f.path) == want, f.path
        for other in FLAGS:  # nothing else moved
            if other.path != f.path:
                assert _at(cfg, other.path) == _at(RunConfig(), other.path), (f.flag, other.path)
    negatable = [f for f in flags if f.value_type is bool and f.negatable]
    for f in negatable:
        ctx = command(name).make_context(name, [*PREFIX[name], f"--no-{f.flag[2:]}"])
        assert overrides_of(flags, ctx.params) == {f.keys[0]: {f.keys[1]: False}}


def test_the_decorator_hands_the_given_flags_to_the_command(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []
    demo_app = typer.Typer()

    @demo_app.command()
    @config_flags("bench")
    def cmd(name: str, *, overrides: dict[str, Any]) -> None:
        seen.append({"name": name, **overrides})

    r = CliRunner().invoke(demo_app, ["x", "--temperature", "0.5", "--corpus", str(tmp_path), "--no-parse-text-tool-calls"])
    assert r.exit_code == 0, r.output
    assert seen == [{"name": "x", "model": {"temperature": 0.5, "parse_text_tool_calls": False},
                     "search": {"corpus": str(tmp_path)}}]
    r = CliRunner().invoke(demo_app, ["x"])
    assert seen[-1] == {"name": "x"}  # nothing given: nothing overridden (the file and environment decide)
    # a bad value is a usage error naming the flag and the config path: choices, constraints, types
    for args, needle in ((["--snapshot-mode", "bogus"], "'record', 'replay' or 'refresh'"),
                         (["--context-window", "0"], "greater than 0"), (["--max-turns", "x"], "x")):
        r = CliRunner().invoke(demo_app, ["x", *args], env={"COLUMNS": "200"})
        assert r.exit_code == 2 and args[0] in r.output and needle in r.output, r.output
        if args[0] != "--max-turns":
            assert f"{next(f.path for f in FLAGS if f.flag == args[0])}:" in r.output


def test_the_table_refuses_a_clash() -> None:
    with pytest.raises(TypeError, match="clash"):
        @config_flags("run")
        def cmd(model_temperature: float, *, overrides: dict[str, Any]) -> None: ...
    with pytest.raises(TypeError, match="overrides"):
        @config_flags("run")
        def other(x: int) -> None: ...


def test_help_stays_readable() -> None:
    for name in ("run", "bench", "shell", "demo", "judge"):
        r = CliRunner().invoke(app, [name, "--help"], env={"COLUMNS": "120"})
        assert r.exit_code == 0, r.output
        for f in flags_for(name):
            assert f.flag in r.output
        for panel in {f.keys[0].capitalize() for f in flags_for(name)}:
            assert f"─ {panel} " in r.output  # the table's flags are grouped per config table
    r = CliRunner().invoke(app, ["bench", "--help"], env={"COLUMNS": "120"})
    assert "Sampling temperature" in r.output and "model.temperature" in r.output


def test_bench_passes_the_new_model_flags_to_every_run(tmp_path: Path) -> None:
    """`bench` gained run's model/agent flags: they reach the sweep's config (sweep.json) and its runs."""
    qs = tmp_path / "qs.jsonl"
    qs.write_text(json.dumps({"id": "q0", "question": "What is 6 times 7?", "answer": "42"}) + "\n")
    out = tmp_path / "sweep"
    r = CliRunner().invoke(app, ["bench", f"jsonl:{qs}", "--profiles", "fte", "--out", str(out), "--scripted",
                                 "--search", "none", "--no-progress", "--temperature", "0.3", "--max-tokens", "999",
                                 "--time-budget", "120", "--max-turns", "4", "--context-window", "65536",
                                 "--parse-text-tool-calls", "--date", "2030-01-02"])
    assert r.exit_code in (0, 1), r.output
    cfg = json.loads((out / "sweep.json").read_text())["config"]
    assert (cfg["model"]["temperature"], cfg["model"]["max_tokens"], cfg["model"]["context_window"]) == (0.3, 999, 65536)
    assert cfg["model"]["parse_text_tool_calls"] is True
    assert (cfg["agent"]["time_budget_s"], cfg["agent"]["max_turns"], cfg["agent"]["current_date"]) == (120.0, 4, "2030-01-02")
    assert cfg["model"]["model"] == "scripted"  # --scripted still stands in for the endpoint


def test_bench_sweep_options_are_the_fields_of_its_bench_config(tmp_path: Path) -> None:
    """bench's own options are rows of SWEEP_FLAGS: each sets its BenchConfig field (the sweep's bench
    record), its help is the field's docstring, its default the field's."""
    from fte_shell.sweep import BenchConfig

    assert {f.name for f in SWEEP_FLAGS} <= set(BenchConfig.model_fields)
    shown = {p.name: p for p in command("bench").params}
    for f in SWEEP_FLAGS:
        assert f.field.description and shown[f.name].help.startswith(f.field.description.split()[0]), f.name
    assert shown["out"].required and shown["profiles"].default == "shell,fte" and shown["runs"].default == 1
    qs = tmp_path / "qs.jsonl"
    qs.write_text("".join(json.dumps({"id": f"q{i}", "question": f"What is {i} times 7?", "answer": str(7 * i)}) + "\n"
                          for i in range(3)))
    out = tmp_path / "sweep"
    r = CliRunner().invoke(app, ["bench", f"jsonl:{qs}", "-o", str(out), "-p", " fte, ", "-k", "2", "--limit", "1",
                                 "--retries", "0", "--endpoint-wait", "5", "--scripted", "--search", "none",
                                 "--no-progress", "--no-judge"])
    assert r.exit_code in (0, 1), r.output
    bench = json.loads((out / "sweep.json").read_text())["bench"]
    assert (bench["profiles"], bench["runs"], bench["limit"], bench["retries"], bench["endpoint_wait_s"]) == (
        ["fte"], 2, 1, 0, 5.0)
    assert (bench["concurrency"], bench["seed"], bench["split"]) == (4, 0, "dev")  # BenchConfig's defaults
    r = CliRunner().invoke(app, ["bench", f"jsonl:{qs}", "-o", str(out), "--endpoint-wait", "-1"])
    assert r.exit_code == 2 and "endpoint_wait_s" in r.output  # the field's own check, named


def test_docs_config_md_lists_the_table() -> None:
    from fte_shell.cli.options import flags_markdown

    doc = Path(__file__).resolve().parent.parent / "docs" / "config.md"
    assert flags_markdown() in doc.read_text(), "docs/config.md is stale: run python3 docs/gen_config_md.py"


def test_old_spellings_go_when_their_release_comes() -> None:
    """A renamed flag is accepted for one release: once the package reaches ``removed_in``, remove it."""
    from fte_shell.version import __version__

    def release(v: str) -> tuple[int, ...]:
        return tuple(int(x) for x in v.split(".")[:3])

    old = [(f, r) for f in FLAGS for r in f.renamed]
    assert old, "judge --method is an old spelling of --judge-preset"
    for f, r in old:
        assert release(__version__) < release(r.removed_in), f"{r.decl} (now {f.flag}) was due to go in {r.removed_in}"
        assert r.commands <= f.commands and r.decl not in {d for g in FLAGS for d in g.decls}


PROVIDER_FLAGS = {f.param for f in FLAGS if f.path in ("sandbox.provider", "sandbox.runtime")}


def _help_texts(cmd: Any, path: str = "fte-shell") -> Iterable[tuple[str, str]]:
    """(where, text) of every command's help and every option's help, the whole tree."""
    yield path, " ".join((cmd.help or "").split())
    for p in cmd.params:
        if p.name not in PROVIDER_FLAGS:  # those two describe each provider by name
            yield f"{path} {p.opts[0]}", " ".join((getattr(p, "help", None) or "").split())
    for name, sub in getattr(cmd, "commands", {}).items():
        yield from _help_texts(sub, f"{path} {name}")


def test_the_help_speaks_of_the_box_not_of_docker_only() -> None:
    top = " ".join(CliRunner().invoke(app, ["--help"], env={"COLUMNS": "300"}).stdout.split())
    assert "hardened box with no network (a Docker or podman container, or a bubblewrap sandbox" in top
    docker_only = re.compile(r"\bDocker\b|\bcontainers?\b")
    named = [(where, text) for where, text in _help_texts(ROOT) if docker_only.search(text)]
    assert named, "the top-level help names the providers"
    for where, text in named:  # the provider-neutral commands speak of the box; Docker only beside the others
        assert "podman" in text or "bubblewrap" in text or "bwrap" in text, f"{where}: {text}"


def test_context_spec_sets_only_the_keys_it_names(tmp_path: Path) -> None:
    """``--context keep_recent:3`` sets the strategy and its count; the table's other keys stay as the
    config file has them; a bad spec is a usage error naming the spellings."""
    toml = tmp_path / "c.toml"
    toml.write_text("[agent.context]\ntrigger = 0.5\nstrategy = \"discard_all\"\n")
    ctx = command("run").make_context("run", ["q", "--context", "keep_recent:3"])
    overrides = overrides_of(flags_for("run"), ctx.params)
    assert overrides == {"agent": {"context": {"strategy": "keep_recent", "keep": 3}}}
    cfg = load_config(toml, overrides, environ={})
    assert cfg.agent.context == ContextConfig(strategy="keep_recent", keep=3, trigger=0.5)
    assert load_config(toml, {}, environ={}).agent.context.label == "discard_all"
    for bad, said in (("keep_recent", "keep_recent takes a count"), ("nope:1", "unknown context strategy 'nope'"),
                      ("discard_fraction:2", "discard_fraction takes a share")):
        r = CliRunner().invoke(app, ["run", "q", "--context", bad], env={"COLUMNS": "300"})
        assert r.exit_code == 2 and said in " ".join(r.output.split()), (bad, r.output)
