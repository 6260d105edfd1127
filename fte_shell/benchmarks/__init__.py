"""Benchmarks as plugins: the :class:`~.base.Benchmark` protocol (:mod:`.base`), THE registry
(:mod:`.registry`: a dataset spec → its plugin), and one module or package per benchmark, twelve in all:
:mod:`.widesearch` (a package: spec, runs, cells, align, score, table, report), :mod:`.gaia`,
:mod:`.hotpotqa`, :mod:`.browsecomp`, :mod:`.browsecomp_plus`, :mod:`.browsecomp_zh`, :mod:`.xbench`,
:mod:`.hle`, :mod:`.simpleqa`, :mod:`.frames`, :mod:`.webwalkerqa` and :mod:`.jsonl` (any JSONL of
questions; also the fallback). :mod:`.browsecomp_plus` is a package: the benchmark's own prompts and
answer format (:mod:`.browsecomp_plus.templates`), its grader (:mod:`.browsecomp_plus.grader`), the data a
sweep ran on (:mod:`.browsecomp_plus.pins`), run files (:mod:`.browsecomp_plus.runfile`), the official
figures (:mod:`.browsecomp_plus.official`) and the leaderboard export and report section
(:mod:`.browsecomp_plus.leaderboard`). What they share: grading (:mod:`.grading`, :mod:`.answers`,
:mod:`.llmjudge`, the presets of :mod:`.presets`), the encrypted files' cipher (:mod:`.cipher`), report
sections (:mod:`.sections`), local corpora (:mod:`.corpora`). docs/ARCHITECTURE.md says how to add one."""
