"""``fte-shell export browsecomp-plus SWEEP --out DIR``: a BrowseComp-Plus sweep's runs as the benchmark's
run files (docs/export.md "BrowseComp-Plus run files"), ready for its ``scripts_evaluation`` and the
leaderboard.

One directory per arm (``DIR/<arm>/``; ``DIR/<arm>/r<k>/`` per repetition when the sweep ran each question
more than once) holding one ``<query_id>.json`` per question: the object
:func:`fte_shell.benchmarks.browsecomp_plus.runfile.run_file` makes, the same the report's official figures
are computed from. Runs that ended for an infrastructure reason are not written (they are to be run again,
not scored); the export says how many.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..benchmarks.browsecomp_plus.leaderboard import run_files, sweep_data, sweep_runs
from ..record.sweepdir import SweepDir
from .base import Exported, ExportError, NoOptions, Reads
from .common import safe_name


def export_browsecomp_plus(sweep: Path, out: Path, on_run: Callable[[Any], None] | None = None) -> Exported:
    """Write the run files of the sweep ``sweep`` under ``out`` (see the module docstring)."""
    sweep = Path(sweep)
    if not SweepDir(sweep).manifest_path.is_file():
        raise ExportError(f"{sweep}: not a sweep directory (no sweep.json); give the --out of `fte-shell bench`")
    data = sweep_data(sweep)  # a FteError naming what is wrong with the sweep's data
    manifest = SweepDir(sweep).manifest()
    per_rep = manifest is not None and manifest.runs > 1
    runs = sweep_runs(sweep)
    done = Exported("run file", notes=list(data.problems))
    seen: set[tuple[str, int, str]] = set()
    for run_dir, arm, rep, f in run_files(data, runs):
        if on_run is not None:
            on_run(run_dir)
        if f is None:
            done.left_out += 1
            continue
        key = (arm, rep, f["query_id"])
        if key in seen:  # two questions of one query id (a dataset with a repeated id): keep the first
            done.notes.append(f"{arm} r{rep}: query {f['query_id']} appears twice; the second run is not written")
            continue
        seen.add(key)
        d = Path(out) / arm / (f"r{rep}" if per_rep else "")  # arms are directory names of runs/ already
        d.mkdir(parents=True, exist_ok=True)
        f["metadata"]["output_dir"] = str(d)
        path = d / f"{safe_name(f['query_id'])}.json"
        path.write_text(json.dumps(f, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        done.files.append(path)
    if not done.files:
        raise ExportError(f"{sweep}: no run is a result yet ({len(runs)} run director(ies), none with a result.json "
                          "that is not an infrastructure failure)")
    if done.left_out:
        done.notes.append(f"{done.left_out} run(s) are not results (an infrastructure failure, or unfinished) and "
                          "were not written: resume the sweep to run them")
    return done


class BrowseCompPlusExporter:
    """``fte-shell export browsecomp-plus``: :func:`export_browsecomp_plus` as an :class:`~.base.Exporter`."""

    name = "browsecomp-plus"
    summary = ("BrowseComp-Plus run files (query_id, tool_call_counts, status, retrieved_docids, result, metadata, "
               "usage), one directory per arm: what the benchmark's scripts_evaluation reads and its leaderboard "
               "takes (the report's \"BrowseComp-Plus official figures\" come from the same files).")
    reads: Reads = "sweep"
    writes = "Directory for the run files (<arm>/<query_id>.json; <arm>/r<k>/ per repetition)."
    options_model = NoOptions

    def require(self) -> None:
        pass

    def export(self, paths: Sequence[Path], out: Path, options: NoOptions, on_run: Callable[[Any], None]) -> Exported:
        (sweep,) = paths
        return export_browsecomp_plus(sweep, out, on_run)


EXPORTER = BrowseCompPlusExporter()
