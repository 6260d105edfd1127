"""BrowseComp-Plus: a fixed corpus with human relevance judgments (dataset ``browsecomp-plus:DIR``).

``DIR`` holds the files the benchmark's own scripts produce:

- the decrypted queries, one JSON object a line (``data/browsecomp_plus_decrypted.jsonl``, as
  ``scripts_build_index/decrypt_dataset.py`` writes it; also found at ``DIR/*decrypted*.jsonl`` or
  ``DIR/queries.jsonl``): ``query_id``, ``query``, ``answer``, ``evidence_docs``, ``gold_docs`` (lists of
  ``{docid, text, url}`` objects, or of docids, or such a list as a JSON string);
- the corpus (``{docid, text, url}`` rows, the ``Tevatron/browsecomp-plus-corpus`` columns): a JSONL
  (``corpus.jsonl``, ``corpus/*.jsonl``) or, when pyarrow is installed, parquet (``corpus.parquet``,
  ``corpus/*.parquet``, ``data/*.parquet``). Without a corpus file the documents embedded in the queries
  file (evidence, gold and negative docs with text) form the corpus;
- optionally TREC qrels (``topics-qrels/qrel_evidence.txt``, ``topics-qrels/qrel_golds.txt``: lines
  ``query_id 0 docid relevance``). When a query appears in a qrels file, its documents with relevance > 0
  replace the list from the queries file.

The corpus is indexed once as a local corpus (bm25s search + fetch by docid or url, no HTTP). Evidence
metrics per run and profile (docs/metrics.md): recall of evidence and gold documents among the documents
fetched/opened/visited and among the search results seen, and the share of revisited documents that
are evidence.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ...config import BenchmarkOptions, RunConfig
from ...errors import ConfigError
from ...metrics import RunMetrics
from ...record.jsonio import iter_jsonl
from ..base import Log, Question, QuestionAnswer, ScriptedTask, WorldPlan, safe_id
from ..corpora import default_cache_root
from ..grading import JudgeRequest, JudgeSummary
from ..sections import Placed, ReportData, Section, pct
from .grader import PLACEHOLDER, judge_plus
from .leaderboard import official_section
from .official import PRESET, QREL_FILES, qrels_file

QUERY_FILES = ("data/browsecomp_plus_decrypted.jsonl", "browsecomp_plus_decrypted.jsonl", "queries.jsonl")
TITLE_CHARS = 120


# --- reading --------------------------------------------------------------------------------------------
def queries_file(root: Path) -> Path:
    """The decrypted queries JSONL under ``root`` (see the module docstring)."""
    for name in QUERY_FILES:
        if (root / name).is_file():
            return root / name
    found = sorted(root.glob("*decrypted*.jsonl")) + sorted(root.glob("data/*decrypted*.jsonl"))
    if found:
        return found[0]
    raise ConfigError(f"{root}: no BrowseComp-Plus queries file (looked for {', '.join(QUERY_FILES)} and "
                      "*decrypted*.jsonl; make it with the benchmark's scripts_build_index/decrypt_dataset.py)")


def _doc_list(value: Any, where: str) -> list[dict[str, Any]]:
    """``evidence_docs``/``gold_docs`` as ``[{docid, text?, url?}]`` (accepts docids and a JSON string)."""
    if value is None:
        return []
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise ConfigError(f"{where}: not a list of documents (nor JSON for one)") from None
    if not isinstance(value, list):
        raise ConfigError(f"{where}: expected a list of documents, got {type(value).__name__}")
    out = []
    for d in value:
        if isinstance(d, (str, int)):
            out.append({"docid": str(d)})
        elif isinstance(d, dict) and d.get("docid") is not None:
            out.append({**d, "docid": str(d["docid"])})
        else:
            raise ConfigError(f"{where}: every document needs a docid")
    return out


def read_qrels(path: Path) -> dict[str, list[str]]:
    """``{query_id: [docid with relevance > 0]}`` of a TREC qrels file (``qid iter docid rel``)."""
    out: dict[str, list[str]] = {}
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 4:
            raise ConfigError(f"{path}:{i}: a qrels line has 4 fields (query_id iteration docid relevance)")
        try:
            rel = float(parts[3])
        except ValueError:
            raise ConfigError(f"{path}:{i}: relevance must be a number, got {parts[3]!r}") from None
        docs = out.setdefault(parts[0], [])
        if rel > 0 and parts[2] not in docs:
            docs.append(parts[2])
    return out


def _qrels(root: Path) -> dict[str, dict[str, list[str]]]:
    out = {}
    for kind in QREL_FILES:
        path = qrels_file(root, kind)
        out[kind] = read_qrels(path) if path else {}
    return out


def load_browsecomp_plus(root: Path) -> list[Question]:
    """The questions of ``root`` with their relevance judgments in ``meta``: ``query_id``,
    ``evidence_docids``, ``gold_docids`` and ``doc_urls`` (``{docid: url}`` of those documents)."""
    root = Path(root)
    path = queries_file(root)
    qrels = _qrels(root)
    out = []
    for i, row in iter_jsonl(path):
        where = f"{path}:{i}"
        if not isinstance(row, dict) or not isinstance(row.get("query"), str) or row.get("query_id") is None:
            raise ConfigError(f"{where}: each line needs 'query_id' and a string 'query'")
        qid = str(row["query_id"])
        docs = {k: _doc_list(row.get(f"{k}_docs"), f"{where}: {k}_docs") for k in ("evidence", "gold")}
        ids = {k: qrels[k].get(qid) or [d["docid"] for d in docs[k]] for k in docs}
        urls = {d["docid"]: d["url"] for k in docs for d in docs[k] if isinstance(d.get("url"), str) and d["url"]}
        answer = row.get("answer")
        out.append(Question(id=safe_id(qid), question=row["query"], answer=None if answer is None else str(answer),
                            meta={"query_id": qid, "evidence_docids": ids["evidence"], "gold_docids": ids["gold"],
                                  "doc_urls": urls}))
    return out


def corpus_files(root: Path) -> list[Path]:
    """The corpus files under ``root`` (JSONL first, then parquet)."""
    found: list[Path] = []
    for pattern in ("corpus.jsonl", "corpus/*.jsonl", "corpus.parquet", "corpus/*.parquet", "data/*.parquet"):
        found.extend(sorted(root.glob(pattern)))
    return found


def _title(text: str, fallback: str) -> str:
    """A document's title: ``title:`` of a leading front-matter block, else its first non-empty line."""
    lines = text.splitlines()
    if lines and lines[0].strip() == "---":
        for line in lines[1:40]:
            if line.strip() == "---":
                break
            m = re.match(r"\s*title:\s*(.+)", line, re.IGNORECASE)
            if m:
                return m.group(1).strip().strip("\"'")[:TITLE_CHARS] or fallback
    first = next((s.strip() for s in lines if s.strip() and s.strip() != "---"), "")
    return first.lstrip("# ")[:TITLE_CHARS] or fallback


