"""CLI commands: ``fte-shell corpus build|hotpotqa|pydoc|search|show`` — local corpora for offline search.

A corpus is a JSONL of ``{docid, title, text, url?}`` (or BrowseComp-Plus's ``{docid, text, url?}``) stored
in a directory, where each retriever builds its index on first use (``--retriever R`` builds it now);
point ``[search] corpus`` (or ``--corpus``) at that directory to search it and to fetch its documents by
docid or url with no network.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from ..errors import FteError

corpus_app = typer.Typer(
    name="corpus",
    help="Build and inspect local corpora (a {docid, title, text, url?} JSONL, searched by a retriever).",
    no_args_is_help=True,
)

_err = Console(stderr=True)
_out = Console()


def _fail(err: Exception) -> typer.Exit:
    _err.print(f"[red]error:[/red] {err}", markup=True, highlight=False, soft_wrap=True)
    return typer.Exit(code=1)


def _progress(label: str) -> Progress:
    return Progress(
        SpinnerColumn(),
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=_err,
        transient=False,
    )


def _count_lines(path: Path) -> int | None:
    try:
        with path.open("rb") as fh:
            return sum(1 for line in fh if line.strip())
    except OSError:
        return None


def _build(jsonl: Path, out: Path, name: str | None) -> Path:
    from ..search.corpus import CorpusError, build_corpus_from_jsonl

    if not jsonl.is_file():
        raise CorpusError(f"corpus file not found: {jsonl}")
    total = _count_lines(jsonl)
    with _progress("indexing") as bar:
        task = bar.add_task("indexing", total=total)
        built = build_corpus_from_jsonl(jsonl, out, name=name, progress=lambda n: bar.update(task, completed=n))
    return built


def _summary(out: Path) -> None:
    from ..search import LocalCorpus

    corpus = LocalCorpus(out)
    _out.print(f"corpus {corpus.meta['name']!r}: {len(corpus):,} documents in {out}", highlight=False)
    _out.print(f"use it with: --corpus {out}   (or [search] corpus = \"{out}\")", highlight=False, markup=False)
    corpus.close()


def _settings(config: Path | None, retriever: str | None) -> Any:
    """The ``[search]`` settings of ``--config`` (its ``[search.embeddings]`` …) with ``retriever`` (None:
    the file's, else the default)."""
    from ..config import load_config

    return load_config(config, {"search": {"retriever": retriever}}).search


def _prebuild(out: Path, retriever: str, config: Path | None) -> None:
    """Build ``retriever``'s index of the corpus in ``out`` now (else it is built on first use)."""
    from ..search.retrievers import build_index, parse_spec

    settings = _settings(config, retriever)
    with _err.status(f"building the {retriever} index"):
        path = build_index(out, parse_spec(retriever), settings)
    _out.print(f"{retriever} index: {path}", highlight=False, markup=False)


@corpus_app.command("build")
def build(
    jsonl: Annotated[Path, typer.Argument(help="Corpus JSONL: one {docid, title, text, url?} object a line.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Index directory to create (replaced if a corpus).")],
    name: Annotated[str | None, typer.Option(help="Corpus name (default: the directory name).")] = None,
    retriever: Annotated[list[str] | None, typer.Option(
        "--retriever", help="Also build this retriever's index now (bm25, bm25s, dense:MODEL, module:attr; "
        "repeatable); else each is built on first use.")] = None,
    config: Annotated[Path | None, typer.Option("--config", "-c", help="Config file ([search.embeddings] "
                      "for a dense retriever).")] = None,
) -> None:
    """Store a corpus JSONL in a directory: rows of {docid, title, text, url?}, or BrowseComp-Plus's own
    {docid, text, url?} (the title is then the text's first line, and retrievers index the text alone)."""
    from ..search.retrievers import kind_of, parse_spec

    try:
        for r in retriever or []:  # an unknown retriever fails before anything is written
            kind_of(parse_spec(r))
        _build(jsonl, out, name)
        _summary(out)
        for r in retriever or []:
            _prebuild(out, r, config)
    except FteError as e:
        raise _fail(e) from None


@corpus_app.command("hotpotqa")
def hotpotqa(
    data_dir: Annotated[
        Path | None,
        typer.Argument(help="HotpotQA data directory with dev.jsonl/test.jsonl (default: $FTE_HOTPOTQA_DIR, "
                       "else $FTE_SHARED_DATA/hotpotqa-amor, else ../shared/data/hotpotqa-amor, else "
                       "the download cache ~/.cache/fte-shell/data/hotpotqa-amor)."),
    ] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="Index directory to create.")] = Path("corpora/hotpotqa"),
    jsonl: Annotated[Path | None, typer.Option(help="Also keep the intermediate corpus JSONL here.")] = None,
    download: Annotated[bool, typer.Option("--download", help="Where the data is absent, download it first from "
                        "its public distribution (the AMOR repository at a pinned commit), sha256-checked.")] = False,
    index: Annotated[bool, typer.Option("--index/--no-index", help="Build the corpus (--no-index: only "
                     "obtain the data, e.g. for the tests).")] = True,
) -> None:
    """Build a corpus of the HotpotQA Wikipedia paragraphs (one document per unique title; CC BY-SA 4.0)."""
    from ..benchmarks.hotpotqa import default_hotpotqa_dir, ensure_hotpotqa_data
    from ..search.corpus import hotpotqa_to_jsonl

    try:
        src = ensure_hotpotqa_data(data_dir, log=lambda m: _err.print(m, highlight=False, soft_wrap=True)) if download else (
            data_dir or default_hotpotqa_dir())
        if not index:
            _out.print(f"HotpotQA data: {src}", highlight=False, soft_wrap=True)
            return
        with tempfile.TemporaryDirectory(prefix="fte-corpus-") as tmp:
            path = jsonl or Path(tmp) / "hotpotqa.jsonl"
            n = hotpotqa_to_jsonl(src, path)
            _err.print(f"{n:,} unique titles read from {src}", highlight=False)
            _build(path, out, "hotpotqa")
        _summary(out)
    except FteError as e:
        raise _fail(e) from None


