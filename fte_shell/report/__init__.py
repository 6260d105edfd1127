"""Reports of sweeps: :mod:`.build` (``write_report``: report.md, report.html, metrics.json,
per_question.csv), the general sections (:mod:`.sections`), the judges' (:mod:`.judges`), the hand
check's (:mod:`.audit`) and the plots (:mod:`.plots`). A benchmark adds its own sections
(:meth:`fte_shell.benchmarks.base.Benchmark.report_sections`)."""
