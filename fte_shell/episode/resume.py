"""Resume a run stopped part-way, in place: a fork of the run at its last completed turn, into its own
directory (docs/bench.md "Resume semantics").

* :func:`read_stopped`: the stopped run read back (:class:`Stopped`) — its recorded replies, its context
  edits, the last completed turn K (a turn whose reply and every tool result are on disk) and whether the
  turn after it was cut (its reply on disk, not every tool result: it is redone from its reply, never by
  a new model call). :class:`CannotResume` names, in one line, why a run must be redone from scratch
  instead: another question or configuration, an older trajectory schema, a run recorded without a
  snapshot whose pages would be fetched again from the web, context edits without their strategy's
  state.
* :func:`stash`: the stopped run's trajectory, workspace and snapshot log moved to ``RUN_DIR/.resume``
  while its turns are replayed (a stop during the replay leaves them there: the next resume reads them
  again), removed once the replayed state was found equal.
* :class:`ResumePrefix`: the replies (and context edits) the agent's loop replays, and
  :meth:`ResumePrefix.check` of the state they leave (the compared events byte for byte, the workspace's
  files by sha256, the shell's working directory), which records the ``resume`` event and
  ``result.json``'s ``resumed`` — or raises :class:`ResumeMismatch` (the runner then redoes the run).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import RunConfig
from ..digest import canonical_config, config_changes, file_sha256
from ..errors import FteError
from ..model import Completion
from ..record.events import (
    SCHEMA_VERSION,
    ContextEditEvent,
    Event,
    FinalAnswerRequestEvent,
    ModelCallEvent,
    NudgeEvent,
    ResumeEvent,
    StartEvent,
    TextToolCallEvent,
    ToolCallEvent,
)
from ..record.rundir import JUDGEMENT, RESULT, TRAJECTORY, WORKSPACE, read_events, read_result
from ..stops import is_infra_failure
from .fork import SNAPSHOT_LOG, _differs, completion_of

if TYPE_CHECKING:
    from .fork import Child

STASH = ".resume"
"""``RUN_DIR/.resume``: the stopped run's record while its turns are replayed."""
STASHED = (WORKSPACE, SNAPSHOT_LOG, RESULT, TRAJECTORY)
"""What is moved into the stash, in this order (the trajectory last: its presence says the stash is whole)."""
CUT_MARKERS = ("(the tool call was interrupted)", "(the tool crashed: ")
"""Observations the episode records for a call that an interrupt or a crash cut: not a result."""
_COMPARED = (ModelCallEvent, ToolCallEvent, NudgeEvent, TextToolCallEvent)


class CannotResume(FteError):
    """A stopped run that cannot be continued: its one-line reason (the run is redone from scratch)."""


class ResumeMismatch(FteError):
    """The replayed state differs from the recorded one (the run is redone from scratch)."""


def stopped_here(run_dir: Path) -> bool:
    """Whether ``run_dir`` holds a run stopped part-way: a trajectory (or a stash) without a result, or with
    an infrastructure stop (``interrupted``, ``endpoint_unavailable`` …: not a result)."""
    run_dir = Path(run_dir)
    if not ((run_dir / TRAJECTORY).exists() or (run_dir / STASH / TRAJECTORY).exists()):
        return False
    result = read_result(run_dir)
    return result is None or is_infra_failure(result.get("stop_reason"))


def record_dir(run_dir: Path) -> Path:
    """Where a stopped run's record is read: its stash when an earlier resume stopped during its replay."""
    return run_dir / STASH if (run_dir / STASH / TRAJECTORY).exists() else run_dir


@dataclass
class Stopped:
    """A run stopped part-way, read back (never written)."""

    run_dir: Path
    events: list[Event]
    start: StartEvent
    turn: int
    """K: the turns to replay (the last one cut when :attr:`cut`)."""
    cut: bool
    """Turn K's reply is on disk but not every tool result: its calls are run again from the reply."""
    replies: list[Completion]
    edits: dict[int, ContextEditEvent]
    """The recorded context edits of turns 1..K, by turn."""
    count: int = 0
    """Resumes before this one."""
    redone: int = 0
    """Times the run was redone from scratch before (after a failed resume)."""
    history: list[int] = field(default_factory=list)
    """The turns earlier resumes went on from."""

    def compared(self) -> list[Event]:
        """The recorded events the replay must reproduce: replies, tool results (less a cut call's), nudges
        and salvaged text calls of turns 1..K."""
        return [e for e in self.events if isinstance(e, _COMPARED) and e.turn <= self.turn
                and not (isinstance(e, ToolCallEvent) and e.error and e.observation.startswith(CUT_MARKERS))]

    def fetched(self, upto: int) -> set[str]:
        """Workspace file names the tool calls of turns 1..``upto`` wrote or found."""
        names: set[str] = set()
        for e in self.compared():
            if isinstance(e, ToolCallEvent) and e.turn <= upto:
                paths = [f.path for f in e.meta.fetches or [] if f.ok] + [e.meta.path]
                names |= {p.rsplit("/", 1)[-1] for p in paths if p}
        return names

    def retrieval_times(self) -> dict[str, datetime]:
        """``{source: time}`` of the documents the replayed turns' fetches wrote, as their facts recorded it
        (what a replayed fetch stamps when the record has no workspace: :class:`~.fork.ParentTimes`)."""
        return {f.source: datetime.fromisoformat(f.retrieved_at) for e in self.compared()
                if isinstance(e, ToolCallEvent) for f in e.meta.fetches or [] if f.ok and f.source and f.retrieved_at}