def _rows(path: Path) -> Iterator[dict[str, Any]]:
    if path.suffix == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise ConfigError(f"{path}: reading parquet needs pyarrow (pip install pyarrow), or give corpus.jsonl") from None
        for batch in pq.ParquetFile(path).iter_batches(batch_size=2048, columns=["docid", "text", "url"]):
            yield from batch.to_pylist()
    else:
        for _, row in iter_jsonl(path):
            yield row


def corpus_docs(root: Path) -> Iterator[Any]:
    """The corpus as :class:`fte_shell.search.corpus.CorpusDoc` (docids unique: the first row wins)."""
    from ...search.corpus import CorpusDoc

    files = corpus_files(root)
    seen: set[str] = set()
    if files:
        rows: Iterator[dict[str, Any]] = (r for f in files for r in _rows(f))
    else:  # the documents embedded in the queries file
        rows = (d for _, q in iter_jsonl(queries_file(root)) if isinstance(q, dict)
                for k in ("gold_docs", "evidence_docs", "negative_docs")
                for d in _doc_list(q.get(k), str(root)) if isinstance(d.get("text"), str))
    for r in rows:
        if not isinstance(r, dict) or r.get("docid") is None or not isinstance(r.get("text"), str):
            raise ConfigError(f"{root}: every corpus row needs 'docid' and a string 'text'")
        docid = str(r["docid"])
        if docid in seen:
            continue
        seen.add(docid)
        url = r.get("url") if isinstance(r.get("url"), str) and r.get("url") else None
        yield CorpusDoc(docid=docid, title=_title(r["text"], url or docid), text=r["text"], url=url)
    if not seen:
        raise ConfigError(f"{root}: no corpus documents (give corpus.jsonl or corpus/*.parquet with docid, text, url)")


