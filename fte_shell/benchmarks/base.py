"""Benchmark datasets: BrowseComp's encrypted CSV, a generic JSONL ``{id, question, answer}``, the
HotpotQA questions at ``../shared/data/hotpotqa-amor`` (with their passages as a local search corpus), and
WideSearch's table tasks (loaded by :mod:`fte_shell.bench.widesearch.spec`).

Every question gets a stable id: the dataset's own id when it has one, else the first 16 hex digits of
SHA-256 of the question text. Ids are made safe for use as a directory name.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import os
import random
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..errors import ConfigError
from ..record.jsonio import iter_jsonl

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


class Question(BaseModel):
    """One benchmark question."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    id: str
    """Stable, file-name-safe id (the dataset's id, or a hash of the question text)."""

    question: str
    """The question as given to the agent."""

    answer: str | None = None
    """The gold answer (None when the dataset has none)."""

    meta: dict[str, Any] = Field(default_factory=dict)
    """Extra fields of the dataset row (e.g. BrowseComp's ``problem_topic``, HotpotQA's ``type``)."""

    evaluation: dict[str, Any] | None = None
    """WideSearch: the task's evaluation spec (``required``, ``unique_columns``, ``eval_pipeline``); the
    gold table's CSV text is ``answer``. None for other datasets."""

DatasetKind = Literal["browsecomp", "jsonl", "hotpotqa", "browsecomp-plus", "widesearch"]


class Dataset(BaseModel):
    """A loaded, selected list of questions and where it came from."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    kind: DatasetKind
    """Which loader read it."""

    source: str
    """The file or directory it was read from."""

    split: str | None = None
    """HotpotQA split (``dev``/``test``); None for single-file datasets."""

    questions: list[Question]
    """The questions after ``--limit`` / ``--sample``."""


# --- BrowseComp ----------------------------------------------------------------------------------------
def derive_key(password: str, length: int) -> bytes:
    """SHA-256 digest of ``password`` repeated (and cut) to ``length`` bytes, as the public BrowseComp
    evaluation derives its XOR key from the canary."""
    digest = hashlib.sha256(password.encode()).digest()
    return (digest * (length // len(digest) + 1))[:length]


def decrypt(ciphertext_b64: str, password: str) -> str:
    """Base64-decode, then XOR with :func:`derive_key` of the canary."""
    data = base64.b64decode(ciphertext_b64)
    key = derive_key(password, len(data))
    return bytes(a ^ b for a, b in zip(data, key)).decode()


def encrypt(plaintext: str, password: str) -> str:
    """Inverse of :func:`decrypt` (XOR is its own inverse); used to make test data."""
    data = plaintext.encode()
    key = derive_key(password, len(data))
    return base64.b64encode(bytes(a ^ b for a, b in zip(data, key))).decode()


def question_id(text: str) -> str:
    """The id of a question that has none: 16 hex digits of SHA-256 of its text."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def safe_id(raw: str) -> str:
    """A dataset id made safe as a directory name (unsafe runs become ``_``; never empty or dot-only)."""
    s = _SAFE.sub("_", str(raw)).strip("._")[:100]
    return s or question_id(str(raw))


def load_browsecomp(path: Path) -> list[Question]:
    """Read BrowseComp's CSV (``problem, answer, problem_topic, canary``) and decrypt each row."""
    out: list[Question] = []
    with Path(path).open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        missing = {"problem", "answer", "canary"} - set(reader.fieldnames or [])
        if missing:
            raise ConfigError(f"{path}: not a BrowseComp CSV (missing columns: {', '.join(sorted(missing))})")
        for i, row in enumerate(reader, start=2):
            try:
                problem = decrypt(row["problem"], row["canary"])
                answer = decrypt(row["answer"], row["canary"])
            except (ValueError, UnicodeDecodeError) as e:
                raise ConfigError(f"{path}:{i}: cannot decrypt row ({e.__class__.__name__}: {e})") from e
            meta = {"problem_topic": row.get("problem_topic", "")} if row.get("problem_topic") else {}
            out.append(Question(id=question_id(problem), question=problem, answer=answer, meta=meta))
    return out


