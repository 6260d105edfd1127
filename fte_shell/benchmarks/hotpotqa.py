"""HotpotQA (``hotpotqa``, ``hotpotqa:DIR``, or a plain directory): the questions at
``../shared/data/hotpotqa-amor`` (``dev.jsonl`` / ``test.jsonl``) with their passages as a local search
corpus, built once; graded by exact match + F1 (or the LLM judge)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from ..config import BenchmarkOptions, RunConfig
from ..errors import ConfigError
from ..record.jsonio import iter_jsonl
from .base import Log, Question, QuestionAnswer, WorldPlan, safe_id
from .corpora import content_stamp, default_cache_root, file_lock

HOTPOTQA_CORPUS_VERSION = 2
"""Version of the HotpotQA → corpus conversion (2: HTML entities in titles and URLs decoded). A corpus
index built by another version is rebuilt once."""

_corpus_lock = threading.Lock()


def default_hotpotqa_dir() -> Path:
    """``$FTE_HOTPOTQA_DIR``, else ``$FTE_SHARED_DATA/hotpotqa-amor``, else ``shared/data/hotpotqa-amor``
    next to the repository (a source checkout), else ``../shared/data/hotpotqa-amor`` from here."""
    if env := os.environ.get("FTE_HOTPOTQA_DIR"):
        return Path(env)
    if env := os.environ.get("FTE_SHARED_DATA"):
        return Path(env) / "hotpotqa-amor"
    beside_repo = Path(__file__).resolve().parents[3] / "shared" / "data" / "hotpotqa-amor"
    return beside_repo if beside_repo.is_dir() else Path("..") / "shared" / "data" / "hotpotqa-amor"


def load_hotpotqa(data_dir: Path, split: str = "dev") -> list[Question]:
    """Questions of one split (``dev.jsonl`` / ``test.jsonl``); ids are HotpotQA's ``_id``. The long
    ``context``/``supporting_facts`` fields are not kept (the passages reach the agent through search)."""
    path = Path(data_dir) / f"{split}.jsonl"
    if not path.exists():
        raise ConfigError(f"HotpotQA split '{split}' not found: {path} (splits: dev, test)")
    return [
        Question(
            id=safe_id(row["_id"]),
            question=row["question"],
            answer=row.get("answer"),
            meta={k: row[k] for k in ("type", "level") if k in row},
        )
        for _, row in iter_jsonl(path)
    ]


def hotpotqa_corpus_name(data_dir: Path) -> str:
    """The name a current HotpotQA corpus index carries in its ``meta.json``:
    ``hotpotqa-amor@v<version>-<content stamp of the data files>``."""
    files = sorted(Path(data_dir).glob("*.jsonl"))
    return f"hotpotqa-amor@v{HOTPOTQA_CORPUS_VERSION}-{content_stamp(files)}"


def ensure_hotpotqa_corpus(data_dir: Path, corpus_dir: Path | None = None, log: Log | None = None) -> Path:
    """Build the HotpotQA passages into a bm25s corpus once. The index is current — and reused, never
    rebuilt — while the data files' content and :data:`HOTPOTQA_CORPUS_VERSION` are unchanged (file times
    and the data directory's path do not matter). Threads and processes building the same index wait for
    one another (a lock file beside it) instead of building it twice."""
    from ..search.corpus import META, build_corpus, hotpotqa_docs

    data_dir = Path(data_dir).resolve()
    corpus_dir = Path(corpus_dir or default_cache_root() / "corpora" / "hotpotqa-amor").expanduser().resolve()
    name = hotpotqa_corpus_name(data_dir)

    def current() -> bool:
        try:
            meta = json.loads((corpus_dir / META).read_text())
        except (OSError, json.JSONDecodeError):
            return False
        return bool(meta.get("name") == name)

    with _corpus_lock:
        if current():
            return corpus_dir
        with file_lock(corpus_dir.parent / f".{corpus_dir.name}.lock"):
            if current():  # another process built it while we waited
                return corpus_dir
            if log:
                log(f"building the HotpotQA corpus index in {corpus_dir} (once)")
            return build_corpus(hotpotqa_docs(data_dir), corpus_dir, name=name, source=str(data_dir))


class HotpotQA(QuestionAnswer):
    kind = "hotpotqa"
    summary = "hotpotqa | hotpotqa:DIR — HotpotQA (dev.jsonl/test.jsonl) over its passages as a local corpus"
    has_splits = True

    def default_source(self) -> Path | None:
        return default_hotpotqa_dir()

    def claims(self, path: Path) -> bool:
        return path.is_dir()

    def load(self, source: Path, split: str, options: BenchmarkOptions, log: Log | None) -> list[Question]:
        return load_hotpotqa(source, split)

    def world(self, source: Path, corpus_dir: Path | None, log: Log | None, config: RunConfig) -> WorldPlan:
        return WorldPlan(corpus=ensure_hotpotqa_corpus(source, corpus_dir, log), closed=True)


BENCHMARK = HotpotQA()
