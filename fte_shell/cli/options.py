"""THE option table of the commands that configure a run: ``run``, ``bench``, ``shell`` and ``demo`` (and
``judge``, which takes the ``[judge]`` rows, and ``sandbox doctor``, which takes the provider's).

Each row names a config path (``model.temperature``), its flag(s) and the commands that take it; the
flag's type, help text, choices and default are derived from the config model's field (its annotation
and docstring), so the commands cannot drift apart and a new field needs one row here::

    @app.command("run")
    @config_flags("run")
    def run_cmd(question: str, ..., overrides: dict[str, Any]) -> None:
        cfg = load_config(config, overrides)

The decorated command shows the table's flags (grouped in ``--help`` under Model, Agent, Search,
Sandbox, Snapshot) and receives the flags that were given as ``overrides``: the nested dict
:func:`~fte_shell.config.load_config` merges last (flags beat the file and the environment).

``bench``'s own options are the same kind of table over its sweep's
:class:`~fte_shell.sweep.BenchConfig` (:data:`SWEEP_FLAGS`, :func:`sweep_flags`): the command gets
them as ``sweep``, the keyword arguments of that model.

A renamed flag keeps working for one release: a :class:`Renamed` entry of the row (hidden from ``--help``)
sets the row's value and prints a one-line note naming the new spelling (:func:`renamed_note`, which a
renamed command calls too).
"""

from __future__ import annotations

import functools
import inspect
import re
import types
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

import typer
from pydantic import BaseModel, SecretStr, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

from ..benchmarks.presets import BUILTIN
from ..config import ContextConfig, RunConfig
from .renamed import Renamed

RUNS = frozenset({"run", "bench", "fork"})
"""The commands that start agent runs: every model/agent/search/snapshot flag is theirs."""

COMMANDS = frozenset({"run", "bench", "fork", "shell", "demo", "judge", "doctor", "mcp"})

WORLD = RUNS | {"shell", "mcp"}
"""The commands that build a world (search, corpus, snapshot) and boxes."""


@dataclass(frozen=True)
class ConfigFlag:
    """One row of the table: the flag(s) that set one config path, and the commands that take it."""

    path: str
    """Dotted config path, ``table.key`` (``model.temperature``)."""

    decls: tuple[str, ...]
    """Flag names, the long one first (``("--model", "-m")``)."""

    commands: frozenset[str] = RUNS
    """The commands that take the flag."""

    negatable: bool = True
    """Booleans: also a ``--no-…`` form (else the flag can only switch the setting on)."""

    renamed: tuple[Renamed, ...] = ()
    """Old spellings still accepted for one release."""

    spelling: Callable[[str], dict[str, Any]] | None = None
    """A table set by one text (``--context keep_recent:5``): the text → the table's keys it sets (a
    ValueError says what is wrong). None: the flag is the field's value itself."""

    metavar: str | None = None
    """What ``--help`` shows for the value of a :attr:`spelling` flag."""

    @property
    def flag(self) -> str:
        """The long flag name (``--temperature``)."""
        return self.decls[0]

    @property
    def param(self) -> str:
        """The command function's parameter name (``model_temperature``)."""
        return self.path.replace(".", "_")

    @property
    def keys(self) -> tuple[str, ...]:
        """The config path's keys (``("model", "temperature")``)."""
        return tuple(self.path.split("."))

    @property
    def field(self) -> FieldInfo:
        """The pydantic field the flag sets."""
        model: type[BaseModel] = RunConfig
        *tables, key = self.keys
        for t in tables:
            model = model.model_fields[t].annotation  # type: ignore[assignment]
        return model.model_fields[key]

    @property
    def value_type(self) -> Any:
        """The field's annotation without ``None`` (a ``Literal`` keeps its choices)."""
        ann = self.field.annotation
        if get_origin(ann) in (Union, types.UnionType):
            args = [a for a in get_args(ann) if a is not type(None)]
            ann = args[0] if len(args) == 1 else ann
        return ann

    @property
    def choices(self) -> tuple[str, ...] | None:
        """A ``Literal`` field's values."""
        return get_args(self.value_type) if get_origin(self.value_type) is Literal else None

    def check(self, value: Any) -> Any:
        """Validate a given value against the field (type, constraints, choices) as the parser reads it,
        so a bad value is a usage error naming the flag and the config path."""
        if value is None:
            return None
        if self.spelling is not None:
            try:
                self.spelling(value)
            except ValueError as e:
                raise typer.BadParameter(f"{self.path}: {e}") from None
            return value
        try:
            TypeAdapter(Annotated[self.field.annotation, self.field]).validate_python(value)
        except ValidationError as e:
            raise typer.BadParameter(f"{self.path}: {e.errors()[0]['msg']}") from None
        return value

    @property
    def help(self) -> str:
        """The field docstring's first sentence and what an unset value means, then the config path."""
        doc = " ".join((self.field.description or "").split()).replace("``", "`")
        first, *rest = _SENTENCE.split(doc)
        unset = next((s for s in rest if s.startswith("None = ")), None)
        text = first.replace("None = ", "unset: ") + (f" Unset: {unset.removeprefix('None = ')}" if unset else "")
        return f"{text} [`{self.path}`{f', default {self.default}' if self.default is not None else ''}]"

    @property
    def default(self) -> str | None:
        """The config model's default as ``--help`` shows it (None: unset by default)."""
        default = self.field.get_default(call_default_factory=True)
        if default is None:
            return None
        if isinstance(default, BaseModel):  # a table set by its spelling: the default's own
            return str(getattr(default, "label", default))
        return str(default).lower() if isinstance(default, bool) else str(default)

    def option(self) -> Any:
        """The ``Annotated[type | None, typer.Option(...)]`` of the command parameter: choices and secrets
        are read as text (the choices shown, checked by :meth:`check`)."""
        vt = str if self.choices or self.value_type is SecretStr or self.spelling else self.value_type
        decls = self.decls
        if vt is bool and self.negatable:
            decls = (f"{self.flag}/--no-{self.flag.removeprefix('--')}", *decls[1:])
        metavar = "|".join(self.choices) if self.choices else self.metavar
        opt = typer.Option(*decls, help=self.help, rich_help_panel=self.keys[0].capitalize(), show_default=False,
                           metavar=metavar, callback=self.check)
        return Annotated[vt | None, opt]  # type: ignore[valid-type]


