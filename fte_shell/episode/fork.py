"""Fork a run at turn K: a new run whose first K turns are its parent's, replayed without the model, then
continued live (by :class:`fte_shell.agent.Agent`, whose loop applies the :class:`ForkPrefix`).

* :class:`Parent`: a finished run directory read back — its result, trajectory, configuration, snapshot.
  A parent recorded without a snapshot is refused: its tool calls could not be re-executed against the
  pages it saw.
* :func:`child_config`: the parent's configuration (its start event; secrets come from the environment)
  with the caller's changes over it; the profile, the date in the system prompt and the snapshot are the
  parent's.
* :func:`open_fork` (``Episode.fork``): the child's episode, its world the parent's snapshot replayed
  strictly (``replay`` mode, the captures the parent's ``snapshot.jsonl`` names) while the prefix runs.
* :class:`ForkPrefix`: the parent's recorded replies of turns 1..K (as :class:`~fte_shell.model.Completion`)
  and :meth:`ForkPrefix.check`, run after they were applied: the replies, the tool calls and their
  observations byte for byte, the nudges, the workspace's files (sha256), and for the shell profile the
  working directory; it records a ``fork`` event, puts ``forked_from`` into ``result.json`` and switches
  the snapshot to the mode the rest of the run uses. The parent's directory is only read.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tomllib
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..config import SECRETS, RunConfig
from ..config.load import deep_merge, load_config
from ..config.search import recorded_retriever
from ..digest import file_sha256
from ..errors import ConfigError
from ..model import Completion
from ..model.completion import split_think
from ..record.events import (
    Event,
    FinalAnswerRequestEvent,
    ForkEvent,
    ModelCallEvent,
    NudgeEvent,
    StartEvent,
    TextToolCallEvent,
    ToolCallEvent,
)
from ..record.rundir import read_events, read_result
from ..workspace import Document, filename_for, parse_document
from ..world import World

if TYPE_CHECKING:
    from ..model import Model, ServerInfo
    from ..record.events import KnownEvent
    from ..record.rundir import EventListener
    from ..world import RunWorld

SNAPSHOT_LOG = "snapshot.jsonl"
MASKED = "**********"
HOW_TO_RECORD = ("record the parent with a snapshot: `fte-shell run \"…\" --snapshot DIR` (mode record, the "
                 "default) or `fte-shell bench … --snapshot DIR`")
_DATE = re.compile(r"Current date: (\d{4}-\d{2}-\d{2})")
_COMPARED = (ModelCallEvent, ToolCallEvent, NudgeEvent, TextToolCallEvent)


class Child(Protocol):
    """What the check reads and writes of the fork's :class:`~fte_shell.episode.Episode` (this module is
    imported by it, so it names the episode by what it uses)."""

    system_prompt: str
    tools: list[dict[str, Any]]
    profile: Any
    forked_from: dict[str, Any] | None
    meta: dict[str, Any]
    world: RunWorld

    @property
    def run_dir(self) -> Path: ...

    @property
    def workspace_dir(self) -> Path: ...

    def record(self, event: KnownEvent) -> None: ...


@dataclass
class Parent:
    """A finished run directory, read (never written)."""

    run_dir: Path
    result: dict[str, Any]
    events: list[Event]
    start: StartEvent
    snapshot: dict[str, Any]
    """``result.json``'s ``meta.snapshot``: ``dir`` (absolute), ``mode``, ``on_miss``."""

    @classmethod
    def read(cls, run_dir: Path) -> Parent:
        """Raises :class:`ConfigError` for a directory that is not a finished run, or a run without a
        snapshot (the message says how to record one)."""
        run_dir = Path(run_dir)
        result = read_result(run_dir)
        if result is None:
            raise ConfigError(f"{run_dir} is not a finished run (no result.json): fork a run that ended")
        events = read_events(run_dir)
        start = next((e for e in events if isinstance(e, StartEvent)), None)
        if start is None or not start.config:
            raise ConfigError(f"{run_dir}: the trajectory has no start event with the run's configuration")
        snap = (result.get("meta") or {}).get("snapshot")
        if not isinstance(snap, dict) or not snap.get("dir"):
            raise ConfigError(f"{run_dir} was run without a snapshot, so its tool calls cannot be re-executed "
                              f"against the pages and searches it saw; {HOW_TO_RECORD}")
        return cls(run_dir, result, events, start, snap)

    @property
    def run_id(self) -> str | None:
        return self.result.get("run_id") or self.start.run_id

    def turn_events(self, k: int) -> list[Event]:
        return [e for e in self.events if isinstance(e, _COMPARED) and e.turn <= k]

    def replayable(self) -> int:
        """How many leading turns have a recorded reply to replay (the parent's turns, less a last turn
        whose model call failed and the final-answer request)."""
        calls = {e.turn: e for e in self.events if isinstance(e, ModelCallEvent)}
        final = min((e.turn for e in self.events if isinstance(e, FinalAnswerRequestEvent)), default=None)
        n = 0
        while n + 1 in calls and n + 1 != final:
            n += 1
        return n

    def replies(self, k: int) -> list[Completion]:
        """The recorded replies of turns 1..``k``; :class:`ConfigError` when the parent has fewer."""
        if k < 0:
            raise ConfigError(f"--at-turn must be >= 0 (got {k})")
        turns = int(self.result.get("turns") or 0)
        if k > turns:
            raise ConfigError(f"{self.run_dir} ran {turns} turn(s): fork it at a turn <= {turns}")
        if k > (n := self.replayable()):
            raise ConfigError(f"{self.run_dir}: turn {n + 1} has no reply to replay (its model call failed, or it "
                              f"was the final-answer request): fork it at a turn <= {n}")
        calls = [e for e in self.events if isinstance(e, ModelCallEvent) and e.turn <= k]
        return [completion_of(e) for e in calls]

    def workspace(self) -> dict[str, str]:
        """``{file name: sha256}`` of the parent's workspace (as it ended: files are written once)."""
        ws = self.run_dir / "workspace"
        return {p.name: file_sha256(p) for p in sorted(ws.iterdir()) if p.is_file()} if ws.is_dir() else {}

    def fetched_by(self, k: int) -> set[str]:
        """Workspace file names the parent's calls of turns 1..``k`` wrote or found (their fetch facts)."""
        names: set[str] = set()
        for e in self.events:
            if isinstance(e, ToolCallEvent) and e.turn <= k:
                paths = [f.path for f in e.meta.fetches or [] if f.ok] + [e.meta.path]
                names |= {p.rsplit("/", 1)[-1] for p in paths if p}
        return names

    def cwd_at(self, k: int) -> str | None:
        """The shell's working directory after the parent's last ``bash`` call of turns 1..``k`` (``/work``
        before any; None when the parent did not record it)."""
        bash = [e for e in self.events if isinstance(e, ToolCallEvent) and e.turn <= k and e.name == "bash"]
        if not bash:
            return "/work"
        cwd = getattr(bash[-1].meta, "cwd", None)
        return cwd if isinstance(cwd, str) else None


