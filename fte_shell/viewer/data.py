"""What the viewer shows, as JSON-ready dicts: the index of every run (the sweep view) and one run's detail
(its turns, its workspace with the lines each call touched). Read from run and sweep directories
(docs/ARCHITECTURE.md "Run directory", docs/bench.md "Sweep directory"); nothing is written there.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, get_args

from fte_shell.metrics import actions_from_events, judged, revisited_docs, run_metrics, run_status
from fte_shell.record.audit import (
    AUDIT,
    NOTE_MAX,
    AuditMark,
    Mark,
    append_mark,
    audit_home,
    now_iso,
    read_marks,
    run_key,
)
from fte_shell.record.events import StartEvent, event_dict
from fte_shell.record.rundir import (
    JUDGEMENT,
    RESULT,
    TRAJECTORY,
    WORKSPACE,
    find_runs,
    primary_key,
    read_events,
    read_judgement,
    read_result,
)
from fte_shell.record.sweepdir import SweepDir
from fte_shell.workspace import Document, parse_document

from .safety import UnsafePath, safe_file
from .touches import touches

# the start event's bulky keys the run view does not need (the whole config is in the raw trajectory)
_START_KEYS = ("question", "profile", "model", "run_id", "system_prompt", "t")
DOC_TEXT_CAP = 2_000_000  # characters of one document shipped to the page
AUDIT_FIELDS = frozenset({"key", "mark", "note"})
"""The fields of a hand-check request (``POST /api/audit``)."""


class Run:
    """One run directory under one of the viewed roots."""

    def __init__(self, key: int, root: Path, run_dir: Path, profile: str | None, qid: str | None, rep: int):
        self.key, self.root, self.dir = key, root, run_dir
        self.profile, self.qid, self.rep = profile, qid, rep


def _gold(root: Path) -> dict[str, Any]:
    """{question id: gold answer} of a sweep's questions."""
    return {qid: q.get("answer") for qid, q in SweepDir(root).questions().items()}