_SENTENCE = re.compile(r"(?<=\.)\s+(?=[A-Z])")


def context_spelling(spec: str) -> dict[str, Any]:
    """``--context SPEC`` (``keep_recent:5``, ``discard_all`` …: :meth:`ContextConfig.parse`) as the keys of
    ``[agent.context]`` it sets; the table's other keys (``trigger`` …) stay as the config file has them."""
    return ContextConfig.parse(spec).model_dump(exclude_unset=True)

FLAGS: tuple[ConfigFlag, ...] = (
    # [model]
    ConfigFlag("model.base_url", ("--base-url",)),
    ConfigFlag("model.model", ("--model", "-m")),
    ConfigFlag("model.api_key", ("--api-key",)),
    ConfigFlag("model.api", ("--api",)),
    ConfigFlag("model.temperature", ("--temperature",)),
    ConfigFlag("model.max_tokens", ("--max-tokens",)),
    ConfigFlag("model.context_window", ("--context-window",)),
    ConfigFlag("model.parse_text_tool_calls", ("--parse-text-tool-calls",)),
    ConfigFlag("model.rpm", ("--rpm",)),
    ConfigFlag("model.tpm", ("--tpm",)),
    ConfigFlag("model.server", ("--server",)),
    ConfigFlag("model.thinking", ("--thinking",)),
    # [agent]; bench sweeps its own --profiles
    ConfigFlag("agent.profile", ("--profile", "-p"), commands=frozenset({"run", "demo", "mcp"})),
    ConfigFlag("agent.max_turns", ("--max-turns",)),
    ConfigFlag("agent.time_budget_s", ("--time-budget",)),
    ConfigFlag("agent.current_date", ("--date",)),
    ConfigFlag("agent.first_tool_choice", ("--first-tool-choice",)),
    ConfigFlag("agent.max_total_tokens", ("--max-run-tokens",)),
    ConfigFlag("agent.context", ("--context",), commands=frozenset({"run", "fork"}), spelling=context_spelling,
               metavar="SPEC"),
    # [budget]: what a whole sweep may spend
    ConfigFlag("budget.max_cost", ("--max-cost",), commands=frozenset({"bench"})),
    ConfigFlag("budget.max_tokens_total", ("--max-tokens-total",), commands=frozenset({"bench"})),
    # [search]
    ConfigFlag("search.backend", ("--search",), commands=WORLD),
    ConfigFlag("search.corpus", ("--corpus",), commands=WORLD),
    ConfigFlag("search.retriever", ("--retriever",), commands=WORLD),
    # [sandbox]: a run's workspace is its run directory's
    ConfigFlag("sandbox.provider", ("--sandbox-provider",), commands=WORLD | {"demo", "doctor"}),
    ConfigFlag("sandbox.runtime", ("--sandbox-runtime",), commands=WORLD | {"demo", "doctor"}),
    ConfigFlag("sandbox.corpus", ("--sandbox-corpus",), commands=WORLD),
    ConfigFlag("sandbox.workspace_dir", ("--workspace", "-w"), commands=frozenset({"shell"})),
    ConfigFlag("sandbox.keep_workspace", ("--keep",), commands=frozenset({"shell"}), negatable=False),
    # [snapshot]
    ConfigFlag("snapshot.dir", ("--snapshot",), commands=WORLD),
    ConfigFlag("snapshot.mode", ("--snapshot-mode",), commands=WORLD),
    ConfigFlag("snapshot.manifest", ("--snapshot-manifest",), commands=(WORLD - {"fork"})),  # a fork: the parent's
    # [judge]: grading (judge; bench's model-free pass at the end)
    ConfigFlag("judge.preset", ("--judge-preset",), commands=frozenset({"judge", "bench"}), renamed=(
        # judge --method auto|llm|match (until 0.1.0): llm's prompt is now the preset that continues it
        Renamed("--method", frozenset({"judge"}), "0.3.0",
                {"auto": None, "llm": next(p.name for p in BUILTIN.values() if p.legacy == "llm"), "match": "match"}),
    )),
    # [benchmark]: dataset plugin options
    ConfigFlag("benchmark.gaia_text_only", ("--gaia-text-only",), commands=frozenset({"bench"})),
    ConfigFlag("benchmark.frames_closed", ("--frames-closed",), commands=frozenset({"bench"})),
)
"""Every config flag of the CLI, in ``--help`` order."""


