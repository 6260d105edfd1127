"""``fte-shell corpus serve DIR --retriever R``: a corpus as a Search-R1 retrieval endpoint
(:mod:`fte_shell.search.r1server`), so the RL recipes that call ``POST /retrieve`` (Search-R1, verl's
``search_r1_like`` tool, SkyRL, slime, verifiers' ``vf_search_r1``) train against fte-shell's corpora and
retrievers."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated

import typer

from ..errors import FteError
from .corpus import _err, _fail, corpus_app


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@corpus_app.command("serve")
def serve(
    corpus: Annotated[Path, typer.Argument(help="Corpus index directory (made by `fte-shell corpus build`).")],
    retriever: Annotated[
        str | None,
        typer.Option("--retriever", help="bm25, bm25s, dense:MODEL, dense:openai:MODEL or module:attr "
                     "(default: [search] retriever)."),
    ] = None,
    host: Annotated[str, typer.Option("--host", help="Address to listen on (loopback by default).")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port (0: any free one).")] = 8000,
    topk: Annotated[int, typer.Option("--topk", min=1, max=1000, help="Results per query when a request "
                                      "gives no topk (Search-R1's default: 3).")] = 3,
    config: Annotated[Path | None, typer.Option("--config", help="TOML config ([search] and "
                                                "[search.embeddings]).")] = None,
) -> None:
    """Answer Search-R1's `POST /retrieve {queries, topk, return_scores}` over a local corpus."""
    from ..config import load_config
    from ..search import LocalCorpus
    from ..search.r1server import R1Server
    from ..search.retrievers import open_retriever, parse_spec

    try:
        settings = load_config(config).search
        spec = parse_spec(retriever or settings.retriever)
        docs = LocalCorpus(corpus)
        ranker = open_retriever(corpus, spec, settings)
        server = R1Server(ranker, docs.get, host=host, port=port, default_topk=topk, docs=len(docs))
    except (FteError, OSError) as e:
        raise _fail(e) from None
    if not _loopback(host):
        _err.print(f"warning: {host} is not a loopback address: anyone who reaches it can query this corpus "
                   "(there is no authentication)", markup=False, highlight=False)
    # the one line a supervising script waits for (it names the port when --port 0 chose one)
    print(f"serving {spec.text} over {corpus} ({len(docs):,} documents) at {server.url}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
        ranker.close()
        docs.close()