class Catalog:
    """Every run under the given paths (each a run directory or a sweep directory)."""

    def __init__(self, paths: Sequence[Path]):
        self.roots = [Path(p).resolve() for p in paths]
        for p in self.roots:
            if not p.is_dir():
                raise ValueError(f"not a directory: {p}")
        self.runs: list[Run] = []
        self.homes = {p: audit_home(p) for p in self.roots}
        """Where each root's hand-check marks are kept (:func:`fte_shell.record.audit.audit_home`)."""
        self._marks: dict[Path, tuple[tuple[int, int] | None, dict[str, list[AuditMark]]]] = {}
        self._gold: dict[Path, dict[str, Any]] = {}
        self._rows: dict[Path, tuple[tuple[Any, ...], dict[str, Any]]] = {}
        self.refresh()
        for root in set(self.roots) - {r.root for r in self.runs}:
            raise ValueError(f"no run directories under {root} (a run directory has {TRAJECTORY})")

    def refresh(self) -> int:
        """Pick up runs that appeared since the last call (a sweep still running); runs already listed
        keep their keys. Returns how many were added."""
        known = {r.dir for r in self.runs}
        added = 0
        for root in self.roots:
            self._gold[root] = _gold(root)
            for run_dir, profile, qid, rep in find_runs(root):
                if Path(run_dir) not in known:
                    self.runs.append(Run(len(self.runs), root, Path(run_dir), profile, qid, rep))
                    added += 1
        return added

    def gold(self, run: Run, qid: str | None) -> Any:
        return self._gold.get(run.root, {}).get(qid or "")

    # --- the sweep view -------------------------------------------------------------------------------
    def row(self, run: Run) -> dict[str, Any]:
        """One line of the runs table."""
        m = run_metrics(run.dir, profile=run.profile, qid=run.qid, rep=run.rep)
        result = read_result(run.dir) or {}
        question = result.get("question")
        if question is None:
            start = next((e for e in read_events(run.dir)[:1] if isinstance(e, StartEvent)), None)
            question = start.question if start is not None else None
        qid = (result.get("meta") or {}).get("qid") or run.qid or m.qid
        rel = run.dir.relative_to(run.root).as_posix() if run.dir != run.root else "."
        return {
            "key": run.key, "root": self.roots.index(run.root), "path": rel, "qid": qid,
            "question": question, "profile": m.profile, "context": m.context, "edits": m.edits.edits,
            "arm": m.profile if m.context == "keep_all" else f"{m.profile} · {m.context}",
            "model": m.model, "rep": m.rep,
            "status": run_status(m), "correct": m.correct, "f1": m.f1,
            "stop": m.stop_reason, "answer": result.get("answer"), "turns": m.turns,
            "tokens": m.total_tokens, "wall_s": round(m.wall_s, 2), "search": m.n_search,
            "select": m.n_select, "extract": m.n_extract, "revisit": m.revisit_rate,
            "docs": m.materialized, "fork_of": _fork_of(result),
        }

    def cached_row(self, run: Run) -> dict[str, Any]:
        """:meth:`row`, recomputed only when the run's files changed since."""
        sig = tuple(_stat(run.dir / f) for f in (TRAJECTORY, RESULT, JUDGEMENT))
        hit = self._rows.get(run.dir)
        if hit is None or hit[0] != sig:
            hit = self._rows[run.dir] = (sig, self.row(run))
        return hit[1]

    def index(self) -> dict[str, Any]:
        return {"roots": [str(r) for r in self.roots],
                "runs": [self.cached_row(r) | self._hand(r) for r in self.runs]}

    # --- the hand check -------------------------------------------------------------------------------
    def marks(self, run: Run) -> list[AuditMark]:
        """Every mark of ``run``, oldest first (the audit file is read again only when it changed)."""
        home = self.homes[run.root]
        sig = _stat(home / AUDIT)
        hit = self._marks.get(home)
        if hit is None or hit[0] != sig:
            by_run: dict[str, list[AuditMark]] = {}
            for m in read_marks(home):
                by_run.setdefault(m.run, []).append(m)
            hit = self._marks[home] = (sig, by_run)
        return hit[1].get(run_key(home, run.dir), [])

    def _hand(self, run: Run) -> dict[str, Any]:
        marks = self.marks(run)
        last = marks[-1] if marks else None
        return {"hand": last.mark if last else None, "hand_by": last.who if last else None}

    def mark(self, key: Any, mark: Any, note: Any, who: str) -> dict[str, Any]:
        """Append ``who``'s mark (``correct``/``wrong``, with an optional note) of run ``key`` to its
        sweep's audit file, with the judge's verdict it overrides; ValueError on a bad request."""
        if not isinstance(key, int) or isinstance(key, bool) or not 0 <= key < len(self.runs):
            raise ValueError(f"no such run: {key!r}")
        if mark not in get_args(Mark):
            raise ValueError(f"mark must be one of {', '.join(map(repr, get_args(Mark)))}")
        if note is not None and not isinstance(note, str):
            raise ValueError("note must be text")
        note = (note or "").strip() or None
        if note is not None and len(note) > NOTE_MAX:
            raise ValueError(f"a note holds at most {NOTE_MAX} characters")
        run = self.runs[key]
        judgement = read_judgement(run.dir)
        correct, _ = judged(judgement)
        home = self.homes[run.root]
        m = AuditMark(run=run_key(home, run.dir), mark=mark, note=note, who=who or "reviewer", at=now_iso(),
                      judge_correct=correct, judge=primary_key(judgement))
        append_mark(home, m)
        return m.model_dump()

    # --- the run view ---------------------------------------------------------------------------------
    def documents(self, run: Run) -> dict[str, Path]:
        """{file name: path} of the run's workspace files, symlinks that leave the run directory refused."""
        ws = run.dir / WORKSPACE
        out: dict[str, Path] = {}
        if not ws.is_dir():
            return out
        for p in sorted(ws.iterdir()):
            if p.suffix != ".txt" or p.name.startswith("."):
                continue
            try:
                out[p.name] = safe_file(run.root, p.relative_to(run.root).as_posix())
            except UnsafePath:
                continue
        return out

    def detail(self, run: Run) -> dict[str, Any]:
        """Everything the run, workspace and compare views show of one run, documents' text excepted."""
        events = read_events(run.dir)
        result = read_result(run.dir)
        judgement = read_judgement(run.dir)
        correct, f1 = judged(judgement)
        slim = [event_dict(ev) for ev in events]  # the page gets each event as written (converted on read)
        for i, ev in enumerate(events):
            if isinstance(ev, StartEvent):
                slim[i] = {k: v for k, v in slim[i].items() if k in _START_KEYS} | {"type": "start"}
        docs = self.documents(run)
        texts = {name: _lines(p) for name, p in docs.items()}
        touched = touches(events, texts)
        revisited = revisited_docs(actions_from_events(events, list(texts)), texts)
        workspace = []
        for i, (name, lines) in enumerate(texts.items()):
            head = _header(lines)
            ts = touched.get(name, [])
            workspace.append({
                "n": i, "name": name, "title": head.title if head else None, "source": head.source if head else None,
                "lines": len(lines), "fetched": next((t.turn for t in ts if t.op == "fetch"), None),
                "revisited": name in revisited, "touches": [t.model_dump() for t in ts],
            })
        row = self.row(run)
        qid = row["qid"]
        return {
            "row": row | self._hand(run), "result": result, "judgement": judgement, "correct": correct, "f1": f1,
            "gold": self.gold(run, qid), "events": slim, "workspace": workspace,
            "audit": [m.model_dump() for m in self.marks(run)], "forks": self.forks(run, row["fork_of"]),
        }

    def forks(self, run: Run, fork_of: dict[str, Any] | None) -> dict[str, Any]:
        """The run's parent when it is a fork (``key`` None when the parent is not among the viewed runs)
        and its forks among the viewed runs (``fte-shell fork``, ``bench --fork-from``)."""
        here = str(run.dir.resolve())
        parent = None
        if fork_of is not None:
            p = next((r for r in self.runs if str(r.dir.resolve()) == fork_of["run_dir"]), None)
            parent = {**fork_of, "key": p.key if p is not None else None}
        children = [{"key": r.key, "turn": f["turn"], "equal": f["equal"],
                     "path": row["path"] if row["path"] != "." else str(r.dir)}
                    for r in self.runs if r is not run and (f := (row := self.cached_row(r))["fork_of"]) is not None
                    and f["run_dir"] == here]
        return {"parent": parent, "children": children}

    def document(self, run: Run, n: int) -> dict[str, Any]:
        """The text of the run's ``n``-th workspace document (as listed by :meth:`documents`)."""
        docs = list(self.documents(run).items())
        if not 0 <= n < len(docs):
            raise KeyError(n)
        name, path = docs[n]
        return {"name": name, "lines": _lines(path)}

    def siblings(self, qid: str | None) -> Iterable[Run]:
        return (r for r in self.runs if r.qid == qid)


def _fork_of(result: dict[str, Any]) -> dict[str, Any] | None:
    """``{run_dir, turn, equal}`` of a fork's ``result.json`` ``forked_from`` (None: not a fork)."""
    f = result.get("forked_from")
    if not isinstance(f, dict) or not f.get("run_dir"):
        return None
    return {"run_dir": str(f["run_dir"]), "turn": f.get("turn"), "equal": f.get("equal")}


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def _header(lines: list[str]) -> Document | None:
    """The provenance header of a workspace file (:func:`fte_shell.workspace.parse_document`), or None for a
    file not in the workspace format."""
    try:
        return parse_document("\n".join(lines[:4]) + "\n")
    except ValueError:
        return None


def _lines(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8", errors="replace")[:DOC_TEXT_CAP]
    return text.split("\n")