@dataclass(frozen=True)
class SweepFlag:
    """One option of ``bench`` that sets a field of the sweep's
    :class:`~fte_shell.sweep.BenchConfig`: its type, default and help come from the field."""

    name: str
    """The BenchConfig field (and the command function's parameter)."""

    decls: tuple[str, ...]
    """Flag names, the long one first."""

    note: str = ""
    """Said after the field's help (how the flag spells the value, e.g. a comma list)."""

    @property
    def field(self) -> FieldInfo:
        from ..sweep.config import BenchConfig

        return BenchConfig.model_fields[self.name]

    @property
    def is_list(self) -> bool:
        """A list field, given as one comma-separated value."""
        return get_origin(self.field.annotation) is list

    @property
    def default(self) -> Any:
        """The field's default as the flag takes it (``...``: the flag is required)."""
        if self.field.is_required():
            return ...
        d = self.field.get_default(call_default_factory=True)
        return ",".join(d) if self.is_list else d

    def value(self, given: Any) -> Any:
        """The field's value from what the flag read."""
        return [p.strip() for p in given.split(",") if p.strip()] if self.is_list else given

    def option(self) -> Any:
        """The ``Annotated[type, typer.Option(...)]`` of the command parameter."""
        vt = str if self.is_list else self.field.annotation
        doc = " ".join((self.field.description or "").split()).replace("``", "`")
        return Annotated[vt, typer.Option(*self.decls, help=_SENTENCE.split(doc)[0] + self.note, rich_help_panel="Sweep")]


SWEEP_FLAGS: tuple[SweepFlag, ...] = (
    SweepFlag("out", ("--out", "-o")),
    SweepFlag("profiles", ("--profiles", "-p"), note=" Comma-separated."),
    SweepFlag("runs", ("--runs", "-k")),
    SweepFlag("contexts", ("--context",), note=" Comma-separated, e.g. keep_all,keep_recent:5,discard_all."),
    SweepFlag("retrievers", ("--retrievers",), note=" Comma-separated, e.g. bm25,dense:all-MiniLM-L6-v2."),
    SweepFlag("corpus_arm", ("--corpus-arm",)),
    SweepFlag("concurrency", ("--concurrency", "-j")),
    SweepFlag("split", ("--split",)),
    SweepFlag("limit", ("--limit",)),
    SweepFlag("sample", ("--sample",)),
    SweepFlag("seed", ("--seed",)),
    SweepFlag("corpus_dir", ("--corpus-dir",)),
    SweepFlag("endpoint_wait_s", ("--endpoint-wait",)),
    SweepFlag("allow_config_change", ("--allow-config-change",)),
    SweepFlag("retries", ("--retries",)),
    SweepFlag("fork_from", ("--fork-from",), note=" DATASET, --profiles and --runs are then the parent's."),
    SweepFlag("at_turn", ("--at-turn",)),
)
"""``bench``'s own options: the fields of the sweep's BenchConfig it takes, in ``--help`` order."""


