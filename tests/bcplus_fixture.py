"""A small BrowseComp-Plus-format dataset, shaped like a user's clone of the benchmark after its decrypt
script ran: ``data/browsecomp_plus_decrypted.jsonl`` (the queries with their evidence/gold/negative
documents), ``corpus.jsonl`` (``{docid, text, url}``, the corpus columns; parquet on request),
``topics-qrels/qrel_evidence.txt`` and ``qrel_golds.txt`` (TREC qrels, ``qid Q0 docid rel`` as the
benchmark ships them) and ``search_agent/prompts.py``.

The prompts file is written here in fte-shell's OWN wording under the benchmark's variable names
(``QUERY_TEMPLATE``, ``QUERY_TEMPLATE_NO_GET_DOCUMENT``, ``QUERY_TEMPLATE_NO_GET_DOCUMENT_NO_CITATION``,
``GRADER_TEMPLATE``) and placeholders; it starts with an import that fails, so a reader that executed it
instead of parsing it would break. Nothing of the benchmark's text is copied.

Shared by tests (``from bcplus_fixture import make_bcplus_clone``); deterministic for a given ``seed``.
Each question asks for the river of a made-up town, named (even questions: one hop) or through the family
that founded it (odd ones: two hops); its answer is in one gold document, which names the town, and a
second evidence document links the town to the family. Distractor documents reuse
the same vocabulary, so search has to rank.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path

SYLLABLES = ("quor", "zan", "bel", "mir", "tas", "ven", "dor", "lum", "kra", "sil", "pen", "oth", "ral", "fen",
             "gar", "ish", "mol", "ter", "vos", "yal")
FILLER = ("the", "old", "market", "bridge", "valley", "harbour", "festival", "winter", "road", "mill", "council",
          "school", "chapel", "railway", "museum", "orchard", "quarry", "ferry", "tower", "library")
FIRST_DOCID = 10_000

PROMPTS_PY = '''"""Test stand-in for BrowseComp-Plus's search_agent/prompts.py: fte-shell's own wording under the same names."""
import this_module_must_not_be_executed  # noqa: F401  (a reader must parse this file, never import it)

QUERY_TEMPLATE = """
[fixture wording] Answer the question below with the search and get_document tools; call them as often as you need.

Question: {Question}

Reply in exactly this shape:
Explanation: {{why your answer holds, citing the documents you relied on by docid in square brackets, like [20].}}
Exact Answer: {{the short final answer}}
Confidence: {{how sure you are, 0% to 100%}}
""".strip()

QUERY_TEMPLATE_NO_GET_DOCUMENT = """
[fixture wording] Answer the question below with the search tool; call it as often as you need.

Question: {Question}

Reply in exactly this shape:
Explanation: {{why your answer holds, citing the documents you relied on by docid in square brackets, like [20].}}
Exact Answer: {{the short final answer}}
Confidence: {{how sure you are, 0% to 100%}}
""".strip()

QUERY_TEMPLATE_NO_GET_DOCUMENT_NO_CITATION = """
[fixture wording] Answer the question below with the search tool.

Question: {Question}

Reply in exactly this shape:
Explanation: {{why your answer holds}}
Exact Answer: {{the short final answer}}
Confidence: {{how sure you are, 0% to 100%}}
""".strip()

GRADER_TEMPLATE = """
[fixture wording] Decide whether the response answers the question with the correct answer.

[question]: {question}

[response]: {response}

[correct_answer]: {correct_answer}

