"""FetchService end to end against real loopback servers (tests/servers.py): real Python-docs pages, a
PDF, the exact file and record, idempotence and concurrency on the request log, every refusal, charsets,
budgets, the local corpus and the shared page cache. No internet, no mocks."""

from __future__ import annotations

import gzip
import hashlib
import io
import threading
import time
import zlib
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from fte_shell.config import FetchPolicy
from fte_shell.errors import BudgetExceeded, ConfigError, FetchRefused
from fte_shell.fetch import FetchService, PageCache, PageSource
from fte_shell.workspace import Document, Workspace
from tests.servers import LoopbackServer, self_signed_cert


@pytest.fixture(scope="module")
def srv(pydocs_dir: Path) -> Iterator[LoopbackServer]:
    with LoopbackServer(directory=pydocs_dir) as s:
        yield s


def _service(tmp_path: Path, srv: LoopbackServer, **policy: Any) -> FetchService:
    policy.setdefault("allow_private", [srv.host_port])
    policy.setdefault("timeout_s", 10.0)
    return FetchService(Workspace(tmp_path / "ws"), FetchPolicy(**policy))


def _refused(svc: FetchService, url: str, *fragments: str) -> str:
    with pytest.raises(FetchRefused) as e:
        svc.fetch(url)
    msg = str(e.value)
    assert "\n" not in msg, msg
    for f in fragments:
        assert f in msg, msg
    return msg


def _files(svc: FetchService) -> list[str]:
    return sorted(p.name for p in svc.workspace.root.iterdir())