def flags_for(command: str) -> tuple[ConfigFlag, ...]:
    """The rows of ``command`` (``run``, ``bench``, ``fork``, ``shell``, ``demo``, ``judge``, ``doctor`` or ``mcp``)."""
    if command not in COMMANDS:
        raise ValueError(f"no config flags for command {command!r}")
    return tuple(f for f in FLAGS if command in f.commands)


def flags_markdown() -> str:
    """The table as Markdown (docs/config.md): each flag, the config path it sets, the commands taking it."""
    rows = ["| Flag | Sets | Commands |", "|---|---|---|"]
    for f in FLAGS:
        names = ", ".join(f"`{d}`" for d in f.decls)
        if f.value_type is bool and f.negatable:
            names += f", `--no-{f.flag.removeprefix('--')}`"
        for r in f.renamed:
            names += f" (old: `{r.decl}` of {', '.join(sorted(r.commands))}, until {r.removed_in})"
        rows.append(f"| {names} | `{f.path}` | {', '.join(c for c in sorted(COMMANDS) if c in f.commands)} |")
    return "\n".join(rows) + "\n"


def overrides_of(flags: Iterable[ConfigFlag], values: dict[str, Any]) -> dict[str, Any]:
    """The nested settings of the flags that were given (``values``: parameter name → value; None = not
    given), for :func:`~fte_shell.config.load_config`'s ``overrides``."""
    out: dict[str, Any] = {}
    for f in flags:
        v = values.get(f.param)
        if v is None:
            continue
        *tables, key = f.keys
        node = out
        for t in tables:
            node = node.setdefault(t, {})
        node[key] = f.spelling(v) if f.spelling is not None else str(v) if isinstance(v, Path) else v
    return out


F = TypeVar("F", bound=Callable[..., Any])


def config_flags(command: str) -> Callable[[F], F]:
    """Decorator of a typer command function: adds the table's flags of ``command`` to its signature and
    passes the given ones as ``overrides`` (the function's parameter of that name, hidden from the CLI)."""
    flags = flags_for(command)
    old = [(f, r) for f in flags for r in f.renamed if command in r.commands]
    extra = [inspect.Parameter(f.param, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=f.option())
             for f in flags]
    extra += [inspect.Parameter(r.param, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=r.option(f.flag))
              for f, r in old]

    def collect(values: dict[str, Any]) -> dict[str, Any]:
        for f, r in old:  # the old spelling's value, unless the new one was given too
            values[f.param] = values[f.param] if values[f.param] is not None else values[r.param]
        return overrides_of(flags, values)

    return _adding(extra, "overrides", collect)


def sweep_flags(fn: F) -> F:
    """Decorator of ``bench``: adds :data:`SWEEP_FLAGS` to its signature and passes their values as
    ``sweep`` (keyword arguments of :class:`~fte_shell.sweep.BenchConfig`)."""
    extra = [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=f.option())
             for f in SWEEP_FLAGS]
    return _adding(extra, "sweep", lambda values: {f.name: f.value(values[f.name]) for f in SWEEP_FLAGS})(fn)


def _adding(extra: list[inspect.Parameter], name: str, collect: Callable[[dict[str, Any]], Any]) -> Callable[[F], F]:
    """Add ``extra`` to a command function's signature; the command gets ``collect(their values)`` as its
    parameter ``name`` (hidden from the CLI)."""

    def decorate(fn: F) -> F:
        sig = inspect.signature(fn, eval_str=True)
        if name not in sig.parameters:
            raise TypeError(f"{fn.__name__} takes no {name!r} parameter")
        own = [p for p in sig.parameters.values() if p.name != name]
        clash = {p.name for p in extra} & {p.name for p in own}
        if clash:
            raise TypeError(f"{fn.__name__}: parameters {sorted(clash)} clash with the option table")

        @functools.wraps(fn)
        def command_fn(*args: Any, **kwargs: Any) -> Any:
            values = {p.name: kwargs.pop(p.name, None) for p in extra}
            return fn(*args, **{name: collect(values)}, **kwargs)

        params = [*own, *extra]
        params.sort(key=lambda p: p.kind)  # the added keyword-only ones after the command's own
        command_fn.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
        command_fn.__annotations__ = {p.name: p.annotation for p in params} | {"return": sig.return_annotation}
        return command_fn  # type: ignore[return-value]

    return decorate

