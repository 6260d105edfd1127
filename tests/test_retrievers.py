"""The retriever seam's glue: spec parsing, indexes built once (threads and processes) into
``DIR/indexes/``, the ``bm25s`` kind (and an earlier version's ``bm25/`` index read as it is), a third-party
kind loaded as ``module:attr``, BrowseComp-Plus's title-less rows, and the bad-input errors."""

from __future__ import annotations

import json
import multiprocessing
import sqlite3
import threading
from pathlib import Path

import pytest

from fte_shell.config import SearchConfig
from fte_shell.errors import ConfigError, SearchUnavailable
from fte_shell.search import LocalCorpus
from fte_shell.search.corpus import (
    DOCS_DB,
    META,
    CorpusDoc,
    CorpusError,
    SqliteTexts,
    build_corpus,
    build_corpus_from_jsonl,
    hotpotqa_docs,
    index_text,
)
from fte_shell.search.retrievers import INDEXES_DIR, build_index, index_path, open_retriever, parse_spec

OVERLAP = "tests.retriever_kinds:OVERLAP"

DOCS = [
    CorpusDoc(docid="koala", title="Koala", text="The koala is an arboreal herbivorous marsupial of Australia."),
    CorpusDoc(docid="kangaroo", title="Kangaroo", text="The kangaroo is a marsupial. Kangaroos hop."),
    CorpusDoc(docid="python", title="Python", text="Python is a programming language.", url="https://python.org/"),
]


def settings(spec: str = "bm25s") -> SearchConfig:
    return SearchConfig(retriever=spec)


# --- spec parsing -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "kind", "arg"), [
    ("bm25", "bm25", ""),
    ("bm25s", "bm25s", ""),
    ("dense:all-MiniLM-L6-v2", "dense", "all-MiniLM-L6-v2"),
    ("dense:openai:Qwen/Qwen3-Embedding-0.6B", "dense", "openai:Qwen/Qwen3-Embedding-0.6B"),
    (" dense:/models/e5 ", "dense", "/models/e5"),
    ("tests.retriever_kinds:OVERLAP", "tests.retriever_kinds:OVERLAP", ""),
    ("tests.retriever_kinds:OVERLAP:3", "tests.retriever_kinds:OVERLAP", "3"),
    ("pkg.mod:Kind:a:b", "pkg.mod:Kind", "a:b"),
])
def test_parse_spec(text: str, kind: str, arg: str) -> None:
    spec = parse_spec(text)
    assert (spec.kind, spec.arg, spec.text) == (kind, arg, text.strip())


@pytest.mark.parametrize("text", ["", "  ", "bm26", "dense:", "not a/module:x", "1abc:KIND"])
def test_parse_spec_refuses(text: str) -> None:
    with pytest.raises(ConfigError, match=r"\[search\] retriever"):
        parse_spec(text)


def test_unknown_or_broken_kind_names_the_setting(tmp_path: Path) -> None:
    corpus = build_corpus(DOCS, tmp_path / "c")
    with pytest.raises(ConfigError, match=r"\[search\] retriever 'nosuch\.module:KIND'.*cannot import"):
        LocalCorpus(corpus, "nosuch.module:KIND")
    with pytest.raises(ConfigError, match="is no retriever kind"):
        LocalCorpus(corpus, "tests.retriever_kinds:OverlapRetriever")
    with pytest.raises(ConfigError, match="bm25s takes no argument"):
        open_retriever(corpus, parse_spec("bm25s:x"), settings())
    assert not (corpus / INDEXES_DIR).exists()


# --- building and opening ---------------------------------------------------------------------------------
def test_bm25s_index_built_once_into_indexes(tmp_path: Path) -> None:
    corpus = build_corpus(DOCS, tmp_path / "c", name="zoo")
    assert json.loads((corpus / META).read_text())["format"] == 2
    assert not (corpus / "bm25").exists() and not (corpus / INDEXES_DIR).exists()  # nothing until first use
    r = open_retriever(corpus, parse_spec("bm25s"), settings())
    assert (corpus / INDEXES_DIR / "bm25s" / "docids.json").is_file()
    assert open_retriever(corpus, parse_spec("bm25s"), settings()) is r  # opened once per process
    hits = r.search("marsupial koala", 5)
    assert [h.docid for h in hits] == ["koala", "kangaroo"]
    assert hits[0].score > hits[1].score > 0
    assert r.search_many(["python language", "the of", "kangaroo"], 5) == [
        r.search("python language", 5), [], r.search("kangaroo", 5)]
    assert [h.docid for h in r.search("kangaroo", 1)] == ["kangaroo"]
    assert not [p for p in (corpus / INDEXES_DIR).iterdir() if p.name.startswith(".") and p.is_dir()]


