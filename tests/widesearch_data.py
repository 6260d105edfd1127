"""Helpers that write WideSearch tasks in the benchmark's published layout (for the tests)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_tasks(root: Path, tasks: list[dict[str, Any]]) -> Path:
    """``root/widesearch.jsonl`` (``evaluation`` as a JSON string, as published) and
    ``root/widesearch_gold/<instance_id>.csv`` from dicts with ``instance_id``, ``query``, ``language``,
    ``evaluation`` (a dict) and ``gold`` (CSV text)."""
    (root / "widesearch_gold").mkdir(parents=True, exist_ok=True)
    lines = []
    for t in tasks:
        lines.append(json.dumps({"instance_id": t["instance_id"], "query": t["query"],
                                 "evaluation": json.dumps(t["evaluation"], ensure_ascii=False),
                                 "language": t.get("language", "en")}, ensure_ascii=False))
        (root / "widesearch_gold" / f"{t['instance_id']}.csv").write_text(t["gold"], encoding="utf-8")
    (root / "widesearch.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root
