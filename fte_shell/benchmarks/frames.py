"""FRAMES (Krishna et al., 2024; ``frames:FILE.tsv``): the publisher's ``test.tsv`` (``Prompt``,
``Answer``, ``wikipedia_link_1`` … ``wikipedia_link_N``, ``reasoning_types``: ``|``-separated). Searched on
the open web, or with ``--frames-closed`` in a closed world over the linked pages only: those pages, read
from the snapshot (``--snapshot DIR``), become a local corpus that serves search and fetch, and every
other URL is refused (the local corpus's closed world; :class:`~.base.WorldPlan`). Graded by an LLM judge;
the report adds accuracy per reasoning type."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ..config import BenchmarkOptions, RunConfig
from ..errors import ConfigError
from ..workspace import url_title
from .base import Log, Question, QuestionAnswer, WorldPlan, question_id, read_csv, require_fields
from .corpora import default_cache_root, file_lock
from .sections import Placed, ReportData, Section, accuracy_tables

if TYPE_CHECKING:  # pragma: no cover
    from ..search.corpus import CorpusDoc

LINK_PREFIX = "wikipedia_link_"
REQUIRED = ("Prompt", "Answer", "reasoning_types")
_lock = threading.Lock()


def load_frames(path: Path) -> list[Question]:
    """Read FRAMES's TSV; meta: ``reasoning_types`` (a list) and ``links`` (the linked pages, in order)."""
    out: list[Question] = []
    names, rows = read_csv(path, "frames", "\t")
    require_fields(names, REQUIRED, f"{path}:1", "FRAMES's TSV")
    link_cols = sorted((c for c in names if c.startswith(LINK_PREFIX) and c[len(LINK_PREFIX):].isdigit()),
                       key=lambda c: int(c[len(LINK_PREFIX):]))
    if not link_cols:
        raise ConfigError(f"{path}:1: not FRAMES's TSV (no {LINK_PREFIX}N columns)")
    for i, row in rows:
        prompt = (row.get("Prompt") or "").strip()
        if not prompt:
            raise ConfigError(f"{path}:{i}: empty 'Prompt'")
        links = [u.strip() for c in link_cols if (u := (row.get(c) or "").strip())]
        bad = [u for u in links if urlsplit(u).scheme not in ("http", "https")]
        if bad:
            raise ConfigError(f"{path}:{i}: {LINK_PREFIX}* is not an http(s) URL: {bad[0]!r}")
        types = [t.strip() for t in (row.get("reasoning_types") or "").split("|") if t.strip()]
        out.append(Question(id=question_id(prompt), question=prompt, answer=row.get("Answer") or "",
                            meta={"reasoning_types": types, "links": links}))
    return out


# --- the closed world ------------------------------------------------------------------------------------
def _title(url: str) -> str:
    return url_title(url).replace("_", " ") or url


def linked_docs(urls: Sequence[str], snapshot_dir: Path, log: Log | None) -> Iterator[CorpusDoc]:
    """The linked pages as corpus documents, each the snapshot's latest good capture of it (its converted
    text); pages the snapshot lacks are left out and counted in one log line."""
    from ..search.corpus import CorpusDoc, docid_for_title, url_key
    from ..snapshot import open_store
    from ..workspace.format import canonical_url

    store = open_store(snapshot_dir)
    seen: set[str] = set()
    ids: set[str] = set()
    missing = 0
    for url in urls:
        key = url_key(url)
        if key in seen:
            continue
        seen.add(key)
        cap = store.index.latest("page", canonical_url(url))
        if cap is None or cap.status != "ok":
            missing += 1
            continue
        title = _title(url)
        docid = docid_for_title(title)
        if docid in ids:
            docid = f"{docid}-{hashlib.sha256(key.encode()).hexdigest()[:8]}"
        ids.add(docid)
        yield CorpusDoc(docid=docid, title=title, text=store.body(cap).decode("utf-8", "replace"), url=url)
    if log:
        log(f"FRAMES closed world: {len(seen) - missing} of {len(seen)} linked page(s) found in the snapshot "
            f"{snapshot_dir}" + (f"; {missing} missing (not searchable, refused on fetch)" if missing else ""))


def ensure_closed_corpus(source: Path, snapshot_dir: Path, corpus_dir: Path | None, log: Log | None) -> Path:
    """A local corpus of every linked page of ``source`` read from ``snapshot_dir``, built once per
    (dataset file, snapshot state)."""
    from ..search.corpus import META, build_corpus

    urls = [u for q in load_frames(source) for u in q.meta["links"]]
    index = Path(snapshot_dir).expanduser().resolve() / "index.sqlite"
    stamp = hashlib.sha256(Path(source).read_bytes() + str(index.stat().st_mtime_ns if index.exists() else 0).encode()
                           ).hexdigest()[:16]
    name = f"frames-closed@{stamp}"
    out = Path(corpus_dir or default_cache_root() / "corpora" / f"frames-{stamp}").expanduser().resolve()
    with _lock, file_lock(out.parent / f".{out.name}.lock"):
        meta = out / META
        if meta.exists() and f'"{name}"' in meta.read_text():
            return out
        if log:
            log(f"building the FRAMES closed-world corpus in {out} (once)")
        return build_corpus(linked_docs(urls, snapshot_dir, log), out, name=name, source=str(source))


def reasoning_section(d: ReportData) -> Section | None:
    """Accuracy per reasoning type (a question counts under each of its types)."""
    tables, metrics = accuracy_tables(d, BENCHMARK.kind, [("Reasoning type", lambda m: m.get("reasoning_types") or [])])
    if not tables:
        return None
    return Section("FRAMES accuracy by reasoning type", tables,
                   ["Accuracy per reasoning type; a question with several types counts under each (docs/metrics.md)."],
                   metrics={"frames_reasoning_types": metrics.get("Reasoning type", {})})


class Frames(QuestionAnswer):
    kind = "frames"
    summary = "frames:FILE.tsv — FRAMES's test.tsv (open web, or --frames-closed: the linked pages only)"

    def load(self, source: Path, split: str, options: BenchmarkOptions, log: Log | None) -> list[Question]:
        return load_frames(source)

    def world(self, source: Path, corpus_dir: Path | None, log: Log | None, config: RunConfig) -> WorldPlan:
        if not config.benchmark.frames_closed:
            return WorldPlan()
        if config.snapshot.dir is None:
            raise ConfigError("--frames-closed reads the linked pages from a snapshot: give --snapshot DIR holding "
                              "them (record them once, e.g. a sweep with --snapshot DIR --snapshot-mode record)")
        return WorldPlan(corpus=ensure_closed_corpus(source, config.snapshot.dir, corpus_dir, log), closed=True)

    def report_sections(self) -> Sequence[Placed]:
        return (Placed(reasoning_section, "analysis"),)


BENCHMARK = Frames()