_lock = threading.Lock()


def ensure_corpus(root: Path, corpus_dir: Path | None = None, log: Log | None = None) -> Path:
    """Store the corpus of ``root`` once (reused while its files are unchanged; retrievers index its text
    alone); returns the corpus directory."""
    from ...search.corpus import META, build_corpus

    root = Path(root).resolve()
    files = corpus_files(root) or [queries_file(root)]
    stamp = "-".join(f"{p.name}.{p.stat().st_size}.{int(p.stat().st_mtime)}" for p in files)
    key = hashlib.sha256(str(root).encode()).hexdigest()[:12]
    corpus_dir = Path(corpus_dir or default_cache_root() / "corpora" / f"browsecomp-plus-{key}").expanduser().resolve()
    name = f"browsecomp-plus@{stamp}"
    with _lock:
        try:
            meta = json.loads((corpus_dir / META).read_text())
        except (OSError, json.JSONDecodeError):
            meta = {}
        if meta.get("name") == name and meta.get("source") == str(root) and meta.get("contents") == "text":
            return corpus_dir
        if log:
            log(f"building the BrowseComp-Plus corpus index in {corpus_dir} (once)")
        # retrievers index the text alone, as the benchmark's official indexes do (the title is its first line)
        return build_corpus(corpus_docs(root), corpus_dir, name=name, source=str(root), contents="text")


# --- evidence metrics -----------------------------------------------------------------------------------
def _recall(relevant: list[str], found: set[str]) -> float | None:
    return sum(1 for d in relevant if d in found) / len(relevant) if relevant else None


