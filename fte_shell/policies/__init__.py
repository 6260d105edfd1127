"""Deterministic research policies: scripted "models" that make REAL tool calls and answer from what
they read. They drive the demo (over the pydoc corpus) and the tests and benchmarks of sweeps (over
HotpotQA); on hard questions they are often wrong — they are deterministic and honest, not clever.

A policy is a callable ``request_json -> ScriptTurn`` for :class:`fte_shell.scripted.ScriptedServer`.

* :mod:`.research`: :class:`ResearchPolicy`, the steps it takes for each profile (shell, fte and its
  ablation arms, visit, open/find, snippet-only).
* :mod:`.reading`: how it reads: question terms, line scores, answer spans, parsing tool outputs.
"""

from __future__ import annotations

from .research import ResearchPolicy

__all__ = ["ResearchPolicy"]
