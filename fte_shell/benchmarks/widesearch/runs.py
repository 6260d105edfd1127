"""``fte-shell judge`` on a WideSearch sweep: score every finished run's table answer and keep the result
next to the run.

Per run: ``judgement.json`` gets a ``widesearch`` entry (the benchmark's names ``score``,
``precision_by_row`` … ``f1_by_item``, plus ``msg``, row counts, the judge's column/key maps,
``judge_model``, ``judge_temperature``, ``judge_calls`` and ``gold_sha256``) and ``widesearch_cells.csv``
holds one line per cell (row key, column, response value, gold value, metric, score, note). Runs whose
stop reason is an infrastructure failure (:func:`fte_shell.stops.is_infra_failure`) are not results and
are skipped; so are unfinished ones. A cached entry is reused while the gold table is the same and either
no judge call was needed, no judge model is given now, or it is the same one.
"""

from __future__ import annotations

import csv
import hashlib
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ...errors import FteError, ModelError
from ...record.rundir import find_runs, read_judgement, read_result, write_judgement
from ...record.sweepdir import SweepDir
from ...stops import is_infra_failure
from ..grading import JudgeSummary
from .align import TableJudge
from .score import NeedsJudge, TableScore, score_table
from .spec import Evaluation
from .table import read_gold_csv

ENTRY = "widesearch"
CELLS_CSV = "widesearch_cells.csv"
CELL_FIELDS = ["row_key", "column", "response", "gold", "metric", "score", "note"]


def load_tasks(sweep_dir: Path) -> dict[str, dict[str, Any]]:
    """``{qid: question row}`` of the sweep's ``questions.jsonl`` rows that carry an evaluation spec."""
    return {qid: row for qid, row in SweepDir(sweep_dir).questions().items()
            if row.get("evaluation") and row.get("answer") is not None}


def write_cells(path: Path, result: TableScore) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(CELL_FIELDS)
        for c in result.cells:
            w.writerow(["" if getattr(c, k) is None else getattr(c, k) for k in CELL_FIELDS])
    tmp.replace(path)


def entry(result: TableScore, judge: TableJudge | None, gold_sha: str) -> dict[str, Any]:
    data = result.model_dump(mode="json")
    data["judge_model"] = judge.model if judge is not None and result.judge_calls else None
    data["judge_temperature"] = judge.temperature if judge is not None and result.judge_calls else None
    data["gold_sha256"] = gold_sha
    return data


def judge_widesearch(
    root: Path,
    sweep_dir: Path,
    summary: JudgeSummary,
    *,
    judge: TableJudge | None = None,
    force: bool = False,
    concurrency: int = 8,
    on_done: Callable[[], None] | None = None,
) -> None:
    """Score every finished run under ``root`` (a WideSearch sweep or one of its run directories) and add
    the counts to ``summary`` (``correct`` counts successes)."""
    tasks = load_tasks(sweep_dir)
    lock = threading.Lock()
    todo: list[tuple[Path, dict[str, Any], str | None, str]] = []
    for d, _profile, qid, _rep in find_runs(Path(root)):
        result = read_result(d)
        qid = qid or str(((result or {}).get("meta") or {}).get("qid") or "")  # a single run directory
        task = tasks.get(qid)
        if result is None or task is None or is_infra_failure(result.get("stop_reason")):
            summary.skipped += 1
            continue
        gold_sha = hashlib.sha256(str(task["answer"]).encode()).hexdigest()
        prev = (read_judgement(d) or {}).get(ENTRY)
        if not force and isinstance(prev, dict) and prev.get("gold_sha256") == gold_sha and (
            judge is None or prev.get("judge_model") in (None, judge.model)
        ):
            summary.cached += 1
            summary.correct += prev.get("score") == 1
            continue
        todo.append((d, task, result.get("answer"), gold_sha))

    def one(item: tuple[Path, dict[str, Any], str | None, str]) -> None:
        d, task, answer, gold_sha = item
        try:
            ev = Evaluation.model_validate(task["evaluation"])
            gold = read_gold_csv(str(task["answer"])).select(ev.required)
            res = score_table(ev, gold, answer, judge)
        except (NeedsJudge, ModelError) as e:
            with lock:
                summary.errors.append(f"{d}: {e}")
            return
        except (FteError, ValueError) as e:
            with lock:
                summary.errors.append(f"{d}: cannot score: {e}")
            return
        write_cells(d / CELLS_CSV, res)
        with lock:
            data = read_judgement(d) or {}
            data[ENTRY] = entry(res, judge, gold_sha)
            write_judgement(d, data)
            summary.judged += 1
            summary.correct += res.score == 1
        if on_done:
            on_done()

    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        list(pool.map(one, todo))
