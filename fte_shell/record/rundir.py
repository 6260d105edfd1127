"""THE run directory: its one writer (:class:`RunWriter`) and its readers (format: docs/ARCHITECTURE.md,
"Run directory").

::

    RUN_DIR/
      trajectory.jsonl   one JSON event a line, flushed after every event (fsync'd at the end)
      result.json        written last, atomically: its presence means the run finished
      workspace/         the question's cache (the fetch pipeline writes it; the writer only makes the dir)
      judgement.json     after ``fte-shell judge``: every judge's verdict side by side (see below)

``result.json`` is written only by :func:`write_result` (the loop's result, through
:meth:`RunWriter.write_result`) and amended only by :func:`update_result` (the sweep: an infrastructure
stop named by an exception, the driver's ``config_digest`` of a remote run). Every event has ``type``
and ``t`` (seconds since the writer was opened); the typed models and the conversion of old runs are in
:mod:`.events`.

``judgement.json`` is one JSON object: each judge's verdict under its key (:func:`judge_key`: the preset
alone for a model-free judge, ``match`` or ``gaia``; ``preset@model`` for a grading model,
``llm-equivalence@gpt-4.1``), ``primary`` naming the verdict a run is counted by when there are several, and a
benchmark's own entries (WideSearch's ``widesearch``: not verdicts, left as they are). A verdict is an
object with ``method`` (``llm``/``match``/``rule``) and a boolean ``correct``. Files written before
presets hold ``llm`` (the grading model's verdict) and ``match``: they read as ``llm@MODEL`` and
``match``; the preset that took over the old prompt replaces ``llm@MODEL`` with its own key when it
grades the run (``fte_shell.benchmarks.presets.Preset.legacy``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, Self

from ..errors import ConfigError
from .events import EVENT_TYPES, SCHEMA_VERSION, ErrorEvent, Event, KnownEvent, typed_events
from .jsonio import (
    naming_full_disk,
    raise_if_full,
    read_json,
    read_jsonl_lenient,
    write_json_atomic,
)

TRAJECTORY = "trajectory.jsonl"
RESULT = "result.json"
WORKSPACE = "workspace"
JUDGEMENT = "judgement.json"

EventListener = Callable[[dict[str, Any]], None]


def write_result(run_dir: Path, result: dict[str, Any]) -> None:
    """Write ``RUN_DIR/result.json`` atomically: THE writer of that file."""
    write_json_atomic(Path(run_dir) / RESULT, result)


def read_result(run_dir: Path) -> dict[str, Any] | None:
    """``RUN_DIR/result.json``, or None when there is none (or it is unreadable)."""
    return read_json(Path(run_dir) / RESULT)


def update_result(run_dir: Path, changes: dict[str, Any], *, default: dict[str, Any] | None = None) -> dict[str, Any]:
    """Merge ``changes`` into ``result.json`` (or into ``default`` when the run wrote none) and write it
    back atomically. Returns the record written."""
    old = read_result(run_dir)
    rec = {**(old if old is not None else (default or {})), **changes}
    Path(run_dir).mkdir(parents=True, exist_ok=True)
    write_result(run_dir, rec)
    return rec


def read_events(run_dir: Path) -> list[Event]:
    """The typed events of ``trajectory.jsonl``, THE reader of that file (an old run's converted on read:
    :func:`fte_shell.record.events.convert`; a torn or non-JSON line, e.g. from a killed run, is skipped;
    [] when there is none). :func:`fte_shell.record.events.event_dict` gives an event back as written."""
    return typed_events(read_jsonl_lenient(Path(run_dir) / TRAJECTORY))


def read_judgement(run_dir: Path) -> dict[str, Any] | None:
    """``RUN_DIR/judgement.json``, or None."""
    return read_json(Path(run_dir) / JUDGEMENT)


def write_judgement(run_dir: Path, judgement: dict[str, Any]) -> None:
    """Write ``RUN_DIR/judgement.json`` atomically."""
    write_json_atomic(Path(run_dir) / JUDGEMENT, judgement)


PRIMARY = "primary"
LEGACY_LLM = "llm"
VERDICT_METHODS = ("llm", "match", "rule")


def judge_key(preset: str, model: str | None) -> str:
    """The key of a judge's verdicts in ``judgement.json``: ``preset`` (model-free) or ``preset@model``."""
    return f"{preset}@{model}" if model else preset


