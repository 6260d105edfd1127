"""Local corpora: bm25s ranking, docid/url lookup, the build's checks, the HotpotQA loader on the real
data, the pydoc corpus and the ``fte-shell corpus`` commands."""

from __future__ import annotations

import html
import json
from pathlib import Path
from urllib.parse import unquote

import pytest
from typer.testing import CliRunner

from fte_shell.cli import app
from fte_shell.errors import SearchUnavailable
from fte_shell.search import LocalCorpus, SearchBackend, format_results
from fte_shell.search.corpus import (
    CorpusDoc,
    CorpusError,
    build_corpus,
    build_corpus_from_jsonl,
    docid_for_title,
    hotpotqa_docs,
    hotpotqa_to_jsonl,
    read_jsonl,
    url_key,
    wikipedia_url,
)
from fte_shell.search.pydoc_corpus import build_pydoc_corpus, pydoc_docs
from fte_shell.workspace import Workspace, canonical_url

DOCS = [
    {"docid": "rust-book", "title": "The Rust Programming Language",
     "text": "Rust is a systems programming language. Ownership and borrowing keep memory safe.",
     "url": "https://doc.rust-lang.org/book/"},
    {"docid": "python-tutorial", "title": "The Python Tutorial",
     "text": "Python is an easy to learn programming language. It has efficient data structures. "
             "The interpreter and the standard library are freely available.",
     "url": "https://docs.python.org/3/tutorial/index.html"},
    {"docid": "koala", "title": "Koala", "text": "The koala is an arboreal herbivorous marsupial native to Australia."},
    {"docid": "eucalyptus", "title": "Eucalyptus",
     "text": "Eucalyptus trees are the main food of the koala. Koalas eat eucalyptus leaves almost exclusively."},
]


@pytest.fixture
def tiny(tmp_path: Path) -> LocalCorpus:
    jsonl = tmp_path / "docs.jsonl"
    jsonl.write_text("".join(json.dumps(d) + "\n" for d in DOCS) + "\n")
    return LocalCorpus(build_corpus_from_jsonl(jsonl, tmp_path / "idx", name="tiny"))


@pytest.fixture(scope="module")
def hotpot(hotpotqa_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> LocalCorpus:
    out = tmp_path_factory.mktemp("hotpot")
    hotpotqa_to_jsonl(hotpotqa_dir, out / "docs.jsonl")
    return LocalCorpus(build_corpus_from_jsonl(out / "docs.jsonl", out / "idx", name="hotpotqa"))


# --- ranking and lookup ----------------------------------------------------------------------------------
def test_bm25_ranking(tiny: LocalCorpus) -> None:
    assert isinstance(tiny, SearchBackend)
    assert len(tiny) == 4 and tiny.name.startswith("local:tiny:")
    res = tiny.search("what does a koala eat? eucalyptus leaves", 10)
    assert [r.url for r in res][:2] == ["eucalyptus", "koala"]
    assert [r.rank for r in res] == list(range(1, len(res) + 1))
    assert "eucalyptus" in res[0].snippet.lower()
    # documents sharing no term with the query are left out; n caps the list
    assert [r.title for r in tiny.search("memory ownership", 10)] == ["The Rust Programming Language"]
    assert len(tiny.search("programming language", 1)) == 1
    assert tiny.search("zzzz qqqq", 5) == [] and tiny.search("the of and", 5) == []
    # a result shows the url when the document has one, else the docid
    assert tiny.search("python tutorial", 1)[0].url == "https://docs.python.org/3/tutorial/index.html"


def test_concurrent_searches_and_lookups(tiny: LocalCorpus) -> None:
    import threading

    expected = (tiny.search("koala eucalyptus", 3), tiny.get("python-tutorial"))
    seen: list[tuple[object, object]] = []

    def work() -> None:
        for _ in range(20):
            seen.append((tiny.search("koala eucalyptus", 3), tiny.get("python-tutorial")))

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 120 and all(s == expected for s in seen)


def test_snippet_is_the_relevant_passage(tiny: LocalCorpus) -> None:
    res = tiny.search("standard library interpreter", 1)
    assert res[0].snippet.startswith("… The interpreter and the standard library")


def test_lookup_by_docid_and_url(tiny: LocalCorpus) -> None:
    doc = tiny.lookup("koala")
    assert doc is not None and (doc.kind, doc.source, doc.title) == ("docid", "koala", "Koala")
    assert doc.text.startswith("The koala is")
    for ref in ("https://docs.python.org/3/tutorial/index.html",
                "HTTPS://Docs.Python.org:443/3/tutorial/index.html#section",
                "https://docs.python.org/3/tutorial/index%2Ehtml"):
        got = tiny.lookup(ref)
        assert got is not None and got.source == "python-tutorial", ref
    assert tiny.lookup("nope") is None
    assert tiny.lookup("https://docs.python.org/3/other.html") is None
    assert tiny.lookup("  ") is None


def test_lookup_feeds_the_workspace(tiny: LocalCorpus, tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws")
    doc = tiny.lookup("https://doc.rust-lang.org/book/")
    assert doc is not None
    rec = ws.store(doc)
    assert rec.new and rec.path.startswith("/work/rust-book-") and rec.source == "rust-book"
    content = (tmp_path / "ws" / rec.path.rsplit("/", 1)[1]).read_text()
    assert content.startswith("Docid: rust-book\nTitle: The Rust Programming Language\nRetrieved: ")
    assert content.endswith("Ownership and borrowing keep memory safe.\n")


def test_rebuild_replaces_and_renames(tmp_path: Path) -> None:
    out = build_corpus([CorpusDoc(docid="a", title="A", text="apple")], tmp_path / "idx")
    first = LocalCorpus(out)
    out = build_corpus([CorpusDoc(docid="b", title="B", text="banana")], tmp_path / "idx")
    second = LocalCorpus(out)
    assert second.get("a") is None and second.get("b") is not None
    assert first.name != second.name  # the fingerprint keeps result caches of the two apart
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx"]  # no build leftovers


# --- build errors ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"docid": "a", "title": "A", "text": "x"}', "{oops"], r"docs.jsonl:2: not valid JSON"),
        (['{"docid": "a", "title": "A"}'], r"docs.jsonl:1: text: Field required"),
        (['{"docid": "a", "title": "A", "text": "x", "extra": 1}'], r"docs.jsonl:1: extra: unknown field"),
        (['{"docid": "a", "title": "A", "text": "x"}', '{"docid": "a", "title": "B", "text": "y"}'],
         r"docs.jsonl:2: duplicate docid 'a'"),
        (['{"docid": "a", "title": "A", "text": "x", "url": "https://x.org/p"}',
          '{"docid": "b", "title": "B", "text": "y", "url": "HTTPS://X.ORG/p"}'], r"also the url of docid 'a'"),
        (['{"docid": "has space", "title": "A", "text": "x"}'], r"invalid docid"),
        ([""], r"the corpus is empty"),
    ],
)
def test_build_rejects_bad_input(tmp_path: Path, lines: list[str], message: str) -> None:
    jsonl = tmp_path / "docs.jsonl"
    jsonl.write_text("\n".join(lines) + "\n")
    with pytest.raises(CorpusError, match=message):
        build_corpus_from_jsonl(jsonl, tmp_path / "idx")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs.jsonl"]  # nothing half-built left


