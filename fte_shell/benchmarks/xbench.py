"""xbench-DeepSearch (``xbench:FILE.csv``): the publisher's CSV (``DeepSearch-2505.csv``, UTF-8 with a
byte-order mark) whose ``prompt`` and ``answer`` are base64 of the text XOR-ed with the row's ``canary``
string's own UTF-8 bytes, repeated (not a hash of it, unlike BrowseComp); searched on the open web;
graded by an LLM judge (the Chinese grader, preset ``llm-equivalence-zh``: the questions are Chinese)."""

from __future__ import annotations

from pathlib import Path

from ..config import BenchmarkOptions
from ..errors import ConfigError
from .base import Log, Question, QuestionAnswer, question_id, read_csv, require_fields, safe_id
from .cipher import canary_key, decrypt

REQUIRED = ("prompt", "answer", "canary")


def load_xbench(path: Path) -> list[Question]:
    """Read and decrypt xbench-DeepSearch's CSV; ``id`` (when present) is the question id, other plain
    columns (e.g. ``type``) go to meta."""
    out: list[Question] = []
    names, rows = read_csv(path, "xbench")
    require_fields(names, REQUIRED, f"{path}:1", "an xbench-DeepSearch CSV")
    for i, row in rows:
        if not row.get("canary"):
            raise ConfigError(f"{path}:{i}: empty 'canary' (the row's decryption key)")
        try:
            prompt = decrypt(row["prompt"], row["canary"], canary_key)
            answer = decrypt(row["answer"], row["canary"], canary_key)
        except (ValueError, UnicodeDecodeError) as e:
            raise ConfigError(f"{path}:{i}: cannot decrypt row ({e.__class__.__name__}: {e})") from e
        meta = {k: v for k, v in row.items() if k not in (*REQUIRED, "id", "reference_steps") and k and v}
        rid = row.get("id")
        out.append(Question(id=safe_id(rid) if rid else question_id(prompt), question=prompt, answer=answer,
                            meta=meta))
    return out


class XBench(QuestionAnswer):
    kind = "xbench"
    summary = "xbench:FILE.csv — xbench-DeepSearch's CSV (prompt/answer XOR-ed with the row's canary)"
    judge_preset = "llm-equivalence-zh"

    def load(self, source: Path, split: str, options: BenchmarkOptions, log: Log | None) -> list[Question]:
        return load_xbench(source)


BENCHMARK = XBench()