def completion_of(ev: ModelCallEvent) -> Completion:
    """The :class:`Completion` a recorded ``model_call`` event was made from (inline ``<think>`` reasoning
    is told apart from a reasoning field the way the client does)."""
    fields = ev.reasoning_fields or []
    inline = ev.reasoning is not None and not fields and split_think(ev.message.get("content"))[0] == ev.reasoning
    return Completion(message=ev.message, usage={k: v for k, v in ev.usage.items() if isinstance(v, int)},
                      usage_details=ev.usage_details or {}, latency_s=ev.latency_s or 0.0,
                      finish_reason=ev.finish_reason, reasoning=ev.reasoning, reasoning_fields=fields,
                      reasoning_inline=inline, attempts=ev.attempts or 1, params=ev.request or {},
                      response=ev.response or {})


def _unmasked(data: Any) -> Any:
    """The recorded configuration without its masked secrets."""
    if isinstance(data, dict):
        return {k: _unmasked(v) for k, v in data.items() if v != MASKED}
    return data


def config_over(recorded: dict[str, Any], overrides: dict[str, Any] | None = None, config_file: Path | None = None,
                environ: dict[str, str] | None = None) -> RunConfig:
    """A recorded configuration (a start event's or a sweep's, secrets masked) < ``config_file`` < the
    secrets of the environment (:data:`~fte_shell.config.SECRETS`: ``OPENAI_API_KEY`` …; never recorded)
    < ``overrides``."""
    data = recorded_retriever(_unmasked(recorded))  # recorded before [search] retriever: bm25s ranked it
    if config_file is not None:
        try:
            data = deep_merge(data, tomllib.loads(Path(config_file).read_text()))
        except (OSError, tomllib.TOMLDecodeError) as e:
            raise ConfigError(f"config file {config_file}: {e}") from e
    env = os.environ if environ is None else environ
    keys = {s.env: env[s.env] for s in SECRETS if env.get(s.env)}
    return load_config(None, deep_merge(data, overrides or {}), environ=keys)