# --- real pages ---------------------------------------------------------------------------------------
def test_python_docs_page_exact_file_header_and_record(tmp_path: Path, srv: LoopbackServer) -> None:
    svc = _service(tmp_path, srv)
    url = srv.url("/library/re.html") + "#module-re"
    rec = svc.fetch(url)
    canon = srv.url("/library/re.html")
    name = f"127-0-0-1-{hashlib.sha256(canon.encode()).hexdigest()[:16]}.txt"
    assert rec.path == f"/work/{name}" and rec.new and rec.source == canon
    assert (
        rec.title == "re — Regular expression operations — Python 3.11.2 documentation"
        or rec.title.startswith("re — ")
    )
    content = (tmp_path / "ws" / name).read_text()
    lines = content.split("\n")
    assert lines[0] == f"URL: {canon}" and lines[1] == f"Title: {rec.title}"
    retrieved = datetime.strptime(lines[2], "Retrieved: %Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert abs((datetime.now(UTC) - retrieved).total_seconds()) < 3600
    assert lines[3] == ""
    body = "\n".join(lines[4:])
    assert rec.chars == len(body) > 30_000
    assert "re.compile(_pattern_ , _flags =0_)" in body and "```" in body  # signatures and code blocks kept
    assert "Compile a regular expression pattern into a regular expression object" in body
    assert "Table of Contents" not in body  # sidebar navigation is not main content
    assert rec.line() == f'/work/{name}  {rec.chars:,} chars  new  {canon}  "{rec.title}"'


def test_second_fetch_makes_no_request(tmp_path: Path, srv: LoopbackServer) -> None:
    svc = _service(tmp_path, srv)
    path = "/library/csv.html"
    before = srv.count(path)
    first = svc.fetch(srv.url(path))
    assert srv.count(path) == before + 1
    again = svc.fetch(srv.url(path).replace("http://127.0.0.1", "HTTP://127.0.0.1") + "#x")
    assert again.new is False and again.path == first.path and again.chars == first.chars
    assert again.line().split("  ")[2] == "held"
    assert srv.count(path) == before + 1


def test_concurrent_identical_fetches_make_one_request_and_one_file(
    tmp_path: Path, srv: LoopbackServer
) -> None:
    body = Path(srv.directory or "", "library/json.html").read_bytes()
    srv.route("/slow-json.html", body=body, delay_s=0.3)
    svc = _service(tmp_path, srv)
    results: list[Any] = []
    barrier = threading.Barrier(8)

    def go() -> None:
        barrier.wait()
        results.append(svc.fetch(srv.url("/slow-json.html")))

    threads = [threading.Thread(target=go) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert srv.count("/slow-json.html") == 1
    assert sum(r.new for r in results) == 1 and len({r.path for r in results}) == 1
    assert len(_files(svc)) == 1 and svc.new_pages == 1


def test_pdf(tmp_path: Path, srv: LoopbackServer) -> None:
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=A4)
    c.setTitle("Quarterly Otter Census")
    c.drawString(72, 800, "The otter population of the Elbe rose to 1234 in 2025.")
    c.showPage()
    c.drawString(72, 800, "Second page: beavers counted 567.")
    c.save()
    srv.route("/census.pdf", body=buf.getvalue(), content_type="application/pdf")
    srv.route("/census-bin", body=buf.getvalue(), content_type="application/octet-stream")
    svc = _service(tmp_path, srv)
    rec = svc.fetch(srv.url("/census.pdf"))
    assert rec.title == "Quarterly Otter Census"
    body = svc.workspace.body(rec.path)
    assert "otter population of the Elbe rose to 1234" in body and "beavers counted 567" in body
    assert "beavers counted 567" in svc.workspace.body(svc.fetch(srv.url("/census-bin")).path)  # sniffed


def test_text_json_xml_as_text(tmp_path: Path, srv: LoopbackServer) -> None:
    srv.route("/notes.txt", body="line one\nline two\n", content_type="text/plain; charset=utf-8")
    srv.route(
        "/data.json",
        body='{"name":"Ada","born":1815,"tags":["math","poetry"]}',
        content_type="application/json",
    )
    srv.route(
        "/feed.xml",
        body="<?xml version='1.0'?><feed><title>Hi</title></feed>",
        content_type="application/atom+xml",
    )
    svc = _service(tmp_path, srv)
    assert svc.workspace.body(svc.fetch(srv.url("/notes.txt")).path) == "line one\nline two\n"
    rec = svc.fetch(srv.url("/data.json"))
    assert rec.title == "data.json" and '"born": 1815' in svc.workspace.body(rec.path)
    assert "<title>Hi</title>" in svc.workspace.body(svc.fetch(srv.url("/feed.xml")).path)


# --- charsets -----------------------------------------------------------------------------------------
def test_latin1_and_shift_jis_pages_decode_right(tmp_path: Path, srv: LoopbackServer) -> None:
    latin = "<html><head><title>Café</title></head><body><main><p>Crème brûlée à Zürich, Ærøskøbing.</p></main></body></html>"
    srv.route("/latin1-header", body=latin.encode("latin-1"), content_type="text/html; charset=ISO-8859-1")
    meta = latin.replace(
        "<head>", '<head><meta http-equiv="Content-Type" content="text/html; charset=iso-8859-1">'
    )
    srv.route("/latin1-meta", body=meta.encode("latin-1"), content_type="text/html")
    jp = "東京都は日本の首都であり、人口は約千四百万人です。"
    sjis_html = f'<html><head><meta charset="Shift_JIS"><title>日本語</title></head><body><article><p>{jp}</p></article></body></html>'
    srv.route("/sjis-meta", body=sjis_html.encode("shift_jis"), content_type="text/html")
    srv.route("/sjis-header", body=sjis_html.encode("shift_jis"), content_type="text/html; charset=Shift_JIS")
    srv.route("/sjis-detect", body=(jp * 20).encode("shift_jis"), content_type="text/plain")
    svc = _service(tmp_path, srv)
    for path in ("/latin1-header", "/latin1-meta"):
        rec = svc.fetch(srv.url(path))
        assert rec.title == "Café" and "Crème brûlée à Zürich, Ærøskøbing." in svc.workspace.body(rec.path)
    for path in ("/sjis-meta", "/sjis-header"):
        rec = svc.fetch(srv.url(path))
        assert rec.title == "日本語" and jp in svc.workspace.body(rec.path)
    assert jp in svc.workspace.body(svc.fetch(srv.url("/sjis-detect")).path)


# --- refusals -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("file:///etc/passwd", "scheme file:"),
        ("ftp://127.0.0.1/x", "scheme ftp:"),
        ("http://[::1]/", "loopback"),
        ("http://169.254.169.254/latest/meta-data/", "cloud metadata"),
        ("http://[::ffff:127.0.0.1]/", "loopback"),
        ("http://0x7f000001/", "loopback"),
        ("http://localhost/", "host localhost resolves to"),
        ("not a url", "not a URL"),
    ],
)
def test_refused_addresses_write_nothing(tmp_path: Path, srv: LoopbackServer, url: str, reason: str) -> None:
    svc = _service(tmp_path, srv)
    before = srv.count()
    _refused(svc, url, reason)
    assert _files(svc) == [] and srv.count() == before


