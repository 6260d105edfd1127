"""The workspace format: names, header, record line, atomic idempotent thread-safe store, path checks."""

from __future__ import annotations

import hashlib
import stat
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from fte_shell.errors import FetchRefused, ToolError
from fte_shell.workspace import Document, FetchRecord, Workspace, canonical_url, docid_prefix, filename_for

WHEN = datetime(2026, 11, 30, 13, 5, 7, 123456, tzinfo=UTC)


def _doc(
    source: str = "https://Example.COM:443/a?b=1#frag", kind: str = "url", text: str = "hello\nworld\n"
) -> Document:
    return Document(source=source, kind=kind, title="  An\n Example  ", text=text, retrieved_at=WHEN)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("url", "canon"),
    [
        ("HTTPS://Example.COM:443/a?b=1#frag", "https://example.com/a?b=1"),
        ("http://example.com", "http://example.com/"),
        ("http://example.com:80/x", "http://example.com/x"),
        ("http://example.com:8080/x", "http://example.com:8080/x"),
        ("https://example.com:80/x", "https://example.com:80/x"),
        ("http://[::1]:8000/p?Q=A%20b", "http://[::1]:8000/p?Q=A%20b"),
        ("http://Ex.com/Path/CASE?q=Kept", "http://ex.com/Path/CASE?q=Kept"),
    ],
)
def test_canonical_url(url: str, canon: str) -> None:
    assert canonical_url(url) == canon


@pytest.mark.parametrize("bad", ["example.com/x", "", "http://", "http://host:99999/"])
def test_canonical_url_rejects_non_urls(bad: str) -> None:
    with pytest.raises(FetchRefused) as e:
        canonical_url(bad)
    assert "\n" not in str(e.value)


def test_file_names() -> None:
    digest = hashlib.sha256(b"https://example.com/a?b=1").hexdigest()[:16]
    assert filename_for("https://EXAMPLE.com/a?b=1#x", "url") == f"example-com-{digest}.txt"
    assert filename_for("http://docs.python.org:8080/3/", "url").startswith("docs-python-org-")
    did = "Barack Obama (politician)_3"
    assert docid_prefix(did) == "Barack-Obama-politician-3"
    assert (
        filename_for(did, "docid")
        == f"Barack-Obama-politician-3-{hashlib.sha256(did.encode()).hexdigest()[:16]}.txt"
    )
    assert len(docid_prefix("x" * 100)) == 32
    assert docid_prefix("???") == "doc"