def child_config(parent: Parent, overrides: dict[str, Any] | None = None, config_file: Path | None = None,
                 environ: dict[str, str] | None = None) -> RunConfig:
    """The child's configuration: the parent's (its start event) under :func:`config_over`. The profile
    stays the parent's; the date in the system prompt is the parent's unless given; the snapshot is the
    parent's store, in the parent's mode unless given, serving the captures the parent's ``snapshot.jsonl``
    names."""
    over = deep_merge({}, overrides or {})
    profile = (over.get("agent") or {}).get("profile")
    if profile not in (None, parent.start.profile):
        raise ConfigError(f"a fork keeps its parent's profile ({parent.start.profile}), not {profile}")
    over["snapshot"] = {"dir": str(parent.snapshot["dir"]), "mode": parent.snapshot.get("mode") or "record",
                        **(over.get("snapshot") or {}), "manifest": str(parent.run_dir / SNAPSHOT_LOG)}
    return _dated(config_over(parent.start.config, over, config_file, environ), parent)


def _dated(cfg: RunConfig, parent: Parent) -> RunConfig:
    """``cfg`` with the date of the parent's system prompt when it names none (else a fork made on
    another day would see another prompt)."""
    date = _DATE.search(parent.start.system_prompt or "")
    if date and cfg.agent.current_date is None:
        cfg.agent.current_date = date.group(1)  # type: ignore[assignment]
    return cfg


@dataclass
class ForkPrefix:
    """The turns a fork replays, and the check of the state they leave."""

    parent: Parent
    turn: int
    """K: the turns replayed."""
    replies: list[Completion]
    """The parent's recorded replies of turns 1..K."""
    mode: str
    """The snapshot mode of the rest of the run (the prefix is replayed strictly)."""
    report: dict[str, Any] = field(default_factory=dict)

    def check(self, ep: Child) -> str | None:
        """Compare the child's state after the replayed turns with the parent's, record the ``fork`` event
        and ``forked_from``, and switch the snapshot to :attr:`mode`. Returns the mismatches in one line
        (the run must stop) or None."""
        checks, bad = _compare(self.parent, self.turn, ep)
        shell = checks.get("shell", {})
        ep.forked_from = {**(ep.forked_from or {}), "equal": not bad, "observations": checks["observations"],
                          "workspace_files": checks["workspace"]["files"],
                          **({"cwd": shell["cwd"], "env_sha256": shell["env_sha256"]} if shell else {})}
        ep.record(ForkEvent(turn=self.turn, parent=str(self.parent.run_dir), parent_run=self.parent.run_id,
                            equal=not bad, checks=checks, mismatches=bad))
        view = ep.world.snapshot
        if view is not None:
            view.snapshot.mode = self.mode  # type: ignore[assignment]  # the prefix was replayed strictly
            ep.meta["snapshot"] = {**ep.meta.get("snapshot", {}), "mode": self.mode, "replayed": self.mode == "replay"}
        if not bad:
            return None
        return (f"the fork's first {self.turn} turn(s) differ from its parent's {self.parent.run_dir}: "
                + "; ".join(bad[:5]) + (f" (and {len(bad) - 5} more)" if len(bad) > 5 else ""))


