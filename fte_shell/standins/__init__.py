"""Stand-ins that need no key: what takes the place of a paid model when trying or testing fte-shell.

* :mod:`.server`: :class:`~.server.ScriptedServer`, a scripted OpenAI-compatible server on loopback.
* :mod:`.research`: :class:`~.research.ResearchPolicy`, deterministic research policies: scripted "models"
  that make REAL tool calls and answer from what they read (the steps for each profile: shell, fte and
  its ablation arms, visit, open/find, snippet-only). They drive the demo (over the pydoc corpus) and the
  tests and perf scripts of sweeps (over HotpotQA); on hard questions they are often wrong — they are
  deterministic and honest, not clever. A policy is a callable ``request_json -> ScriptTurn`` for the
  server.
* :mod:`.reading`: how a policy reads: question terms, line scores, answer spans, parsing tool outputs.
* :mod:`.localmodel`: a real small model on a real local server (``python3 -m
  fte_shell.standins.localmodel setup``).

Nothing is imported here: each module is imported by its own name.
"""