def _expected_calls(turn: int, call: ModelCallEvent, events: list[Event]) -> int:
    """How many tool results the loop records for the reply of ``turn``."""
    text = next((e for e in events if isinstance(e, TextToolCallEvent) and e.turn == turn), None)
    if text is not None and text.executed and not call.message.get("tool_calls"):
        return len(text.calls)
    return len(call.message.get("tool_calls") or [])


def _turns(events: list[Event]) -> tuple[int, bool]:
    """(K, cut): the replayable turns and whether the last of them was cut."""
    calls = {e.turn: e for e in events if isinstance(e, ModelCallEvent)}
    final = min((e.turn for e in events if isinstance(e, FinalAnswerRequestEvent)), default=None)
    k = 0
    while k + 1 in calls and k + 1 != final:
        k += 1
    if k == 0:
        return 0, False
    done = [e for e in events if isinstance(e, ToolCallEvent) and e.turn == k]
    cut = any(e.error and e.observation.startswith(CUT_MARKERS) for e in done) or \
        len(done) < _expected_calls(k, calls[k], events)
    return k, cut


def closed_world(world: Any) -> bool:
    """Whether a run's world cannot reach the web: a closed local corpus (served here or by a sweep's cache
    actor) and a local search, or none."""
    pages, search = getattr(world, "page_source", None), getattr(world, "search", None)
    return bool(getattr(pages, "closed_world", False)) and (
        search is None or str(getattr(search, "name", "") or "").startswith("local"))


def read_stopped(run_dir: Path, question: str, config: RunConfig, *, closed: bool = False) -> Stopped | None:
    """The stopped run in ``run_dir`` to resume with ``question`` and ``config``; None when it has no
    recorded reply (nothing to replay: it starts over). ``closed``: its world cannot reach the web
    (:func:`closed_world`), so it needs no snapshot. Raises :class:`CannotResume` with the reason it
    must be redone from scratch."""
    run_dir = Path(run_dir)
    events = read_events(record_dir(run_dir))  # a torn last line (the kill) is dropped by the reader
    start = next((e for e in events if isinstance(e, StartEvent)), None)
    if start is None or not start.config:
        raise CannotResume(f"{run_dir}: the trajectory has no start event with the run's configuration")
    if start.schema_version != SCHEMA_VERSION:
        raise CannotResume(f"{run_dir}: written with trajectory schema {start.schema_version} (this version "
                           f"writes {SCHEMA_VERSION}): its turns cannot be replayed")
    if start.question != question:
        raise CannotResume(f"{run_dir}: the recorded question differs from this run's")
    if changes := config_changes(canonical_config(start.config), canonical_config(config)):
        raise CannotResume(f"{run_dir}: the configuration changed ({'; '.join(changes[:3])}"
                           f"{f' and {len(changes) - 3} more' if len(changes) > 3 else ''})")
    s = config.search
    if config.snapshot.dir is None and not closed and not (s.corpus is not None and not s.open_web
                                                          and s.backend != "serper"):
        raise CannotResume(f"{run_dir}: recorded without a snapshot, so replaying its turns would fetch its "
                           f"pages and searches again from the web; record runs with --snapshot DIR to resume them")
    k, cut = _turns(events)
    if k == 0:
        return None
    edits = {e.turn: e for e in events if isinstance(e, ContextEditEvent) and e.turn <= k}
    if config.agent.context.strategy != "keep_all" and any(e.state is None for e in edits.values()):
        raise CannotResume(f"{run_dir}: its context_edit events carry no strategy state (written before resume "
                           f"existed), so the context the model saw cannot be rebuilt")
    replies = [completion_of(e) for e in events if isinstance(e, ModelCallEvent) and e.turn <= k]
    last = next((e for e in reversed(events) if isinstance(e, ResumeEvent)), None)
    return Stopped(run_dir, events, start, k, cut, replies, edits, count=last.count if last else 0,
                   redone=last.redone if last else 0,
                   history=list((last.checks.get("history") or []) if last else []))


def redone_before(run_dir: Path) -> int:
    """How many times the run in ``run_dir`` was redone from scratch (its last ``resume`` event's count)."""
    last = next((e for e in reversed(read_events(record_dir(Path(run_dir)))) if isinstance(e, ResumeEvent)), None)
    return last.redone if last is not None else 0