# --- generic JSONL -------------------------------------------------------------------------------------
def load_jsonl(path: Path) -> list[Question]:
    """Read ``{id?, question, answer?, ...}`` one object a line; other keys go to ``meta``."""
    out: list[Question] = []
    for i, row in iter_jsonl(path):
        if not isinstance(row, dict) or not isinstance(row.get("question"), str):
            raise ConfigError(f"{path}:{i}: each line needs a string field 'question'")
        qid = row.get("id", row.get("_id"))
        answer = row.get("answer")
        meta = {k: v for k, v in row.items() if k not in ("id", "_id", "question", "answer")}
        out.append(
            Question(
                id=safe_id(qid) if qid not in (None, "") else question_id(row["question"]),
                question=row["question"],
                answer=None if answer is None else str(answer),
                meta=meta,
            )
        )
    return out


# --- HotpotQA ------------------------------------------------------------------------------------------
def default_hotpotqa_dir() -> Path:
    """``$FTE_SHARED_DATA/hotpotqa-amor``, else ``shared/data/hotpotqa-amor`` next to the repository."""
    env = os.environ.get("FTE_SHARED_DATA")
    if env:
        return Path(env) / "hotpotqa-amor"
    return Path(__file__).resolve().parents[3] / "shared" / "data" / "hotpotqa-amor"


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


# --- selection and dispatch ----------------------------------------------------------------------------
def select(
    questions: list[Question], *, limit: int | None = None, sample: int | None = None, seed: int = 0
) -> list[Question]:
    """``sample`` draws N questions at random with ``seed`` (kept in dataset order), then ``limit`` keeps
    the first N. Duplicate ids get a ``-2``, ``-3`` … suffix so every run directory is distinct."""
    for name, v in (("limit", limit), ("sample", sample)):
        if v is not None and v < 0:
            raise ConfigError(f"--{name} must be >= 0 (got {v})")
    picked = list(questions)
    if sample is not None and sample < len(picked):
        idx = sorted(random.Random(seed).sample(range(len(picked)), sample))
        picked = [picked[i] for i in idx]
    if limit is not None:
        picked = picked[:limit]
    seen: dict[str, int] = {}
    out: list[Question] = []
    for q in picked:
        n = seen.get(q.id, 0) + 1
        seen[q.id] = n
        out.append(q if n == 1 else q.model_copy(update={"id": f"{q.id}-{n}"}))
    return out


def load_dataset(
    spec: str,
    *,
    split: str = "dev",
    limit: int | None = None,
    sample: int | None = None,
    seed: int = 0,
) -> Dataset:
    """Load by ``spec``: ``hotpotqa`` (the shared data), ``hotpotqa:DIR``, ``browsecomp:FILE.csv``,
    ``jsonl:FILE``, ``browsecomp-plus:DIR`` (see :mod:`.bcplus`), ``widesearch:DIR``, or a plain path
    (``*.csv`` = BrowseComp, a directory holding ``widesearch.jsonl`` = WideSearch, another directory = HotpotQA, else JSONL)."""
    kind: DatasetKind
    if spec == "hotpotqa":
        kind, path = "hotpotqa", default_hotpotqa_dir()
    elif ":" in spec and spec.split(":", 1)[0] in ("hotpotqa", "browsecomp", "jsonl", "browsecomp-plus",
                                                   "widesearch"):
        prefix, rest = spec.split(":", 1)
        kind, path = prefix, Path(rest)  # type: ignore[assignment]
    else:
        path = Path(spec)
        kind = "hotpotqa" if path.is_dir() else "browsecomp" if path.suffix.lower() == ".csv" else "jsonl"
        if path.is_dir() and (path / "widesearch.jsonl").exists():
            kind = "widesearch"
    if not path.exists():
        raise ConfigError(f"dataset not found: {path}")
    if kind == "widesearch":
        from .widesearch.spec import load_widesearch

        qs = load_widesearch(path)
    elif kind == "hotpotqa":
        qs = load_hotpotqa(path, split)
    elif kind == "browsecomp":
        qs = load_browsecomp(path)
    elif kind == "browsecomp-plus":  # queries + relevance judgments; its corpus is indexed by the sweep
        from .bcplus import load_browsecomp_plus

        qs = load_browsecomp_plus(path)
    else:
        qs = load_jsonl(path)
    return Dataset(
        kind=kind,
        source=str(path.resolve()),
        split=split if kind == "hotpotqa" else None,
        questions=select(qs, limit=limit, sample=sample, seed=seed),
    )