def test_build_never_overwrites_a_foreign_directory(tmp_path: Path) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(CorpusError, match="not a corpus directory"):
        build_corpus([CorpusDoc(docid="a", title="A", text="x")], tmp_path / "mine")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"


def test_open_errors_name_the_fix(tmp_path: Path) -> None:
    with pytest.raises(SearchUnavailable, match="corpus build"):
        LocalCorpus(tmp_path)
    out = build_corpus([CorpusDoc(docid="a", title="Apple", text="an apple a day")], tmp_path / "idx")
    meta = json.loads((out / "meta.json").read_text())
    (out / "meta.json").write_text(json.dumps({**meta, "format": 99}))
    with pytest.raises(SearchUnavailable, match="rebuild it"):
        LocalCorpus(out)


def test_helpers() -> None:
    assert docid_for_title("Michael Jackson (writer)") == "michael-jackson-writer"
    assert docid_for_title("Zürich") == "zurich"
    assert docid_for_title("!!!").startswith("doc-")
    assert wikipedia_url("Michael Jackson (writer)") == "https://en.wikipedia.org/wiki/Michael_Jackson_%28writer%29"
    assert url_key(wikipedia_url("Beer Hunter's")) == url_key("https://en.wikipedia.org/wiki/Beer_Hunter's")


def test_url_key_is_the_canonical_url_decoded() -> None:
    """One canonicalisation (workspace.canonical_url): a corpus URL is found by any spelling a fetch
    would store under the same file, IPv6 literals and user info included."""
    for a, b in [
        ("HTTP://Example.COM:80/Foo_%28bar%29#top", "http://example.com/Foo_(bar)"),
        ("https://EXAMPLE.com:443", "https://example.com/"),
        ("http://[::1]:8080/a%20b?q=1", "http://[::1]:8080/a b?q=1"),
        ("http://u:p@example.com/x", "http://u:p@example.com/x"),
    ]:
        assert url_key(a) == url_key(b) == unquote(canonical_url(b))
    assert url_key(" not%20a url ") == "not a url"  # no absolute URL: itself, decoded