def stash(run_dir: Path) -> Path:
    """Move the stopped run's record into ``RUN_DIR/.resume`` (idempotent: what an earlier stash holds stays,
    the newer copy in the run directory is dropped). Returns the stash."""
    st = run_dir / STASH
    st.mkdir(exist_ok=True)
    for name in STASHED:
        here, kept = run_dir / name, st / name
        if not (here.exists() or here.is_symlink()):
            continue
        if kept.exists():
            shutil.rmtree(here) if here.is_dir() and not here.is_symlink() else here.unlink()
        else:
            os.replace(here, kept)
    return st


def clear(run_dir: Path) -> None:
    """Remove a run's files from ``run_dir`` for a run redone from scratch (its stash included; nothing
    else a user may keep there)."""
    for name in (*STASHED, STASH, JUDGEMENT):
        p = Path(run_dir) / name
        shutil.rmtree(p, ignore_errors=True) if p.is_dir() and not p.is_symlink() else p.unlink(missing_ok=True)


@dataclass
class ResumePrefix:
    """The turns a resumed run replays, and the check of the state they leave."""

    stopped: Stopped
    replies: list[Completion]
    edits: dict[int, ContextEditEvent]

    @classmethod
    def of(cls, stopped: Stopped) -> ResumePrefix:
        return cls(stopped, stopped.replies, stopped.edits)

    def check(self, ep: Child) -> str | None:
        """Compare the state after the replayed turns with the record; write the ``resume`` event and
        ``resumed``; drop the stash when equal, else raise :class:`ResumeMismatch`."""
        s = self.stopped
        checks, bad = _compare(s, ep)
        checks["history"] = [*s.history, s.turn]
        ep.resumed = {"count": s.count + 1, "turns": checks["history"], "redone": s.redone,
                      "cut_turn": s.cut}  # type: ignore[attr-defined]
        ep.record(ResumeEvent(turn=s.turn, count=s.count + 1, equal=not bad, cut_turn=s.cut, checks=checks,
                              mismatches=bad, redone=s.redone))
        if bad:
            raise ResumeMismatch(f"{s.run_dir}: the replayed turns 1..{s.turn} differ from the record: "
                                 + "; ".join(bad[:3]) + (f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""))
        shutil.rmtree(s.run_dir / STASH, ignore_errors=True)
        return None


def _compare(s: Stopped, ep: Child) -> tuple[dict[str, Any], list[str]]:
    bad: list[str] = []
    if ep.system_prompt != s.start.system_prompt or ep.tools != s.start.tools:
        bad.append("the system prompt or the tool schemas differ")
    theirs = s.compared()
    mine = [e for e in read_events(ep.run_dir) if isinstance(e, _COMPARED)]
    for child, prior in zip(mine, theirs, strict=False):
        if (what := _differs(child, prior, "the recorded one")) is not None:
            bad.append(f"turn {prior.turn}: {what}")  # type: ignore[union-attr]
            break
    extra = mine[len(theirs):]
    if len(mine) < len(theirs) or any(e.turn != s.turn for e in extra):  # type: ignore[union-attr]
        bad.append(f"{len(mine)} replayed event(s) (replies, tool calls, nudges) where the record has {len(theirs)}")
    checks: dict[str, Any] = {"replies": len(s.replies), "observations": sum(isinstance(e, ToolCallEvent) for e in theirs),
                              "context_edits": len(s.edits)}
    old_ws, new_ws = s.run_dir / STASH / WORKSPACE, ep.workspace_dir
    theirs_ws, mine_ws = _files(old_ws), _files(new_ws)
    bad += [f"workspace file {n} differs from the recorded one (sha256)" for n, h in mine_ws.items()
            if theirs_ws.get(n) not in (None, h)]
    complete = s.turn - 1 if s.cut else s.turn
    bad += [f"workspace file {n}, written by turn {complete} or before, is missing" for n in
            sorted(s.fetched(complete) - set(mine_ws)) if n in theirs_ws]
    if not s.cut and old_ws.is_dir():  # no recorded workspace (a trajectory alone): the events are compared
        bad += [f"workspace file {n} is not in the recorded workspace" for n in mine_ws if n not in theirs_ws]
    checks["workspace"] = {"files": len(mine_ws), "recorded_files": len(theirs_ws) if old_ws.is_dir() else None}
    shell = getattr(ep.profile, "shell_state", None)
    bash = [e for e in theirs if isinstance(e, ToolCallEvent) and e.name == "bash"]
    want = getattr(bash[-1].meta, "cwd", None) if bash else "/work"
    if callable(shell) and isinstance(want, str):
        cwd = shell()["cwd"]
        checks["shell"] = {"cwd": cwd, "recorded_cwd": want}
        if cwd != want:
            bad.append(f"the shell's working directory is {cwd}, the record's was {want}")
    return checks, bad


def _files(ws: Path) -> dict[str, str]:
    """``{name: sha256}`` of a workspace's files (a killed write's hidden temporary files left out)."""
    return {p.name: file_sha256(p) for p in sorted(ws.iterdir()) if p.is_file() and not p.name.startswith(".")} \
        if ws.is_dir() else {}
