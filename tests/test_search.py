"""Search: the one result rendering, the Serper backend against a loopback server speaking its API shape,
the result cache and backend selection."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr

from fte_shell.config import SearchConfig
from fte_shell.errors import SearchUnavailable
from fte_shell.search import (
    CachedSearch,
    LocalCorpus,
    SearchBackend,
    SearchResult,
    format_results,
    make_page_source,
    make_search,
)
from fte_shell.search.corpus import CorpusDoc, build_corpus
from fte_shell.search.serper import SerperSearch, parse_organic
from tests.servers import FakeSerper


@pytest.fixture
def serper() -> Iterator[FakeSerper]:
    srv = FakeSerper()
    yield srv
    srv.close()


def _closed_port_url() -> str:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}/search"


# --- format_results ------------------------------------------------------------------------------------
def test_format_results_blocks() -> None:
    results = [
        SearchResult(1, "json — JSON encoder", "https://docs.python.org/3/library/json.html", "Encode  and\ndecode."),
        SearchResult(2, "Dated", "https://x.example/", "Snippet.", date="2024-05-01"),
        SearchResult(3, "", "some-docid", ""),
    ]
    text = format_results("  python   json ", results)
    assert text.splitlines() == [
        '3 results for "python json":',
        "[1] json — JSON encoder",
        "    https://docs.python.org/3/library/json.html",
        "    Encode and decode.",
        "[2] Dated",
        "    https://x.example/",
        "    2024-05-01 · Snippet.",
        "[3] (untitled)",
        "    some-docid",
    ]


def test_format_results_empty_and_long() -> None:
    assert format_results("nothing here", []) == 'No results for "nothing here".'
    long = SearchResult(1, "T" * 500, "https://x.example/", "word " * 400)
    lines = format_results("q", [long]).splitlines()
    assert len(lines) == 4
    assert len(lines[1]) < 200 and lines[1].endswith("…")
    assert len(lines[3]) <= 4 + 300 and lines[3].endswith("…")


def test_format_results_cannot_forge_lines() -> None:
    """A hostile title, URL or snippet (newlines, ESC, BEL, bidi) stays inside its own one line."""
    r = SearchResult(
        rank=1,
        title="Title\x1b]0;x\x07\n[2] forged",
        url="https://a.example/p\n[9] forged\n    https://evil.example/",
        snippet="snip\u202epet\r\n[3] forged",
    )
    text = format_results("q\nx", [r])
    assert text.splitlines() == [
        '1 result for "q x":',
        "[1] Title]0;x [2] forged",
        "    https://a.example/p [9] forged https://evil.example/",
        "    snippet [3] forged",
    ]


def test_search_result_roundtrip() -> None:
    r = SearchResult(2, "t", "u", "s", "d")
    assert SearchResult.from_dict(r.to_dict()) == r
    assert SearchResult.from_dict({"rank": 1, "title": "t", "url": "u", "snippet": "s"}).date is None


# --- Serper ----------------------------------------------------------------------------------------------
def test_serper_request_shape_and_parsing(serper: FakeSerper) -> None:
    backend = SerperSearch("k-123", url=serper.url)
    assert isinstance(backend, SearchBackend)
    results = backend.search("who wrote beer hunter", 3)
    req = serper.requests[0]
    assert req["path"] == "/search"
    assert req["headers"]["X-API-KEY"] == "k-123"
    assert req["headers"]["Content-Type"].startswith("application/json")
    assert req["body"] == {"q": "who wrote beer hunter", "num": 3}
    assert [(r.rank, r.title, r.url) for r in results] == [
        (1, "First", "https://a.example/1"),
        (2, "Second", "https://b.example/2"),
        (3, "Third", "https://c.example/3"),
    ]
    assert results[0].date == "Mar 3, 2024" and results[1].date is None
    assert "k-123" not in repr(backend)
    assert backend.name == f"serper@127.0.0.1:{serper.url.split(':')[2].split('/')[0]}"
    assert SerperSearch("k").name == "serper"
    backend.close()


def test_serper_retries_429_and_5xx(serper: FakeSerper) -> None:
    serper.queue = [(429, b"{}"), (503, b"{}")]
    backend = SerperSearch("k", url=serper.url, backoff_s=0.01, max_retries=3)
    assert [r.title for r in backend.search("q", 2)] == ["First", "Second"]
    assert len(serper.requests) == 3


def test_serper_honours_retry_after(serper: FakeSerper) -> None:
    # a backoff of 1000 s would stall this test; the server's Retry-After: 0 is what the client waits
    serper.queue = [(429, b"{}", {"Retry-After": "0"})]
    backend = SerperSearch("k", url=serper.url, backoff_s=1000.0, max_retries=1)
    assert len(backend.search("q", 1)) == 1
    assert len(serper.requests) == 2


def test_serper_gives_up_with_a_clear_line(serper: FakeSerper) -> None:
    serper.queue = [(500, b"{}")] * 3
    backend = SerperSearch("k", url=serper.url, backoff_s=0.01, max_retries=2)
    with pytest.raises(SearchUnavailable, match=r"HTTP 500 .*gave up after 3 attempts"):
        backend.search("q", 2)
    assert len(serper.requests) == 3


def test_serper_bad_key_is_not_retried(serper: FakeSerper) -> None:
    serper.queue = [(403, b'{"message": "Unauthorized."}')]
    with pytest.raises(SearchUnavailable, match="rejected the API key.*SERPER_API_KEY"):
        SerperSearch("bad", url=serper.url, backoff_s=0.01).search("q", 2)
    assert len(serper.requests) == 1


def test_serper_not_json(serper: FakeSerper) -> None:
    serper.queue = [(200, b"<html>oops</html>")]
    with pytest.raises(SearchUnavailable, match="not JSON"):
        SerperSearch("k", url=serper.url).search("q", 2)


def test_serper_missing_key_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SERPER_API_KEY", raising=False)
    with pytest.raises(SearchUnavailable) as e:
        SerperSearch(None)
    assert "SERPER_API_KEY" in str(e.value) and "serper_api_key" in str(e.value) and "local corpus" in str(e.value)


def test_serper_unreachable() -> None:
    backend = SerperSearch("k", url=_closed_port_url(), backoff_s=0.01, max_retries=1)
    with pytest.raises(SearchUnavailable, match="unreachable.*gave up after 2 attempts"):
        backend.search("q", 2)


def test_parse_organic_rejects_garbage() -> None:
    with pytest.raises(SearchUnavailable):
        parse_organic(["not", "a", "dict"], 5)
    assert parse_organic({"organic": []}, 5) == []
    assert parse_organic({}, 5) == []


# --- cache ------------------------------------------------------------------------------------------------
def test_cache_memory_then_disk(serper: FakeSerper, tmp_path: Path) -> None:
    first = CachedSearch(SerperSearch("k", url=serper.url), tmp_path / "cache")
    a = first.search("beer  hunter", 3)
    b = first.search("beer hunter", 3)  # same query after whitespace normalization
    assert a == b and len(serper.requests) == 1 and (first.hits, first.misses) == (1, 1)
    path = first.path_for("beer hunter", 3)
    assert path is not None and path.is_file()
    assert json.loads(path.read_text())["query"] == "beer hunter"
    # a new process-like instance (fresh backend, same directory) answers from disk: no request
    second = CachedSearch(SerperSearch("k", url=serper.url), tmp_path / "cache")
    assert second.search("beer hunter", 3) == a
    assert len(serper.requests) == 1
    # a different n is a different key
    second.search("beer hunter", 2)
    assert len(serper.requests) == 2
    assert not list((tmp_path / "cache").rglob("*.tmp"))


def test_cache_recovers_from_a_corrupt_entry(serper: FakeSerper, tmp_path: Path) -> None:
    cache = CachedSearch(SerperSearch("k", url=serper.url), tmp_path)
    cache.search("q", 2)
    path = cache.path_for("q", 2)
    assert path is not None
    path.write_text("{not json")
    fresh = CachedSearch(SerperSearch("k", url=serper.url), tmp_path)
    assert [r.title for r in fresh.search("q", 2)] == ["First", "Second"]
    assert len(serper.requests) == 2
    assert json.loads(path.read_text())["n"] == 2


def test_cache_does_not_keep_errors(serper: FakeSerper) -> None:
    serper.queue = [(400, b"{}")]
    cache = CachedSearch(SerperSearch("k", url=serper.url, backoff_s=0.01))
    with pytest.raises(SearchUnavailable):
        cache.search("q", 2)
    assert len(cache.search("q", 2)) == 2


def test_cache_concurrent_identical_queries_call_once(serper: FakeSerper) -> None:
    cache = CachedSearch(SerperSearch("k", url=serper.url))
    out: list[list[SearchResult]] = []
    threads = [threading.Thread(target=lambda: out.append(cache.search("same", 3))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(serper.requests) == 1 and len(out) == 8 and all(o == out[0] for o in out)


# --- make_search ------------------------------------------------------------------------------------------
@pytest.fixture
def tiny_corpus(tmp_path: Path) -> Path:
    docs = [CorpusDoc(docid="d1", title="Alpha", text="alpha beta gamma"),
            CorpusDoc(docid="d2", title="Delta", text="delta epsilon")]
    return build_corpus(docs, tmp_path / "idx")


def test_make_search_selection(monkeypatch: pytest.MonkeyPatch, serper: FakeSerper, tiny_corpus: Path,
                               tmp_path: Path) -> None:
    monkeypatch.delenv("SERPER_API_KEY", raising=False)
    assert make_search(SearchConfig(backend="none", corpus=tiny_corpus)) is None
    assert make_search(SearchConfig()) is None  # auto: no key, no corpus

    local = make_search(SearchConfig(corpus=tiny_corpus, retriever="bm25s", cache_dir=tmp_path / "c"))
    assert isinstance(local, CachedSearch) and isinstance(local.backend, LocalCorpus)
    assert local.default_n == 10
    assert [r.url for r in local.search("epsilon", 5)] == ["d2"]
    assert list((tmp_path / "c").rglob("*.json"))
    # one corpus per process, shared: closing one run's search leaves it usable for the next
    local.close()
    again = make_search(SearchConfig(corpus=tiny_corpus, retriever="bm25s"))
    assert isinstance(again, CachedSearch) and again.backend is local.backend
    assert again.backend.get("d1") is not None
    assert make_page_source(SearchConfig(corpus=tiny_corpus, retriever="bm25s")) is local.backend
    assert make_page_source(SearchConfig()) is None
    # a rebuilt index is reopened, not served stale
    build_corpus([CorpusDoc(docid="d9", title="Zeta", text="zeta eta theta")], tiny_corpus)
    rebuilt = make_page_source(SearchConfig(corpus=tiny_corpus, retriever="bm25s"))
    assert rebuilt is not None and rebuilt is not local.backend and rebuilt.get("d9") is not None

    web = make_search(SearchConfig(serper_api_key=SecretStr("cfg-key"), serper_url=serper.url, corpus=tiny_corpus))
    assert isinstance(web, CachedSearch) and isinstance(web.backend, SerperSearch)
    web.search("x", 1)
    assert serper.requests[-1]["headers"]["X-API-KEY"] == "cfg-key"

    monkeypatch.setenv("SERPER_API_KEY", "env-key")
    env = make_search(SearchConfig(serper_url=serper.url, num_results=7))
    assert isinstance(env, CachedSearch) and isinstance(env.backend, SerperSearch) and env.default_n == 7
    env.search("y", 1)
    assert serper.requests[-1]["headers"]["X-API-KEY"] == "env-key"


def test_make_search_errors_name_the_fix(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("SERPER_API_KEY", raising=False)
    with pytest.raises(SearchUnavailable, match="SERPER_API_KEY"):
        make_search(SearchConfig(backend="serper"))
    with pytest.raises(SearchUnavailable, match=r"needs a corpus.*corpus build"):
        make_search(SearchConfig(backend="local"))
    with pytest.raises(SearchUnavailable, match=r"no local corpus index at .*corpus build"):
        make_search(SearchConfig(backend="local", corpus=tmp_path / "missing"))