# --- HotpotQA on the real data -----------------------------------------------------------------------------
def test_hotpotqa_unique_titles(hotpotqa_dir: Path, tmp_path: Path) -> None:
    titles: set[str] = set()
    for f in ("dev.jsonl", "test.jsonl"):
        for line in (hotpotqa_dir / f).read_text().splitlines():
            titles.update(t for t, _ in json.loads(line)["context"])
    n = hotpotqa_to_jsonl(hotpotqa_dir, tmp_path / "h.jsonl")
    docs = list(read_jsonl(tmp_path / "h.jsonl"))
    assert n == len(docs) == len(titles) == 5895
    # HTML entities of the data's titles are decoded (no two titles collide when decoded)
    assert len({d.docid for d in docs}) == n and {d.title for d in docs} == {html.unescape(t) for t in titles}
    assert "Bang & Olufsen" in {d.title for d in docs} and not any("&amp;" in d.title + (d.url or "") for d in docs)
    assert all(d.url and d.url.startswith("https://en.wikipedia.org/wiki/") for d in docs)
    assert [d.docid for d in hotpotqa_docs(hotpotqa_dir)][:50] == [d.docid for d in docs][:50]  # deterministic


def test_hotpotqa_supporting_titles_retrievable(hotpot: LocalCorpus, hotpotqa_dir: Path) -> None:
    q = json.loads((hotpotqa_dir / "dev.jsonl").read_text().splitlines()[0])
    supporting = {s[0] for s in q["supporting_facts"]}
    assert len(supporting) == 2
    found = {r.title for r in hotpot.search(q["question"], 10)}
    assert supporting <= found
    for title in supporting:
        doc = hotpot.lookup(wikipedia_url(title))
        assert doc is not None and doc.title == title
        assert hotpot.lookup(f"https://en.wikipedia.org/wiki/{title.replace(' ', '_')}") is not None
        assert hotpot.lookup(docid_for_title(title)) is not None


def test_hotpotqa_missing_dir(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="no HotpotQA files"):
        hotpotqa_to_jsonl(tmp_path, tmp_path / "x.jsonl")


# --- pydoc -----------------------------------------------------------------------------------------------
def test_pydoc_corpus(tmp_path: Path) -> None:
    docs = list(pydoc_docs())
    assert 1500 < len(docs) < 10000
    assert [d.docid for d in docs] == [d.docid for d in pydoc_docs()]  # deterministic
    assert all(" at 0x" not in d.text for d in docs)
    out = build_pydoc_corpus(tmp_path / "pydoc")
    corpus = LocalCorpus(out)
    top = [r.url for r in corpus.search("json dumps serialize obj to a JSON formatted str", 3)]
    assert "json.dumps" in top
    doc = corpus.lookup("json.dumps")
    assert doc is not None and doc.text.startswith("json.dumps(obj, *, skipkeys=False")
    assert "Serialize ``obj`` to a JSON formatted ``str``" in doc.text
    assert corpus.lookup("collections.OrderedDict.move_to_end") is not None
    built = json.loads((out / "meta.json").read_text())["built_at"]
    (out / "marker").write_text("x")
    assert build_pydoc_corpus(tmp_path / "pydoc") == out  # current: reused, not rebuilt
    assert (out / "marker").exists() and json.loads((out / "meta.json").read_text())["built_at"] == built


# --- CLI -------------------------------------------------------------------------------------------------
def test_cli_build_search_show(tmp_path: Path) -> None:
    jsonl = tmp_path / "docs.jsonl"
    jsonl.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    runner = CliRunner()
    r = runner.invoke(app, ["corpus", "build", str(jsonl), "--out", str(tmp_path / "idx")])
    assert r.exit_code == 0, r.output
    assert "4 documents in" in r.output
    r = runner.invoke(app, ["corpus", "search", str(tmp_path / "idx"), "koala", "food", "-n", "2", "--retriever", "bm25s"])
    assert r.exit_code == 0, r.output
    corpus = LocalCorpus(tmp_path / "idx")  # bm25s
    assert r.output.strip() == format_results("koala food", corpus.search("koala food", 2))
    r = runner.invoke(app, ["corpus", "show", str(tmp_path / "idx"), "https://doc.rust-lang.org/book/"])
    assert r.exit_code == 0 and r.output.startswith("Docid: rust-book\nTitle: The Rust Programming Language\n")
    r = runner.invoke(app, ["corpus", "show", str(tmp_path / "idx"), "missing"])
    assert r.exit_code == 1 and "no document with docid or url 'missing'" in r.output
    r = runner.invoke(app, ["corpus", "build", str(tmp_path / "none.jsonl"), "--out", str(tmp_path / "x")])
    assert r.exit_code == 1 and "corpus file not found" in r.output


def test_cli_hotpotqa(hotpotqa_dir: Path, tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["corpus", "hotpotqa", str(hotpotqa_dir), "--out", str(tmp_path / "h"),
                                 "--jsonl", str(tmp_path / "h.jsonl")])
    assert r.exit_code == 0, r.output
    assert "5,895 documents in" in r.output
    assert len(LocalCorpus(tmp_path / "h")) == 5895 and (tmp_path / "h.jsonl").is_file()
