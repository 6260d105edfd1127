"""``[benchmark]``: options a dataset plugin reads when it loads its questions and plans its world
(``fte_shell.benchmarks``); each option names the benchmark it is for and is ignored by the others."""

from __future__ import annotations

from .base import StrictModel


class BenchmarkOptions(StrictModel):
    """Per-dataset options of a sweep (given to every plugin's ``load`` and ``world``)."""

    gaia_text_only: bool = True
    """GAIA: keep only the tasks with no attached file (the text-only subset); the sweep says how many it
    dropped. False keeps every task (the agent is not given the attached files)."""

    frames_closed: bool = False
    """FRAMES: a closed world over the questions' linked Wikipedia pages only — search and fetch reach
    those pages and nothing else, read from the snapshot (``[snapshot] dir``), which must hold them."""
