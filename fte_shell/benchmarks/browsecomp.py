"""BrowseComp (``browsecomp:FILE.csv``, or a plain ``*.csv``): the encrypted CSV of the public evaluation
(``problem, answer, problem_topic, canary``), decrypted row by row; searched on the open web; graded by
exact match + F1 or, as the benchmark intends, the LLM judge (BrowseComp protocol)."""

from __future__ import annotations

import base64
import csv
import hashlib
from pathlib import Path

from ..errors import ConfigError
from .base import Question, QuestionAnswer, question_id


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


class BrowseComp(QuestionAnswer):
    kind = "browsecomp"
    summary = "browsecomp:FILE.csv — BrowseComp's encrypted CSV"

    def claims(self, path: Path) -> bool:
        return path.suffix.lower() == ".csv"

    def load(self, source: Path, split: str) -> list[Question]:
        return load_browsecomp(source)


BENCHMARK = BrowseComp()