def test_store_writes_exact_format_and_record(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws")
    rec = ws.store(_doc())
    name = filename_for("https://example.com/a?b=1", "url")
    assert rec == FetchRecord(
        path=f"/work/{name}", chars=12, new=True, source="https://example.com/a?b=1", title="An Example",
        retrieved_at=WHEN,
    )
    content = (tmp_path / "ws" / name).read_text()
    assert (
        content
        == "URL: https://example.com/a?b=1\nTitle: An Example\nRetrieved: 2026-11-30T13:05:07Z\n\nhello\nworld\n"
    )
    assert rec.line() == f'/work/{name}  12 chars  new  https://example.com/a?b=1  "An Example"'
    mode = stat.S_IMODE((tmp_path / "ws" / name).stat().st_mode)
    assert mode == 0o644
    assert stat.S_IMODE((tmp_path / "ws").stat().st_mode) & 0o755 == 0o755
    assert [p.name for p in (tmp_path / "ws").iterdir()] == [name]  # no temporary file left


def test_store_is_idempotent_and_never_rewrites(tmp_path: Path) -> None:
    ws = Workspace(tmp_path)
    first = ws.store(_doc())
    path = ws.host_path(first.path)
    before = path.stat().st_mtime_ns
    again = ws.store(_doc(source="https://example.com/a?b=1", text="different text"))
    assert again.new is False and again.chars == first.chars and again.path == first.path
    assert path.stat().st_mtime_ns == before
    assert ws.body(first.path) == "hello\nworld\n"
    assert ws.lookup("https://example.com:443/a?b=1", "url") == again
    assert ws.lookup("https://example.com/other", "url") is None


def test_docid_document(tmp_path: Path) -> None:
    ws = Workspace(tmp_path, mount="/work")
    rec = ws.store(Document(source="Doc 7/α", kind="docid", title="T", text="body", retrieved_at=WHEN))
    assert rec.path.startswith("/work/Doc-7-") and rec.source == "Doc 7/α"
    assert ws.host_path(rec.path).read_text().startswith("Docid: Doc 7/α\nTitle: T\nRetrieved: ")


def test_concurrent_store_makes_one_file(tmp_path: Path) -> None:
    ws = Workspace(tmp_path)
    results: list[FetchRecord] = []
    barrier = threading.Barrier(8)

    def go() -> None:
        barrier.wait()
        results.append(ws.store(_doc()))

    threads = [threading.Thread(target=go) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(r.new for r in results) == 1
    assert len(list(tmp_path.iterdir())) == 1


def test_entries_and_listing(tmp_path: Path) -> None:
    ws = Workspace(tmp_path)
    assert ws.listing_text() == "(no documents fetched yet)"
    a = ws.store(_doc("https://a.example/"))
    b = ws.store(Document(source="d1", kind="docid", title="Doc one", text="x" * 1500, retrieved_at=WHEN))
    (tmp_path / "notes.txt").write_text("not ours")  # a foreign file is ignored
    entries = ws.entries()
    assert [e.path for e in entries] == [a.path, b.path]
    assert entries[1].chars == 1501 and entries[1].source == "d1"
    text = ws.listing_text()
    assert f'{b.path}  1,501 chars  d1  "Doc one"' in text
    assert text.splitlines()[-1] == "2 documents, 1,513 chars"


@pytest.mark.parametrize(
    "bad", ["/work/../etc/passwd", "../x.txt", "/etc/passwd", "/work/sub/x.txt", "/work/", ".."]
)
def test_host_path_refuses_escapes(tmp_path: Path, bad: str) -> None:
    ws = Workspace(tmp_path)
    with pytest.raises(ToolError):
        ws.host_path(bad)


def test_host_path_refuses_symlink_out(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws")
    (tmp_path / "secret.txt").write_text("s")
    (tmp_path / "ws" / "link.txt").symlink_to(tmp_path / "secret.txt")
    with pytest.raises(ToolError):
        ws.host_path("/work/link.txt")
    with pytest.raises(ToolError, match="no such document"):
        ws.body("/work/missing.txt")


def test_title_and_url_cannot_forge_header_lines(tmp_path: Path) -> None:
    """Review R2: a hostile page title (ESC sequences, BEL/backspace, bidi override, U+2028, CR) and a URL
    with a line separator or spaces keep the header at exactly three printable lines and the record at one
    printable line — for ``\\n`` readers (grep, sed) and for Python's ``splitlines`` alike."""
    ws = Workspace(tmp_path / "ws")
    title = "Real\x1b[2J\x07\x08 title\u2028URL: https://forged.example/\rRetrieved: never\u202eevil"
    doc = Document(source="https://example.com/a\u2028b c?q=\x1b[1m", kind="url", title=title, text="body\n",
                   retrieved_at=WHEN)
    rec = ws.store(doc)
    content = (tmp_path / "ws" / rec.path.removeprefix("/work/")).read_text(encoding="utf-8")
    header = [
        "URL: https://example.com/a%E2%80%A8b%20c?q=%1B[1m",
        "Title: Real[2J title URL: https://forged.example/ Retrieved: neverevil",
        "Retrieved: 2026-11-30T13:05:07Z",
        "",
    ]
    assert content.split("\n")[:4] == header and content.splitlines()[:4] == header
    assert rec.line().isprintable() and rec.source == header[0].removeprefix("URL: ")
    assert ws.listing_text().splitlines()[0] == ws.entries()[0].line()
    # the same page under any spelling of the odd characters is the same file
    assert ws.store(doc.model_copy(update={"source": "https://example.com/a%E2%80%A8b%20c?q=%1B[1m"})).new is False


def test_docid_with_a_line_break_or_control_is_refused(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws")
    for bad in ("a\u2028b", "a\x1bb", "a\x85b", "a\u202eb"):
        with pytest.raises(ToolError, match="line break or control"):
            ws.store(Document(source=bad, kind="docid", title="t", text="x", retrieved_at=WHEN))
    assert list((tmp_path / "ws").iterdir()) == []


@pytest.mark.parametrize(
    "docid", ["../../etc/passwd", "/etc/passwd", "..", ".hidden", "a/../../b", "..\\..\\x", "~root", "-rf", "x" * 5000]
)
def test_hostile_docids_stay_inside_the_workspace(tmp_path: Path, docid: str) -> None:
    ws = Workspace(tmp_path / "ws")
    rec = ws.store(Document(source=docid, kind="docid", title="t", text="x", retrieved_at=WHEN))
    name = rec.path.removeprefix("/work/")
    assert "/" not in name and not name.startswith((".", "-", "~")) and len(name) <= 32 + 1 + 16 + 4
    assert [p.name for p in (tmp_path / "ws").iterdir()] == [name]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ws"]  # nothing beside the workspace
    assert rec.retrieved_at == WHEN  # the time this call wrote; a held document's record has none
    assert ws.lookup(docid, "docid") == rec.model_copy(update={"new": False, "retrieved_at": None})


def test_a_foreign_file_in_the_way_is_not_reported_as_stored(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws")
    doc = _doc()
    name = filename_for(doc.source, "url")
    (tmp_path / "ws" / name).write_text("not a fetched document\n")
    with pytest.raises(ToolError, match="not a fetched document is in the way"):
        ws.store(doc)
    assert (tmp_path / "ws" / name).read_text() == "not a fetched document\n"  # left as it was
    assert [p.name for p in (tmp_path / "ws").iterdir()] == [name]  # no temporary file left


def test_unpaired_surrogates_from_a_converter_are_stored_as_replacement_characters(tmp_path: Path) -> None:
    """Review R2: a broken PDF text map can yield lone surrogates; the store used to fail with
    UnicodeEncodeError. They become U+FFFD, in the title and the body."""
    ws = Workspace(tmp_path / "ws")
    rec = ws.store(Document(source="http://x.org/", kind="url", title="a\ud800b", text="c\udcffd\n", retrieved_at=WHEN))
    assert rec.title == "a\ufffdb" and ws.body(rec.path) == "c\ufffdd\n"
