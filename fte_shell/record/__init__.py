"""What a run and a sweep leave on disk: the run directory (:mod:`.rundir`), the sweep directory
(:mod:`.sweepdir`), the typed trajectory events (:mod:`.events`) and atomic JSON I/O (:mod:`.jsonio`).
No other module opens ``trajectory.jsonl``, ``result.json``, ``questions.jsonl``, ``sweep.json``,
``failures.jsonl`` or ``audit.jsonl`` (:mod:`.audit`, the hand check) itself."""