Write extracted_final_answer, reasoning, correct (yes or no) and confidence, one per line.
""".strip()


def format_query(query, query_template=None):
    raise RuntimeError("never called: fte-shell reads the strings above, it does not run this file")
'''


@dataclass
class BcplusFixture:
    """What :func:`make_bcplus_clone` wrote (for assertions computed by hand)."""

    root: Path
    docs: dict[str, str] = field(default_factory=dict)
    """docid -> text of every corpus document."""
    queries: list[dict] = field(default_factory=list)
    """The query rows as written (``query_id``, ``query``, ``answer``, ``evidence_docs``, ``gold_docs``)."""
    evidence: dict[str, list[str]] = field(default_factory=dict)
    """query_id -> evidence docids (qrels relevance 1)."""
    gold: dict[str, list[str]] = field(default_factory=dict)
    """query_id -> gold docids (qrels relevance 1)."""


def _name(rng: random.Random, parts: int = 3) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(parts)).capitalize()


def _parts(least: int, count: int) -> int:
    """Syllables per name so that ``count`` distinct names fill at most half of the possible ones (the
    fixture's sizes so far keep their names; a larger one gets longer names instead of never finishing)."""
    parts = least
    while len(SYLLABLES) ** parts < 2 * count:
        parts += 1
    return parts


def _filler(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(FILLER) for _ in range(words)) + "."


def make_bcplus_clone(root: Path, *, n_docs: int = 300, n_queries: int = 5, seed: int = 7,
                      corpus: str = "jsonl", prompts: bool = True, qrels: bool = True) -> BcplusFixture:
    """Write the dataset under ``root`` (created) and return what it holds.

    ``corpus``: ``"jsonl"`` (``corpus.jsonl``), ``"parquet"`` (``corpus/*.parquet``, needs pyarrow) or
    ``"none"`` (the documents live only inside the queries file). ``prompts=False`` leaves out
    ``search_agent/prompts.py`` (a clone without the benchmark's templates)."""
    if n_docs < 3 * n_queries:
        raise ValueError(f"n_docs={n_docs} is too small for {n_queries} queries (3 documents each)")
    rng = random.Random(seed)
    fx = BcplusFixture(root=Path(root))
    docids = [str(FIRST_DOCID + 7 * i) for i in range(n_docs)]  # numeric, not contiguous (like the real ones)
    names: list[str] = []  # towns, rivers and founding families: all distinct, so no answer is a clue
    seen: set[str] = set()
    town_parts, other_parts = _parts(3, n_queries), _parts(2, 2 * n_queries)  # any size finishes
    while len(names) < 3 * n_queries:
        if (name := _name(rng, town_parts if len(names) < n_queries else other_parts)) not in seen:
            seen.add(name)
            names.append(name)
    rows = []
    for q, town in enumerate(names[:n_queries]):
        river, clue = names[n_queries + 2 * q], names[n_queries + 2 * q + 1]
        gold_id, ev_id, neg_id = docids[3 * q], docids[3 * q + 1], docids[3 * q + 2]
        fx.docs[gold_id] = (f"---\ntitle: {town}\n---\n# {town}\n{_filler(rng, 30)}\nThe river {river} flows through "
                            f"the town of {town}, past its {rng.choice(FILLER)}.\n{_filler(rng, 200)}")
        fx.docs[ev_id] = (f"{clue} family\nThe {clue} family founded the town of {town} in {1700 + q * 13}.\n"
                          f"{_filler(rng, 80)}")
        fx.docs[neg_id] = f"{clue} festival\nA festival named after {clue} is held elsewhere.\n{_filler(rng, 40)}"
        qid = str(700 + 11 * q)
        query = (f"Which river flows through the town of {town}?" if q % 2 == 0  # one hop: the gold document
                 else f"Which river flows through the town founded by the {clue} family?")  # two hops
        row = {"query_id": qid, "query": query,
               "answer": river,
               "evidence_docs": [{"docid": d, "text": fx.docs[d], "url": f"https://fixture.example/{d}"}
                                 for d in (gold_id, ev_id)],
               "gold_docs": [{"docid": gold_id, "text": fx.docs[gold_id], "url": f"https://fixture.example/{gold_id}"}],
               "negative_docs": [{"docid": neg_id, "text": fx.docs[neg_id], "url": f"https://fixture.example/{neg_id}"}]}
        rows.append(row)
        fx.evidence[qid], fx.gold[qid] = [gold_id, ev_id], [gold_id]
    for d in docids[3 * n_queries:]:
        fx.docs[d] = f"{_name(rng)}\n{_filler(rng, rng.randint(20, 120))}"
    fx.queries = rows
    (fx.root / "data").mkdir(parents=True, exist_ok=True)
    (fx.root / "data" / "browsecomp_plus_decrypted.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    corpus_rows = [{"docid": d, "text": t, "url": f"https://fixture.example/{d}"} for d, t in fx.docs.items()]
    if corpus == "jsonl":
        (fx.root / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus_rows), encoding="utf-8")
    elif corpus == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        (fx.root / "corpus").mkdir(exist_ok=True)
        pq.write_table(pa.Table.from_pylist(corpus_rows), fx.root / "corpus" / "train-00000-of-00001.parquet")
    elif corpus != "none":
        raise ValueError(f"corpus must be jsonl, parquet or none, got {corpus!r}")
    if qrels:
        (fx.root / "topics-qrels").mkdir(exist_ok=True)
        ev_lines = [f"{q} Q0 {d} 1\n" for q, ds in fx.evidence.items() for d in ds]
        ev_lines += [f"{r['query_id']} Q0 {r['negative_docs'][0]['docid']} 0\n" for r in rows]  # judged, not relevant
        (fx.root / "topics-qrels" / "qrel_evidence.txt").write_text("".join(ev_lines), encoding="utf-8")
        (fx.root / "topics-qrels" / "qrel_golds.txt").write_text(
            "".join(f"{q} Q0 {d} 1\n" for q, ds in fx.gold.items() for d in ds), encoding="utf-8")
    if prompts:
        (fx.root / "search_agent").mkdir(exist_ok=True)
        (fx.root / "search_agent" / "prompts.py").write_text(PROMPTS_PY, encoding="utf-8")
    return fx