def run_evidence(run: RunMetrics, question: dict[str, Any]) -> dict[str, Any] | None:
    """Evidence numbers of one run against its question's judgments (None without judgments): recalls
    among fetched/opened/visited documents and among search results seen, and the revisited documents
    (count, and how many are evidence)."""
    from ...search.corpus import url_key

    meta = question.get("meta") or {}
    ev, gold = list(meta.get("evidence_docids") or []), list(meta.get("gold_docids") or [])
    if not ev and not gold:
        return None
    by_url = {url_key(u): d for d, u in (meta.get("doc_urls") or {}).items()}

    def docids(sources: list[str]) -> set[str]:
        return {by_url.get(url_key(s), s) if "://" in s else s for s in sources}

    fetched, seen, revisited = docids(run.fetched_sources), docids(run.seen_sources), docids(run.revisited_sources)
    return {"evidence_recall_fetched": _recall(ev, fetched), "gold_recall_fetched": _recall(gold, fetched),
            "evidence_recall_seen": _recall(ev, seen), "gold_recall_seen": _recall(gold, seen),
            "revisited": len(revisited), "revisited_evidence": len(revisited & set(ev))}


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def profile_evidence(label: str, runs: list[RunMetrics], questions: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """Means of :func:`run_evidence` over a row's result runs with judgments; the revisited-evidence share
    is pooled (revisited evidence documents / revisited documents)."""
    per = [e for r in runs if not r.infra_failure and r.qid in questions
           if (e := run_evidence(r, questions[r.qid])) is not None]
    if not per:
        return None
    keys = ("evidence_recall_fetched", "gold_recall_fetched", "evidence_recall_seen", "gold_recall_seen")
    out: dict[str, Any] = {"label": label, "runs": len(per)}
    out.update({k: _mean([e[k] for e in per if e[k] is not None]) for k in keys})
    rev = sum(e["revisited"] for e in per)
    out["revisited_evidence_share"] = sum(e["revisited_evidence"] for e in per) / rev if rev else None
    return out


def evidence_section(d: ReportData) -> Section | None:
    """The BrowseComp-Plus section (only when the sweeps' questions carry relevance judgments)."""
    rows = [x for p in d.profiles if (x := profile_evidence(p.label, d.groups[p.label], d.questions))]
    if not rows:
        return None
    head = ["Profile", "Runs", "Evidence recall (fetched)", "Gold recall (fetched)", "Evidence recall (results seen)",
            "Gold recall (results seen)", "Revisited that are evidence"]
    table = [[x["label"], str(x["runs"]), pct(x["evidence_recall_fetched"]), pct(x["gold_recall_fetched"]),
              pct(x["evidence_recall_seen"]), pct(x["gold_recall_seen"]), pct(x["revisited_evidence_share"])]
             for x in rows]
    notes = [("Recall: share of a question's evidence (gold) documents among those the run fetched, opened or visited, "
             "or among the search results it was shown; mean over runs. Revisited that are evidence: revisited "
             "documents that are evidence documents, pooled over runs.")]
    per_run = [{"label": p.label, "qid": r.qid, "rep": r.rep, "run_dir": r.run_dir, **e}
               for p in d.profiles for r in d.groups[p.label] if not r.infra_failure and r.qid in d.questions
               if (e := run_evidence(r, d.questions[r.qid])) is not None]
    return Section("BrowseComp-Plus evidence", [(head, table)], notes,
                   metrics={"evidence": rows, "evidence_runs": per_run})


class BrowseCompPlus(QuestionAnswer):
    kind = "browsecomp-plus"
    summary = "browsecomp-plus:DIR — BrowseComp-Plus queries with relevance judgments over its fixed corpus"
    judge_preset = PRESET
    presets = (PLACEHOLDER,)

    def load(self, source: Path, split: str, options: BenchmarkOptions, log: Log | None) -> list[Question]:
        return load_browsecomp_plus(source)

    def world(self, source: Path, corpus_dir: Path | None, log: Log | None, config: RunConfig) -> WorldPlan:
        from .templates import find_prompts_file

        prompts = find_prompts_file(source)
        if log and prompts is None and config.agent.standard.prompts_file is None:
            log(f"{source} has no search_agent/prompts.py (not a clone of texttron/BrowseComp-Plus): the standard "
                "profile uses fte-shell's own wording, not the leaderboard's format (agent.standard.prompts_file)")
        return WorldPlan(corpus=ensure_corpus(source, corpus_dir, log), closed=True, prompts_file=prompts)

    def scripted_task(self, text: str) -> ScriptedTask | None:
        from .templates import scripted_finish, scripted_query

        query = scripted_query(text)
        return None if query is None else ScriptedTask(query=query, finish=scripted_finish)

    def revisions(self, source: Path) -> dict[str, Any]:
        from .pins import data_revisions

        root = Path(source)
        qrels = [p for kind in QREL_FILES if (p := qrels_file(root, kind)) is not None]
        return data_revisions(root, queries_file(root), qrels, corpus_files(root))

    def judge(self, req: JudgeRequest, summary: JudgeSummary) -> None:
        judge_plus(req, summary)

    def report_sections(self) -> Sequence[Placed]:
        return (Placed(official_section, "results"), Placed(evidence_section, "analysis"))


BENCHMARK = BrowseCompPlus()