def _is_verdict(key: str, entry: Any) -> bool:
    """A verdict: ``method`` and a boolean ``correct`` (the legacy ``llm``/``match`` entries: ``correct``)."""
    return isinstance(entry, dict) and isinstance(entry.get("correct"), bool) and (
        entry.get("method") in VERDICT_METHODS or key in (LEGACY_LLM, "match"))


def is_model_verdict(key: str, entry: dict[str, Any]) -> bool:
    """Whether a kept verdict is a grading model's (its key names a model)."""
    return "@" in key or entry.get("method") == "llm"


def verdicts(judgement: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Every verdict of a ``judgement.json`` by judge key (a legacy ``llm`` entry under ``llm@MODEL``; an
    entry under its own key wins)."""
    data = judgement or {}
    out = {k: v for k, v in data.items() if k not in (PRIMARY, LEGACY_LLM) and _is_verdict(k, v)}
    legacy = data.get(LEGACY_LLM)
    if _is_verdict(LEGACY_LLM, legacy):
        out.setdefault(judge_key(LEGACY_LLM, legacy.get("judge_model") or "unknown"), legacy)
    return out


def primary_key(judgement: dict[str, Any] | None) -> str | None:
    """The key of the verdict a run is counted by: ``primary`` when it names a kept verdict, else the
    first verdict of a grading model, else the first model-free one (None without verdicts)."""
    vs = verdicts(judgement)
    named = (judgement or {}).get(PRIMARY)
    if isinstance(named, str) and named in vs:
        return named
    return next((k for k, v in vs.items() if is_model_verdict(k, v)), next(iter(vs), None))


def primary_verdict(judgement: dict[str, Any] | None) -> dict[str, Any] | None:
    """The verdict a run is counted by (:func:`primary_key`), or None."""
    key = primary_key(judgement)
    return None if key is None else verdicts(judgement)[key]


def made_primary(judgement: dict[str, Any], key: str) -> dict[str, Any]:
    """``judgement`` with the verdict ``key`` primary — unless it is model-free and a grading model's
    verdict is primary now (a model-free pass, such as ``bench``'s at the end of a sweep, never displaces
    a model's verdict). ``primary`` is written only when there are several verdicts."""
    data = dict(judgement)
    vs = verdicts(data)
    current = primary_key(data)
    if current not in (None, key) and not is_model_verdict(key, vs[key]) and is_model_verdict(current, vs[current]):
        key = current
    if len(vs) > 1:
        data[PRIMARY] = key
    else:
        data.pop(PRIMARY, None)
    return data


def with_verdict(judgement: dict[str, Any] | None, key: str, verdict: dict[str, Any], *,
                 replaces: str | None = None) -> dict[str, Any]:
    """``judgement`` with ``verdict`` kept under ``key`` beside the others (a legacy ``llm`` entry moved
    to ``llm@MODEL``; the entry ``replaces`` names, if any, removed) and made primary as
    :func:`made_primary` says."""
    data = {k: v for k, v in (judgement or {}).items() if k != LEGACY_LLM}
    for k, v in verdicts(judgement).items():
        data.setdefault(k, v)
    if replaces is not None and replaces != key:
        data.pop(replaces, None)
    data[key] = verdict
    return made_primary(data, key)


def remove_judgement(run_dir: Path) -> None:
    """Delete ``RUN_DIR/judgement.json`` (a run that is not a result keeps no verdict)."""
    (Path(run_dir) / JUDGEMENT).unlink(missing_ok=True)


def is_run_dir(path: Path) -> bool:
    """True when ``path`` looks like one run directory (it has a trajectory or a result)."""
    return (Path(path) / TRAJECTORY).exists() or (Path(path) / RESULT).exists()


def last_error(run_dir: Path) -> str | None:
    """The message of the last ``error`` event of a run's trajectory (why it ended), if any."""
    return next((ev.message for ev in reversed(read_events(run_dir)) if isinstance(ev, ErrorEvent)), None)


def workspace_files(run_dir: Path) -> dict[str, int]:
    """``{file name: body chars}`` of ``RUN_DIR/workspace`` (body = after the first blank line)."""
    ws = Path(run_dir) / WORKSPACE
    out: dict[str, int] = {}
    if not ws.is_dir():
        return out
    for p in sorted(ws.iterdir()):
        if p.is_file() and p.suffix == ".txt" and not p.name.startswith("."):
            text = p.read_text(encoding="utf-8", errors="replace")
            _header, sep, body = text.partition("\n\n")
            out[p.name] = len(body) if sep else len(text)
    return out


ARM_SEP = "@"
"""Between the profile and the arm's retriever or context strategy in an arm's name (``fte@keep_recent-5``)."""

RETRIEVER_SEP = "+"
"""Between the retriever and the context strategy in an arm's name (``fte@dense-e5+discard_all``)."""


def retriever_dir(spec: str) -> str:
    """A retriever spec as one directory-name component: ``:`` written ``-`` (as a context strategy's),
    ``/`` written ``~``, any other character outside ``[A-Za-z0-9._~-]`` written ``_``
    (``dense:openai:Qwen/Qwen3-Embedding-0.6B`` -> ``dense-openai-Qwen~Qwen3-Embedding-0.6B``)."""
    return re.sub(r"[^A-Za-z0-9._~-]", "_", spec.strip().replace(":", "-").replace("/", "~"))


CORPUS_ARM = "+corpus"
"""Ends the name of an arm whose box mounts the sweep's local corpus at ``/corpus`` (``bench --corpus-arm``:
``shell+corpus``, ``shell@bm25+corpus``, ``shell@bm25+discard_all+corpus``)."""


def arm_name(profile: str, context: str = "keep_all", retriever: str | None = None, corpus: bool = False) -> str:
    """The name of a sweep's arm (profile × retriever × context strategy) and of its directory under
    ``runs/``. Without a retriever axis: the profile alone for ``keep_all`` (every sweep before the context
    axis), else ``profile@strategy`` with the strategy's command-line spelling, ``:`` written ``-``
    (``fte@keep_recent-5``, ``shell@discard_all``). With one (``bench --retrievers``):
    ``profile@retriever`` (:func:`retriever_dir`), ``profile@retriever+strategy`` for a strategy other than
    keep_all (``fte@bm25+discard_all``). ``corpus``: the box mounts the sweep's corpus (:data:`CORPUS_ARM`
    appended: ``shell@bm25+corpus``)."""
    strategy, end = context.replace(":", "-"), CORPUS_ARM if corpus else ""
    if retriever is None:
        return (profile if context == "keep_all" else f"{profile}{ARM_SEP}{strategy}") + end
    arm = f"{profile}{ARM_SEP}{retriever_dir(retriever)}"
    return (arm if context == "keep_all" else f"{arm}{RETRIEVER_SEP}{strategy}") + end


def arm_profile(name: str) -> str:
    """The profile of an arm's name (:func:`arm_name`)."""
    return name.partition(ARM_SEP)[0].removesuffix(CORPUS_ARM)


def find_runs(root: Path) -> list[tuple[Path, str | None, str | None, int]]:
    """Run directories under ``root``: a sweep (``runs/<arm>/<qid>/r<k>/``, the arm a profile or
    ``profile@strategy``: :func:`arm_name`), one run directory, or a directory of run directories (``fork -n
    N``'s ``c1`` … ``cN``: rep k-1 for ``ck``). Returns (dir, profile, qid, rep)."""
    root = Path(root)
    if is_run_dir(root):
        return [(root, None, None, 0)]
    base = root / "runs" if (root / "runs").is_dir() else root
    out = []
    for d in sorted(base.glob("*/*/r*")):
        m = re.fullmatch(r"r(\d+)", d.name)
        if m and d.is_dir():
            out.append((d, arm_profile(d.parent.parent.name), d.parent.name, int(m.group(1))))
    if not out and root.is_dir():
        kids = [d for d in root.iterdir() if d.is_dir() and is_run_dir(d)]
        num = {d: int(m.group(1)) if (m := re.fullmatch(r"c(\d+)", d.name)) else 0 for d in kids}
        out = [(d, None, None, max(num[d] - 1, 0)) for d in sorted(kids, key=lambda d: (num[d], d.name))]
    return out


def runs_under(root: Path) -> list[tuple[Path, str | None, str | None, int]]:
    """:func:`find_runs` of a path the user gave (``judge``, ``report``, ``export``): :class:`ConfigError`
    when it does not exist, or when it is neither a run directory nor holds any (a typo'd or empty sweep)."""
    root = Path(root)
    if not root.exists():
        raise ConfigError(f"{root}: no such file or directory")
    found = find_runs(root)
    if not found:
        raise ConfigError(f"{root}: neither a run directory nor a sweep directory with runs")
    return found


class RunWriter:
    """Appends typed trajectory events (:meth:`write`) and writes ``result.json`` for one run.

    Opening a writer on a directory that holds an earlier, unfinished or finished run starts it over:
    the old trajectory and result are replaced (the workspace is left as it is)."""

    def __init__(self, run_dir: Path, *, listener: EventListener | None = None):
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.workspace_dir.mkdir(exist_ok=True)
        (self.run_dir / RESULT).unlink(missing_ok=True)
        self._f: IO[str] | None = open(self.run_dir / TRAJECTORY, "w", encoding="utf-8")  # noqa: SIM115 - held until close()
        self._t0 = time.monotonic()
        self._lock = threading.Lock()
        self._listener = listener

    @property
    def workspace_dir(self) -> Path:
        return self.run_dir / WORKSPACE

    def elapsed(self) -> float:
        """Seconds since the writer was opened."""
        return time.monotonic() - self._t0

    def write(self, event: KnownEvent) -> dict[str, Any]:
        """Append one typed event (a model of :mod:`fte_shell.record.events`) and flush it to the file:
        ``type``, ``t`` (set here), ``schema_version`` for the start event, then the fields the caller set
        (values a model does not type, such as a tool's ``meta``, are JSON-encoded with ``str`` as the
        fallback). Returns the JSON object written (what the listener gets). Raises TypeError for an
        event type without a model of its own."""
        if EVENT_TYPES.get(getattr(event, "type", "")) is not type(event):
            raise TypeError(f"{type(event).__name__} is not an event model of fte_shell.record.events")
        head: dict[str, Any] = {"type": event.type, "t": round(self.elapsed(), 4)}
        if event.type == "start":
            head["schema_version"] = SCHEMA_VERSION
        ev = {**head, **event.model_dump(exclude_unset=True, exclude={"type", "t", "schema_version"})}
        line = json.dumps(ev, ensure_ascii=False, default=str)
        with self._lock:
            if self._f is None:
                raise ValueError(f"run writer for {self.run_dir} is closed")
            try:  # not naming_full_disk: a plain try keeps the per-event path free of calls until it fails
                self._f.write(line + "\n")
                self._f.flush()
                if event.type == "end":
                    os.fsync(self._f.fileno())
            except OSError as e:
                raise_if_full(e, self.run_dir / TRAJECTORY)  # a full disk ends the run ``disk_full``
                raise
        if self._listener is not None:
            with contextlib.suppress(Exception):  # a display problem never stops a run (the event is on disk)
                self._listener(ev)
        return ev

    def write_result(self, result: dict[str, Any]) -> None:
        """Write ``result.json`` atomically (call last)."""
        write_result(self.run_dir, result)

    def close(self) -> None:
        """Flush, fsync and close the trajectory file (idempotent)."""
        with self._lock:
            f, self._f = self._f, None
            if f is not None:
                try:
                    with naming_full_disk(self.run_dir / TRAJECTORY):
                        f.flush()
                        os.fsync(f.fileno())
                finally:
                    with contextlib.suppress(OSError):  # a full disk: the write that failed said so already
                        f.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