def _compare(parent: Parent, k: int, ep: Child) -> tuple[dict[str, Any], list[str]]:
    """What was compared (``checks``) and one line per difference."""
    bad: list[str] = []
    if ep.system_prompt != parent.start.system_prompt or ep.tools != parent.start.tools:
        bad.append("the system prompt or the tool schemas differ")
    theirs, mine = parent.turn_events(k), [e for e in read_events(ep.run_dir) if isinstance(e, _COMPARED)]
    for child, prior in zip(mine, theirs, strict=False):
        if (what := _differs(child, prior)) is not None:
            bad.append(f"turn {prior.turn}: {what}")  # type: ignore[union-attr]
            break
    if len(mine) != len(theirs) and not bad:
        bad.append(f"{len(mine)} replayed event(s) (replies, tool calls, nudges) where the parent has {len(theirs)}")
    checks: dict[str, Any] = {"events": len(theirs), "replies": sum(isinstance(e, ModelCallEvent) for e in theirs),
                              "observations": sum(isinstance(e, ToolCallEvent) for e in theirs)}
    ws, ws_bad = _workspace(parent, k, ep.workspace_dir)
    checks["workspace"], bad = ws, bad + ws_bad
    shell = getattr(ep.profile, "shell_state", None)
    if callable(shell):
        state = shell()
        env = "\n".join(f"{n}={v}" for n, v in sorted(state["env"].items()))
        want = parent.cwd_at(k)
        checks["shell"] = {"cwd": state["cwd"], "parent_cwd": want, "env_sha256": hashlib.sha256(env.encode()).hexdigest(),
                           "env": state["env"]}
        if want is not None and state["cwd"] != want:
            bad.append(f"the shell's working directory is {state['cwd']}, the parent's was {want}")
    return checks, bad


def _differs(child: Event, parent: Event, whose: str = "the parent's") -> str | None:
    """How a replayed event differs from the parent's (None: the same); ``whose`` names the record compared
    with in the line (a resumed run's: ``the recorded one``)."""
    if type(child) is not type(parent) or child.turn != parent.turn:  # type: ignore[union-attr]
        return f"a {child.type} event where {whose} is a {parent.type}"
    if isinstance(child, ToolCallEvent) and isinstance(parent, ToolCallEvent):
        if (child.name, child.raw_arguments) != (parent.name, parent.raw_arguments):
            return f"tool call {child.name} differs from {whose} ({parent.name})"
        if child.observation != parent.observation or child.error != parent.error:
            return f"the observation of {child.name} ({child.id}) differs from {whose}"
    if isinstance(child, ModelCallEvent) and isinstance(parent, ModelCallEvent) and child.message != parent.message:
        return "the replayed reply differs"
    if isinstance(child, NudgeEvent) and isinstance(parent, NudgeEvent) and child.message != parent.message:
        return "the nudge differs"
    return None


def _workspace(parent: Parent, k: int, ws: Path) -> tuple[dict[str, Any], list[str]]:
    theirs = parent.workspace()
    mine = {p.name: file_sha256(p) for p in sorted(ws.iterdir()) if p.is_file()} if ws.is_dir() else {}
    bad = [f"workspace file {n} differs from the parent's (sha256)" for n, h in mine.items() if theirs.get(n) not in (None, h)]
    bad += [f"workspace file {n} is not in the parent's workspace" for n in mine if n not in theirs]
    bad += [f"workspace file {n}, which the parent had by turn {k}, is missing" for n in sorted(parent.fetched_by(k) - set(mine))
            if n in theirs]
    return {"files": len(mine), "sha256": mine}, bad


