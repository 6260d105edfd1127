"""Benchmarks as plugins: the :class:`~.base.Benchmark` protocol (:mod:`.base`), THE registry
(:mod:`.registry`: a dataset spec → its plugin), one module or package per benchmark (:mod:`.hotpotqa`,
:mod:`.jsonl`, :mod:`.browsecomp`, :mod:`.browsecomp_plus`, :mod:`.widesearch`) and what they share:
grading (:mod:`.grading`, :mod:`.answers`, :mod:`.llmjudge`), report sections (:mod:`.sections`), local
corpora (:mod:`.corpora`). docs/ARCHITECTURE.md says how to add one."""