def _legacy_corpus(docs: list[CorpusDoc], out: Path, name: str) -> Path:
    """A corpus exactly as fte-shell wrote it before retrievers (format 1): docs.sqlite, meta.json without
    ``contents``, and the bm25s index of title + text in ``bm25/``."""
    import bm25s

    built = build_corpus(docs, out, name=name)
    meta = json.loads((built / META).read_text())
    meta = {k: v for k, v in meta.items() if k != "contents"} | {"format": 1}
    (built / META).write_text(json.dumps(meta, indent=2) + "\n")
    tokens = bm25s.tokenize([index_text(d) for d in docs], stopwords="en", return_ids=False, show_progress=False)
    index = bm25s.BM25()
    index.index(tokens, show_progress=False)
    index.save(str(built / "bm25"), show_progress=False)
    return built


def test_old_corpus_bm25_dir_ranks_as_before_with_the_same_name(hotpotqa_dir: Path, tmp_path: Path) -> None:
    docs = [d for _, d in zip(range(800), hotpotqa_docs(hotpotqa_dir), strict=False)]
    old = _legacy_corpus(docs, tmp_path / "old", name="hotpot")
    new = build_corpus(docs, tmp_path / "new", name="hotpot")
    old_c, new_c = LocalCorpus(old), LocalCorpus(new)
    fp8 = json.loads((old / META).read_text())["fingerprint"][:8]
    assert old_c.name == new_c.name == f"local:hotpot:{fp8}"  # the name earlier versions recorded
    assert LocalCorpus(new, OVERLAP).name == f"local:hotpot:{fp8}@{OVERLAP}"
    questions = [json.loads(line)["question"] for line in (hotpotqa_dir / "dev.jsonl").open()][:40]
    for q in questions:
        a, b = old_c.search(q, 5), new_c.search(q, 5)
        assert [(r.docid, r.title, r.url, r.snippet) for r in a] == [(r.docid, r.title, r.url, r.snippet) for r in b]
        assert [r.score for r in a] == pytest.approx([r.score for r in b])
    assert not (old / INDEXES_DIR).exists()  # the old bm25/ was read as it is
    assert index_path(old, parse_spec("bm25s"), settings()) == old / "bm25"
    assert (new / INDEXES_DIR / "bm25s").is_dir()


def test_third_party_kind_by_reference(hotpotqa_dir: Path, tmp_path: Path) -> None:
    docs = [d for _, d in zip(range(300), hotpotqa_docs(hotpotqa_dir), strict=False)]
    corpus = build_corpus(docs, tmp_path / "c")
    c = LocalCorpus(corpus, OVERLAP + ":4")
    target = docs[17]
    results = c.search(target.title, 3)
    assert results and results[0].docid is not None and results[0].score is not None
    best = max(len({w.lower() for w in target.title.split() if len(w) >= 4}), 1)
    assert results[0].score <= best
    assert (corpus / INDEXES_DIR / "overlap-4" / "words.json").is_file()
    assert json.loads((corpus / INDEXES_DIR / "overlap-4" / ".fte-index.json").read_text())["retriever"] == OVERLAP + ":4"


