"""CLI commands: ``fte-shell corpus retrieve|evaluate|setup-lucene`` — retrieval on its own.

``retrieve`` ranks a query file's queries with one retriever over a corpus and writes a TREC run file;
``evaluate`` scores a run file against qrels (recall@5/100/1000, nDCG@10 by ir-measures);
``setup-lucene`` fetches Anserini's jar for the ``bm25`` retriever once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from ..errors import FteError

_err = Console(stderr=True)

BATCH = 100
"""Queries sent to the retriever at once."""


def _fail(err: Exception) -> typer.Exit:
    _err.print(f"[red]error:[/red] {err}", markup=True, highlight=False, soft_wrap=True)
    return typer.Exit(code=1)


def retrieve(
    corpus: Annotated[Path, typer.Argument(help="Corpus directory (made by `fte-shell corpus build`).")],
    queries: Annotated[Path, typer.Option("--queries", help="Queries: a TSV (qid<TAB>query) or a JSONL "
                                          "({query_id, query}).")],
    out: Annotated[Path, typer.Option("--out", help="The TREC run file to write (qid Q0 docid rank score tag).")],
    retriever: Annotated[str | None, typer.Option("--retriever", help="bm25, bm25s, dense:MODEL, … (default: "
                                                  "[search] retriever).")] = None,
    k: Annotated[int, typer.Option("--k", min=1, max=10000, help="Documents per query.")] = 1000,
    config: Annotated[Path | None, typer.Option("--config", help="TOML config ([search] settings).")] = None,
    tag: Annotated[str | None, typer.Option("--tag", help="The run's tag (default: the retriever).")] = None,
) -> None:
    """Rank every query of a query file and write a TREC run file (the index is built on first use)."""
    from ..config import load_config
    from ..search.retrievers import open_retriever, parse_spec
    from ..search.trec import read_queries, write_run

    try:
        settings = load_config(config).search
        spec = parse_spec(retriever or settings.retriever)
        todo = read_queries(queries)
        with _err.status(f"opening {spec.text} over {corpus} (its index is built once)"):
            ranker = open_retriever(corpus, spec, settings)
        results = []
        with _err.status(f"retrieving {len(todo)} queries with {spec.text}") as status:
            for start in range(0, len(todo), BATCH):
                batch = todo[start:start + BATCH]
                hits = ranker.search_many([q.text for q in batch], k)
                results.extend((q.qid, h) for q, h in zip(batch, hits, strict=True))
                status.update(f"retrieving with {spec.text}: {start + len(batch)}/{len(todo)} queries")
        lines = write_run(out, results, tag or "".join(ranker.name.split()) or "fte-shell")
    except FteError as e:
        raise _fail(e) from None
    _err.print(f"{out}: {lines} lines, {len(todo)} queries, k={k}, retriever {ranker.name}", highlight=False)


def evaluate(
    run: Annotated[Path, typer.Argument(help="A TREC run file (qid Q0 docid rank score tag).")],
    qrels: Annotated[Path, typer.Option("--qrels", help="TREC qrels (qid 0 docid relevance).")],
) -> None:
    """Print recall@5/100/1000 and nDCG@10 of a run (ir-measures; docs/metrics.md)."""
    from ..search.trec import MEASURES, read_qrels, read_run
    from ..search.trec import evaluate as score

    try:
        result = score(read_run(run), read_qrels(qrels))
    except FteError as e:
        raise _fail(e) from None
    for name in MEASURES:
        print(f"{name}\t{result.means[name]:.4f}")
    print(f"queries\t{result.queries}\nanswered\t{result.answered}")


def setup_lucene() -> None:
    """Fetch Anserini's jar for the `bm25` retriever once (from PyPI's pyserini 1.6.0 sdist; sha256-checked)."""
    from ..search.retrievers.lucene_jar import ensure_jar, java_home

    try:
        java_home()
        print(ensure_jar(lambda msg: _err.print(msg, highlight=False)))
    except FteError as e:
        raise _fail(e) from None


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``fte-shell corpus``."""
    from .corpus import corpus_app

    corpus_app.command("retrieve")(retrieve)
    corpus_app.command("evaluate")(evaluate)
    corpus_app.command("setup-lucene")(setup_lucene)
