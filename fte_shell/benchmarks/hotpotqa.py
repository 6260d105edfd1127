"""HotpotQA (``hotpotqa``, ``hotpotqa:DIR``, or a plain directory): the questions at
``../shared/data/hotpotqa-amor`` (``dev.jsonl`` / ``test.jsonl``) with their passages as a local search
corpus, built once; graded by exact match + F1 (or the LLM judge). Where that copy is absent,
:func:`ensure_hotpotqa_data` downloads the same files from their public distribution (the AMOR
repository, HotpotQA by Yang et al., 2018, CC BY-SA 4.0), sha256-checked, into the cache."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path

import httpx

from ..config import BenchmarkOptions, RunConfig
from ..errors import ConfigError, FteError
from ..record.jsonio import iter_jsonl
from .base import Log, Question, QuestionAnswer, WorldPlan, safe_id
from .corpora import content_stamp, default_cache_root, file_lock

HOTPOTQA_CORPUS_VERSION = 2
"""Version of the HotpotQA → corpus conversion (2: HTML entities in titles and URLs decoded). A corpus
index built by another version is rebuilt once."""

_corpus_lock = threading.Lock()


HOTPOTQA_URL = "https://raw.githubusercontent.com/JianGuanTHU/AMOR/bdb64700e79a09684cd6eee50b2842166c4bf996/data/hotpotqa"
"""The public distribution of the data: the AMOR repository at the commit that added the files (pinned,
so the checksums below stay true whatever the repository does next)."""

HOTPOTQA_FILES = {
    "dev.jsonl": ("dev.json", "96296f21ea67a6e7b18017f657f7c1181e3aebdbd337993500f3280a1c4d7c28"),
    "test.jsonl": ("test.json", "d2d566c667d789508aa3511d89cfcc3480fc9d62e556a09331be9376be42c075"),
}
"""Local name -> (name under :data:`HOTPOTQA_URL`, sha256). The repository's ``.json`` files are JSON lines."""


class HotpotQADataError(FteError):
    """The HotpotQA data could not be downloaded (unreachable, an HTTP error, a checksum that does not match)."""


SYSTEM_DATA = Path("/var/cache/fte-shell/data/hotpotqa-amor")
"""Root's download of the data, read by every user (the plain-user test runs read it too)."""


def hotpotqa_cache_dir() -> Path:
    """Where :func:`ensure_hotpotqa_data` puts a download: ``$FTE_CACHE_DIR/data/hotpotqa-amor`` when
    that is set, else for root :data:`SYSTEM_DATA`, else ``~/.cache/fte-shell/data/hotpotqa-amor``."""
    if os.geteuid() == 0 and not os.environ.get("FTE_CACHE_DIR"):
        return SYSTEM_DATA
    return default_cache_root() / "data" / "hotpotqa-amor"


def default_hotpotqa_dir() -> Path:
    """``$FTE_HOTPOTQA_DIR``, else ``$FTE_SHARED_DATA/hotpotqa-amor``, else ``shared/data/hotpotqa-amor``
    next to the repository (a source checkout), else ``../shared/data/hotpotqa-amor`` from here, else
    a download (:func:`hotpotqa_cache_dir`, then root's :data:`SYSTEM_DATA`); else where a download goes."""
    if env := os.environ.get("FTE_HOTPOTQA_DIR"):
        return Path(env)
    if env := os.environ.get("FTE_SHARED_DATA"):
        return Path(env) / "hotpotqa-amor"
    beside_repo = Path(__file__).resolve().parents[3] / "shared" / "data" / "hotpotqa-amor"
    for d in (beside_repo, Path("..") / "shared" / "data" / "hotpotqa-amor", hotpotqa_cache_dir(), SYSTEM_DATA):
        if _has_data(d):
            return d
    return hotpotqa_cache_dir()


def _has_data(d: Path) -> bool:
    return all((d / name).is_file() for name in HOTPOTQA_FILES)


def ensure_hotpotqa_data(dest: Path | None = None, *, url: str | None = None, log: Log | None = None) -> Path:
    """The HotpotQA data directory: ``dest`` (default :func:`default_hotpotqa_dir`) when it holds
    ``dev.jsonl`` and ``test.jsonl`` (nothing is downloaded), else both files downloaded there from
    ``url`` (default :data:`HOTPOTQA_URL`), each checked against its sha256 in :data:`HOTPOTQA_FILES`: both appear or neither (a
    mismatch or a failed download raises :class:`HotpotQADataError` and leaves no file behind)."""
    target = Path(dest) if dest is not None else default_hotpotqa_dir()
    if _has_data(target):
        return target
    target.mkdir(parents=True, exist_ok=True)
    parts = {name: target / f".{name}.part-{os.getpid()}-{threading.get_ident()}" for name in HOTPOTQA_FILES}
    try:
        for name, (remote, sha256) in HOTPOTQA_FILES.items():
            src = f"{(url or HOTPOTQA_URL).rstrip('/')}/{remote}"
            if log:
                log(f"downloading {src} into {target}")
            got = _download(src, parts[name])
            if got != sha256:
                raise HotpotQADataError(f"{src} has sha256 {got}, not the published {sha256}: not the HotpotQA "
                                        f"data fte-shell expects (nothing was kept in {target})")
        for name, part in parts.items():
            os.replace(part, target / name)
    finally:
        for part in parts.values():
            part.unlink(missing_ok=True)
    return target


def _download(src: str, out: Path) -> str:
    """``src`` into ``out``; its sha256."""
    h = hashlib.sha256()
    try:
        with httpx.stream("GET", src, follow_redirects=True, timeout=60) as r, out.open("wb") as f:
            r.raise_for_status()
            for chunk in r.iter_bytes(1 << 20):
                h.update(chunk)
                f.write(chunk)
    except httpx.HTTPError as e:
        raise HotpotQADataError(f"downloading {src} failed: {type(e).__name__}: {e}") from e
    return h.hexdigest()


def load_hotpotqa(data_dir: Path, split: str = "dev") -> list[Question]:
    """Questions of one split (``dev.jsonl`` / ``test.jsonl``); ids are HotpotQA's ``_id``. The long
    ``context``/``supporting_facts`` fields are not kept (the passages reach the agent through search)."""
    path = Path(data_dir) / f"{split}.jsonl"
    if not path.exists():
        hint = "" if split not in ("dev", "test") else " (download it: fte-shell corpus hotpotqa --download --no-index)"
        raise ConfigError(f"HotpotQA split '{split}' not found: {path} (splits: dev, test){hint}")
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