def _build_in_child(corpus: str, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    path = build_index(Path(corpus), parse_spec(OVERLAP), SearchConfig(retriever=OVERLAP))
    out.put(str(path))


def test_one_builder_across_threads_and_processes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = build_corpus(DOCS, tmp_path / "c")
    log = tmp_path / "builds.log"
    monkeypatch.setenv("FTE_TEST_BUILD_LOG", str(log))
    monkeypatch.setenv("FTE_TEST_BUILD_SLOW", "0.3")
    ctx = multiprocessing.get_context("spawn")
    q: multiprocessing.Queue = ctx.Queue()  # type: ignore[type-arg]
    procs = [ctx.Process(target=_build_in_child, args=(str(corpus), q)) for _ in range(2)]
    for p in procs:
        p.start()
    got: list[Path] = []
    threads = [threading.Thread(target=lambda: got.append(build_index(corpus, parse_spec(OVERLAP), settings(OVERLAP))))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    paths = {str(p) for p in got} | {q.get(timeout=5) for _ in procs}
    assert paths == {str(corpus / INDEXES_DIR / "overlap-1")}
    assert len(log.read_text().splitlines()) == 1  # one builder; the others waited and found it built


def test_failed_build_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = build_corpus(DOCS, tmp_path / "c")
    monkeypatch.setenv("FTE_TEST_BUILD_FAIL", "1")
    with pytest.raises(RuntimeError, match="embedder went away"):
        build_index(corpus, parse_spec(OVERLAP), settings(OVERLAP))
    assert [p.name for p in (corpus / INDEXES_DIR).iterdir() if p.is_dir()] == []
    monkeypatch.delenv("FTE_TEST_BUILD_FAIL")
    assert (build_index(corpus, parse_spec(OVERLAP), settings(OVERLAP)) / "words.json").is_file()


def test_unwritable_corpus_names_the_fix(tmp_path: Path) -> None:
    corpus = build_corpus(DOCS, tmp_path / "c")
    (corpus / INDEXES_DIR).write_text("in the way")  # no index directory can be made (even as root)
    with pytest.raises(SearchUnavailable, match=r"cannot build the 'bm25s' index .*--retriever bm25s"):
        build_index(corpus, parse_spec("bm25s"), settings())


# --- BrowseComp-Plus rows and bad input -------------------------------------------------------------------
def test_titleless_rows_index_the_text(tmp_path: Path) -> None:
    src = tmp_path / "bcp.jsonl"
    rows = [{"docid": 101, "text": "Koala facts\nThe koala is a marsupial.", "url": "https://a.example/k"},
            {"docid": "102", "text": "\n  Kangaroo\nKangaroos hop."}]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    corpus = build_corpus_from_jsonl(src, tmp_path / "c")
    meta = json.loads((corpus / META).read_text())
    assert meta["contents"] == "text" and meta["docs"] == 2
    texts = SqliteTexts(corpus)
    assert list(texts.texts()) == [("101", rows[0]["text"]), ("102", rows[1]["text"])]
    assert texts.fingerprint == meta["fingerprint"]
    c = LocalCorpus(corpus)
    assert c.get("101") is not None and c.get("101").title == "Koala facts"  # type: ignore[union-attr]
    assert c.get("102").title == "Kangaroo"  # type: ignore[union-attr]
    assert [r.docid for r in c.search("kangaroos hop", 2)] == ["102"]
    titled = build_corpus([CorpusDoc(docid="101", title="Koala facts", text=rows[0]["text"], url=rows[0]["url"]),
                           CorpusDoc(docid="102", title="Kangaroo", text=rows[1]["text"])], tmp_path / "t")
    assert json.loads((titled / META).read_text())["fingerprint"] != meta["fingerprint"]
    assert json.loads((titled / META).read_text())["contents"] == "title+text"


@pytest.mark.parametrize(("lines", "message"), [
    (['{"docid": "a", "text": "x"}', '{"text": "y"}'], r"bad\.jsonl:2: docid: Field required"),
    (['{"docid": "a", "text": "x"}', '', '{"docid": "a", "text": "y"}'], r"bad\.jsonl:3: duplicate docid 'a'"),
    (['{"docid": "a", "title": "A", "text": "x"}', '{"docid": "a", "title": "B", "text": "y"}'],
     r"bad\.jsonl:2: duplicate docid 'a'"),
    (['{"docid": "a", "text": "x"}', '{"docid": "b", "title": "B", "text": "y"}'], r"bad\.jsonl:2: title: unknown field"),
    (['', '  '], r"bad\.jsonl: the corpus is empty"),
])
def test_bad_rows_name_file_and_line_and_write_nothing(tmp_path: Path, lines: list[str], message: str) -> None:
    src = tmp_path / "bad.jsonl"
    src.write_text("\n".join(lines) + "\n")
    with pytest.raises(CorpusError, match=message):
        build_corpus_from_jsonl(src, tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl"]


def test_sqlite_texts_of_a_titled_corpus(tmp_path: Path) -> None:
    corpus = build_corpus(DOCS, tmp_path / "c")
    assert list(SqliteTexts(corpus).texts()) == [(d.docid, f"{d.title}\n{d.text}") for d in DOCS]
    assert len(SqliteTexts(corpus)) == 3
    db = sqlite3.connect(corpus / DOCS_DB)
    assert db.execute("SELECT COUNT(*) FROM docs").fetchone()[0] == 3
    db.close()


def test_bm25s_refuses_a_corpus_of_stopwords(tmp_path: Path) -> None:
    corpus = build_corpus([CorpusDoc(docid="a", title="A", text="x of the")], tmp_path / "c")
    with pytest.raises(SearchUnavailable, match="no indexable words"):
        open_retriever(corpus, parse_spec("bm25s"), settings())
    assert [p.name for p in (corpus / INDEXES_DIR).iterdir() if p.is_dir()] == []


# --- the config digest -----------------------------------------------------------------------------------
def test_digest_of_the_retriever_and_the_embeddings(tmp_path: Path) -> None:
    from pydantic import SecretStr

    from fte_shell.config import RunConfig
    from fte_shell.config.search import EmbeddingsConfig
    from fte_shell.digest import canonical_config, config_digest

    corpus = build_corpus(DOCS, tmp_path / "c")
    old = RunConfig()
    old.search.corpus = corpus
    old.search.retriever = "bm25s"
    canon = canonical_config(old)["search"]
    assert "retriever" not in canon and "embeddings" not in canon  # as every run before retrievers
    dense = old.model_copy(deep=True)
    dense.search.retriever = "dense:openai:e5"
    assert canonical_config(dense)["search"]["retriever"] == "dense:openai:e5"
    moved = dense.model_copy(deep=True)  # the same embedder elsewhere, with another key and timeouts
    moved.search.embeddings = EmbeddingsConfig(base_url="http://10.0.0.2:8000/v1", api_key=SecretStr("k2"),
                                               timeout_s=5, max_retries=9)
    assert config_digest(moved) == config_digest(dense)
    prefixed = dense.model_copy(deep=True)
    prefixed.search.embeddings = EmbeddingsConfig(query_prefix="query: ")
    assert canonical_config(prefixed)["search"]["embeddings"]["query_prefix"] == "query: "
    web = RunConfig()  # no corpus: nothing for a retriever to rank, whatever it says
    web2 = web.model_copy(deep=True)
    web2.search.retriever = "dense:x"
    assert config_digest(web) == config_digest(web2) and "retriever" not in canonical_config(web)["search"]


def test_a_recorded_config_before_retrievers_is_forked_with_bm25s(tmp_path: Path) -> None:
    from fte_shell.episode.fork import config_over

    old = {"search": {"backend": "local", "corpus": "/c", "num_results": 5}, "agent": {"profile": "fte"}}
    assert config_over(old, environ={}).search.retriever == "bm25s"
    assert config_over({**old, "search": {**old["search"], "retriever": OVERLAP}}, environ={}).search.retriever == OVERLAP
    f = tmp_path / "c.toml"
    f.write_text('[search]\nretriever = "bm25"\n')
    assert config_over(old, config_file=f, environ={}).search.retriever == "bm25"  # given: it wins


def test_corpus_build_prebuilds_and_search_takes_a_retriever(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from fte_shell.cli import app

    src = tmp_path / "bcp.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in [
        {"docid": "1", "text": "Koala\nThe koala eats eucalyptus leaves.", "url": "https://a.example/k"},
        {"docid": "2", "text": "Kangaroo\nKangaroos hop across Australia."}]))
    out = tmp_path / "c"
    runner = CliRunner()
    r = runner.invoke(app, ["corpus", "build", str(src), "--out", str(out), "--retriever", "bm25s",
                            "--retriever", OVERLAP])
    assert r.exit_code == 0, r.output
    assert "2 documents" in r.output
    assert (out / INDEXES_DIR / "bm25s").is_dir() and (out / INDEXES_DIR / "overlap-1").is_dir()
    r = runner.invoke(app, ["corpus", "search", str(out), "kangaroos", "hop", "--retriever", OVERLAP])
    assert r.exit_code == 0 and "[1] Kangaroo" in r.output and "\n    2\n" in r.output, r.output
    r = runner.invoke(app, ["corpus", "build", str(src), "--out", str(tmp_path / "d"), "--retriever", "nosuch"])
    assert r.exit_code == 1 and "unknown retriever" in r.output
    assert not (tmp_path / "d").exists()  # refused before anything was written
