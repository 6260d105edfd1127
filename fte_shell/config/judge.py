"""``[judge]``: how ``fte-shell judge`` (and ``bench``'s model-free pass at the end of a sweep) grades."""

from __future__ import annotations

from .base import StrictModel


class JudgeOptions(StrictModel):
    """The grading of a sweep's runs (not part of a run: left out of the config digest)."""

    preset: str | None = None
    """The grading preset (``llm-equivalence``, ``llm-equivalence-zh``, ``llm-three-way``,
    ``llm-equivalence-confidence``, ``match``, a benchmark's own such as ``gaia``; docs/bench.md "Judges";
    the former names ``browsecomp``, ``browsecomp-zh``, ``simpleqa``, ``hle`` still work, with a note).
    None = each dataset's default."""