class ParentTimes:
    """A local corpus (a :class:`~fte_shell.fetch.PageSource`) whose documents carry the retrieval time of
    the parent's workspace file of the same name: a corpus document is stamped when it is materialized, and
    a corpus is not in the snapshot, so without the parent's stamp the fork's file would differ in its
    ``Retrieved:`` line alone. A document without such a file takes the time its fetch recorded
    (``times``: source -> the fetch facts' ``retrieved_at``; a record that is a trajectory alone, as a lost
    Ray node's checkpoint is). Documents the parent never held keep their own time."""

    def __init__(self, inner: Any, parent_workspace: Path, times: dict[str, datetime] | None = None):
        self.inner, self.workspace, self.times = inner, parent_workspace, times or {}
        self.closed_world = bool(getattr(inner, "closed_world", False))

    def lookup(self, ref: str) -> Document | None:
        doc = self.inner.lookup(ref)
        if doc is None:
            return None
        try:
            held = parse_document((self.workspace / filename_for(doc.source, doc.kind)).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            when = self.times.get(doc.source)
            return doc if when is None else doc.model_copy(update={"retrieved_at": when})
        return doc.model_copy(update={"retrieved_at": held.retrieved_at}) if held.source == doc.source else doc


def open_fork(cls: Any, parent_dir: Path, at_turn: int, out_dir: Path, *, config: RunConfig | None = None,
              overrides: dict[str, Any] | None = None, run_id: str | None = None, meta: dict[str, Any] | None = None,
              log: EventListener | None = None, server: ServerInfo | None = None, model: Model | None = None) -> Any:
    """The child episode (of class ``cls``) of the run in ``parent_dir`` at turn ``at_turn``: ``Episode.fork``."""
    parent = Parent.read(parent_dir)
    replies = parent.replies(at_turn)
    if Path(out_dir).resolve() == parent.run_dir.resolve():
        raise ConfigError("the fork's directory is its parent's: a parent is never written, give another --out")
    if config is None:
        cfg = child_config(parent, overrides)
    else:  # a caller's whole configuration (a sweep's): the snapshot is still the parent's
        cfg = _dated(config.model_copy(deep=True), parent)
        cfg.snapshot.dir, cfg.snapshot.manifest = Path(parent.snapshot["dir"]), parent.run_dir / SNAPSHOT_LOG
    strict = cfg.model_copy(deep=True)
    strict.snapshot.mode, strict.snapshot.on_miss = "replay", "refuse"
    with contextlib.ExitStack() as stack:
        world = stack.enter_context(World.from_config(strict))
        if world.page_source is not None:
            world.page_source = ParentTimes(world.page_source, parent.run_dir / "workspace")
        kept = {k: v for k, v in (parent.result.get("meta") or {}).items() if k not in ("snapshot", "fork_at_turn")}
        ep = cls.open(cfg, parent.start.question, Path(out_dir), world=world, run_id=run_id, log=log, server=server,
                      model=model, meta={**kept, **(meta or {})})  # the parent's qid, rep, dataset…
        owned, ep._owned = ep._owned, stack.pop_all()
        if owned is not None:
            ep._owned.enter_context(owned)  # closed before the world, as Episode.open does
    ep.prefix = ForkPrefix(parent, at_turn, replies, cfg.snapshot.mode)
    ep.forked_from = {"run": parent.run_id, "run_dir": str(parent.run_dir.resolve()), "turn": at_turn}
    return ep



def describe(forked_from: dict[str, Any]) -> str:
    """One line for a person: the parent, the turn, and whether the replayed state matched."""
    how = {True: "its state equals the parent's", False: "its state DIFFERS from the parent's"}.get(
        forked_from.get("equal"), "not checked")
    return (f"forked from {forked_from.get('run_dir')} at turn {forked_from.get('turn')}: {how} "
            f"({forked_from.get('observations', 0)} observation(s), {forked_from.get('workspace_files', 0)} "
            f"workspace file(s){', cwd ' + str(forked_from['cwd']) if 'cwd' in forked_from else ''})")