def test_loopback_server_refused_without_allow_private(tmp_path: Path, srv: LoopbackServer) -> None:
    svc = _service(tmp_path, srv, allow_private=[])
    before = srv.count()
    _refused(svc, srv.url("/library/re.html"), "127.0.0.1 is a loopback address")
    assert srv.count() == before and _files(svc) == []


def test_redirects(tmp_path: Path, srv: LoopbackServer) -> None:
    srv.redirect("/to-csv", "/library/csv.html", status=301)
    srv.redirect("/to-private", "http://10.255.255.1/secret")
    srv.redirect("/to-metadata", "http://169.254.169.254/latest/meta-data/")
    with LoopbackServer() as other:  # loopback too, but a port that is not allow-listed
        other.route("/x", body="private data")
        srv.redirect("/to-other-port", other.url("/x"))
        srv.redirect("/to-file", "file:///etc/passwd")
        for i in range(4):
            srv.redirect(f"/hop{i}", f"/hop{i + 1}")
        srv.route("/hop4", body="<p>end of the chain</p>")
        svc = _service(tmp_path, srv, max_redirects=3)
        rec = svc.fetch(srv.url("/to-csv"))
        assert rec.source == srv.url("/to-csv") and "CSV" in rec.title
        _refused(svc, srv.url("/to-private"), "10.255.255.1 is a private address")
        _refused(svc, srv.url("/to-metadata"), "cloud metadata")
        _refused(svc, srv.url("/to-other-port"), "loopback")
        _refused(svc, srv.url("/to-file"), "scheme file:")
        _refused(svc, srv.url("/hop0"), "too many redirects (more than 3)")
        assert other.count() == 0
        assert srv.count("/hop3") == 1 and srv.count("/hop4") == 0
        assert _files(svc) == [Path(rec.path).name]
        svc4 = _service(tmp_path / "b", srv, max_redirects=4)
        assert "end of the chain" in svc4.workspace.body(svc4.fetch(srv.url("/hop0")).path)