@corpus_app.command("pydoc")
def pydoc(
    out: Annotated[Path, typer.Option("--out", "-o", help="Index directory to create.")] = Path("corpora/pydoc"),
    force: Annotated[bool, typer.Option(help="Rebuild even if the index is current.")] = False,
) -> None:
    """Build a corpus of the Python standard library's docstrings (offline; used by the demo)."""
    from ..search.pydoc_corpus import build_pydoc_corpus

    try:
        with _err.status("reading the standard library's docstrings and indexing"):
            build_pydoc_corpus(out, force=force)
        _summary(out)
    except FteError as e:
        raise _fail(e) from None


@corpus_app.command("search")
def search(
    corpus: Annotated[Path, typer.Argument(help="Corpus index directory.")],
    query: Annotated[list[str], typer.Argument(help="Query words.")],
    n: Annotated[int, typer.Option("-n", "--num", min=1, max=100, help="Number of results.")] = 10,
    retriever: Annotated[str | None, typer.Option("--retriever", help="What ranks the corpus (default: "
                         "[search] retriever, bm25).")] = None,
    config: Annotated[Path | None, typer.Option("--config", "-c", help="Config file ([search.embeddings]).")] = None,
) -> None:
    """Search a corpus and print the results exactly as the agent sees them."""
    from ..search import LocalCorpus, format_results

    try:
        settings = _settings(config, retriever)
        c = LocalCorpus(corpus, settings.retriever, settings)
        q = " ".join(query)
        print(format_results(q, c.search(q, n)))
    except FteError as e:
        raise _fail(e) from None


@corpus_app.command("show")
def show(
    corpus: Annotated[Path, typer.Argument(help="Corpus index directory.")],
    ref: Annotated[str, typer.Argument(help="A docid, or the url of a document.")],
) -> None:
    """Print one document (title, docid, url, text)."""
    from ..search import LocalCorpus

    try:
        doc = LocalCorpus(corpus).get(ref)
    except FteError as e:
        raise _fail(e) from None
    if doc is None:
        raise _fail(FteError(f"no document with docid or url {ref!r} in {corpus}"))
    print(f"Docid: {doc.docid}\nTitle: {doc.title}" + (f"\nURL: {doc.url}" if doc.url else "") + f"\n\n{doc.text}")


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.add_typer(corpus_app, name="corpus")