def test_one_gigabyte_body_is_cut_without_being_read(tmp_path: Path, srv: LoopbackServer) -> None:
    produced = {"chunked": 0, "sized": 0}
    finished = threading.Event()

    def gigabyte(key: str) -> Iterator[bytes]:
        chunk = b"<p>" + b"x" * 65_530 + b"</p>"
        try:
            for _ in range((1 << 30) // len(chunk)):
                produced[key] += len(chunk)
                yield chunk
        finally:
            finished.set()

    srv.route("/gig-chunked", body=lambda: gigabyte("chunked"))
    srv.route("/gig-sized", body=lambda: gigabyte("sized"), length=1 << 30)
    svc = _service(tmp_path, srv, max_bytes=1_000_000)
    _refused(svc, srv.url("/gig-sized"), "1,073,741,824 bytes declared", "max_bytes")
    _refused(svc, srv.url("/gig-chunked"), "more than 1,000,000 bytes", "max_bytes")
    finished.wait(30)  # the server stops producing once the client has gone
    assert produced["chunked"] < 100_000_000 and produced["sized"] < 100_000_000
    assert _files(svc) == []


def test_server_that_never_answers_times_out(tmp_path: Path, srv: LoopbackServer) -> None:
    srv.route("/hang", hang=True)
    svc = _service(tmp_path, srv, timeout_s=0.5)
    _refused(svc, srv.url("/hang"), "timed out after 0.5 s")
    assert _files(svc) == []


def test_trickling_server_is_cut_at_the_deadline(tmp_path: Path, srv: LoopbackServer) -> None:
    stop = threading.Event()

    def trickle() -> Iterator[bytes]:
        yield b"<html><body><p>"
        while not stop.wait(0.2):
            yield b"x"

    srv.route("/trickle", body=trickle)
    svc = _service(tmp_path, srv, timeout_s=1.0)
    try:
        _refused(svc, srv.url("/trickle"), "timed out after 1 s")
    finally:
        stop.set()
    assert _files(svc) == []


def test_gzip_bomb_is_contained(tmp_path: Path, srv: LoopbackServer) -> None:
    comp = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = b"\0" * 1_000_000
    bomb = b"".join(comp.compress(zeros) for _ in range(200)) + comp.flush()  # 200 MB inflated
    assert len(bomb) < 1_000_000
    srv.route("/bomb", body=bomb, content_type="text/plain", headers={"Content-Encoding": "gzip"})
    srv.route(
        "/small-gz",
        body=gzip.compress(b"compressed hello\n" * 10),
        content_type="text/plain",
        headers={"Content-Encoding": "gzip"},
    )
    svc = _service(tmp_path, srv, max_bytes=2_000_000)
    _refused(svc, srv.url("/bomb"), "decompressed body too large", "2,000,000 bytes")
    rec = svc.fetch(srv.url("/small-gz"))
    assert svc.workspace.body(rec.path).count("compressed hello") == 10


@pytest.mark.parametrize(
    ("path", "status", "ctype", "reason"),
    [
        ("/img.png", 200, "image/png", "unsupported content type image/png"),
        ("/zip", 200, "application/zip", "unsupported content type application/zip"),
        ("/bin", 200, "application/octet-stream", "unsupported content type application/octet-stream"),
        ("/missing", 404, "text/html", "HTTP 404 Not Found"),
        ("/boom", 500, "text/html", "HTTP 500 Internal Server Error"),
    ],
)
def test_status_and_type_refusals(
    tmp_path: Path, srv: LoopbackServer, path: str, status: int, ctype: str, reason: str
) -> None:
    srv.route(
        path,
        status=status,
        body=b"\x89PNG\r\n\x1a\n\x00\x00" if status == 200 else b"<h1>error</h1>",
        content_type=ctype,
    )
    svc = _service(tmp_path, srv)
    _refused(svc, srv.url(path), reason, srv.url(path))
    assert _files(svc) == []


def test_untrusted_tls_certificate_is_refused(tmp_path: Path) -> None:
    with LoopbackServer(tls=self_signed_cert(tmp_path)) as tls_srv:
        tls_srv.route("/secret", body="<p>never shown</p>")
        svc = FetchService(
            Workspace(tmp_path / "ws"), FetchPolicy(allow_private=[tls_srv.host_port], timeout_s=10)
        )
        _refused(svc, tls_srv.url("/secret"), "TLS error", "CERTIFICATE_VERIFY_FAILED")
        assert tls_srv.count() == 0 and _files(svc) == []


# --- budgets ------------------------------------------------------------------------------------------
def test_page_budget(tmp_path: Path, srv: LoopbackServer) -> None:
    svc = _service(tmp_path, srv, max_fetches=2)
    a = svc.fetch(srv.url("/library/csv.html"))
    svc.fetch(srv.url("/library/json.html"))
    with pytest.raises(BudgetExceeded, match=r"page budget spent: 2 new pages .*max_fetches = 2"):
        svc.fetch(srv.url("/library/re.html"))
    assert svc.fetch(a.source).new is False  # held pages stay reachable
    assert len(_files(svc)) == 2


def test_byte_budget(tmp_path: Path, srv: LoopbackServer) -> None:
    svc = _service(tmp_path, srv, max_total_bytes=300_000)
    svc.fetch(srv.url("/library/csv.html"))  # ~70 KB
    with pytest.raises(BudgetExceeded, match="max_total_bytes"):
        svc.fetch(srv.url("/library/stdtypes.html"))  # ~600 KB
    assert len(_files(svc)) == 1 and svc.bytes_downloaded < 300_000


def test_request_budget_counts_failed_downloads(tmp_path: Path, srv: LoopbackServer) -> None:
    srv.route("/gone-a", status=404, body=b"<h1>no</h1>", content_type="text/html")
    srv.route("/gone-b", status=404, body=b"<h1>no</h1>", content_type="text/html")
    svc = _service(tmp_path, srv, max_requests=2)
    before = srv.count()
    _refused(svc, srv.url("/gone-a"), "HTTP 404")
    _refused(svc, srv.url("/gone-b"), "HTTP 404")
    with pytest.raises(BudgetExceeded, match=r"request budget spent: 2 downloads attempted .*max_requests = 2"):
        svc.fetch(srv.url("/library/csv.html"))
    assert srv.count() - before == 2  # the third fetch made no request
    assert svc.attempts == 2 and _files(svc) == []


def test_zero_request_budget_is_a_config_error(tmp_path: Path, srv: LoopbackServer) -> None:
    with pytest.raises(ConfigError, match="fetch_policy.max_requests must be greater than 0"):
        _service(tmp_path, srv, max_requests=0)


# --- local corpus, page cache, get_document -----------------------------------------------------------
class _Corpus:
    """A tiny in-memory PageSource."""

    def __init__(self) -> None:
        self.docs = {
            "Ada_Lovelace": Document(
                source="Ada_Lovelace",
                kind="docid",
                title="Ada Lovelace",
                text="Ada Lovelace wrote the first program.",
                retrieved_at=datetime(2026, 1, 1, tzinfo=UTC),
            )
        }
        self.urls = {"http://wiki.invalid/Ada": "Ada_Lovelace"}

    def lookup(self, ref: str) -> Document | None:
        return self.docs.get(self.urls.get(ref, ref))


def test_local_corpus_needs_no_http(tmp_path: Path, srv: LoopbackServer) -> None:
    corpus = _Corpus()
    assert isinstance(corpus, PageSource)
    svc = FetchService(Workspace(tmp_path), FetchPolicy(), local=corpus)
    rec = svc.fetch("Ada_Lovelace")
    assert rec.new and rec.source == "Ada_Lovelace" and Path(rec.path).name.startswith("Ada-Lovelace-")
    assert (
        (tmp_path / Path(rec.path).name)
        .read_text()
        .startswith("Docid: Ada_Lovelace\nTitle: Ada Lovelace\nRetrieved: 2026-01-01T00:00:00Z\n\n")
    )
    by_url = svc.fetch("http://wiki.invalid/Ada")  # the corpus knows the URL: same Docid file, no HTTP
    assert by_url.path == rec.path and by_url.new is False
    with pytest.raises(FetchRefused, match="not an id in the local corpus"):
        svc.fetch("No_Such_Doc")
    assert svc.get_document("Ada_Lovelace").title == "Ada Lovelace"


def test_page_cache_gives_byte_identical_files_across_services(tmp_path: Path, srv: LoopbackServer) -> None:
    cache = PageCache(tmp_path / "pages")
    path = "/library/datetime.html"
    before = srv.count(path)
    policy = FetchPolicy(allow_private=[srv.host_port])
    one = FetchService(Workspace(tmp_path / "shell"), policy, page_cache=cache)
    two = FetchService(Workspace(tmp_path / "fte"), policy, page_cache=cache)
    r1 = one.fetch(srv.url(path))
    time.sleep(1.1)  # a later second: the snapshot keeps its own retrieval time
    r2 = two.fetch(srv.url(path))
    assert srv.count(path) == before + 1 and r2.new
    assert one.workspace.host_path(r1.path).read_bytes() == two.workspace.host_path(r2.path).read_bytes()


def test_get_document_writes_nothing_and_is_remembered(tmp_path: Path, srv: LoopbackServer) -> None:
    svc = _service(tmp_path, srv)
    path = "/library/functions.html"
    before = srv.count(path)
    doc = svc.get_document(srv.url(path))
    assert doc.kind == "url" and "abs(_x_)" in doc.text and _files(svc) == []
    assert svc.get_document(srv.url(path)) == doc and srv.count(path) == before + 1
    assert svc.fetch(srv.url(path)).new and srv.count(path) == before + 1


def test_bad_references(tmp_path: Path, srv: LoopbackServer, monkeypatch: pytest.MonkeyPatch) -> None:
    svc = _service(tmp_path, srv)
    for ref, reason in (
        ("", "nothing to fetch"),
        ("   ", "nothing to fetch"),
        ("http://a\nb", "control characters"),
    ):
        _refused(svc, ref, reason)
    monkeypatch.setenv("FTE_CHROMIUM", str(tmp_path / "no-such-chromium"))
    with pytest.raises(ConfigError, match="render_js needs a chromium"):
        FetchService(Workspace(tmp_path / "js"), FetchPolicy(render_js=True))


def test_page_cache_round_trip_and_bad_entries(tmp_path: Path) -> None:
    cache = PageCache(tmp_path / "pc")
    doc = Document(
        source="https://example.com/a",
        kind="url",
        title="T",
        text="body",
        retrieved_at=datetime(2026, 1, 1, tzinfo=UTC),
    )
    assert cache.get("https://example.com/a") is None
    cache.put("https://EXAMPLE.com:443/a#frag", doc)
    assert cache.get("https://example.com/a") == doc
    assert [p.suffix for p in (tmp_path / "pc").iterdir()] == [".json"]  # no temporary file left
    next((tmp_path / "pc").iterdir()).write_text("{not json")
    assert cache.get("https://example.com/a") is None  # a damaged entry is a miss, not a crash


def test_deny_hosts_also_holds_for_cached_pages(tmp_path: Path, srv: LoopbackServer) -> None:
    cache = PageCache(tmp_path / "pages")
    open_policy = FetchPolicy(allow_private=[srv.host_port])
    FetchService(Workspace(tmp_path / "a"), open_policy, page_cache=cache).fetch(srv.url("/library/csv.html"))
    strict = FetchPolicy(allow_private=[srv.host_port], deny_hosts=["127.0.0.1"])
    svc = FetchService(Workspace(tmp_path / "b"), strict, page_cache=cache)
    _refused(svc, srv.url("/library/csv.html"), "matches deny_hosts pattern '127.0.0.1'")
    with pytest.raises(FetchRefused, match="deny_hosts"):
        svc.get_document(srv.url("/library/csv.html"))
    assert _files(svc) == []


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_bytes", 0),
        ("timeout_s", -1.0),
        ("max_fetches", 0),
        ("max_total_bytes", 0),
        ("max_redirects", -1),
    ],
)
def test_unusable_policy_is_a_config_error(tmp_path: Path, field: str, value: float) -> None:
    with pytest.raises(ConfigError, match=f"fetch_policy.{field} must be"):
        FetchService(Workspace(tmp_path), FetchPolicy(**{field: value}))
    with pytest.raises(ConfigError, match="allow_private entry"):
        FetchService(Workspace(tmp_path), FetchPolicy(allow_private=["http://127.0.0.1/"]))
