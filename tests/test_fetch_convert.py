"""Conversion quality on real Python-docs pages, and the content-type / charset rules.

Our HTML path feeds crawl4ai's html2text converter straight from the lxml tree instead of going through
crawl4ai's scraper and html.parser (see fte_shell/fetch/convert.py). These tests check that the text does
not lose quality: word precision/recall vs the page's main content ≥ 0.95, the same words as crawl4ai's
own converters as used by ``convert.crawl4ai_reference``, code blocks and tables kept.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from fte_shell.errors import FetchRefused
from fte_shell.fetch import convert, decode, pool

PAGES = [
    "library/re.html",
    "library/csv.html",
    "library/functions.html",
    "library/stdtypes.html",
    "tutorial/introduction.html",
]
_WORD = re.compile(r"[^\W_]+")


def _words(text: str) -> Counter[str]:
    return Counter(w.lower() for w in _WORD.findall(text))


def _precision_recall(reference: Counter[str], got: Counter[str]) -> tuple[float, float]:
    common = sum((reference & got).values())
    return common / max(1, sum(got.values())), common / max(1, sum(reference.values()))


def _main_content_words(html: str) -> Counter[str]:
    from lxml import html as lhtml

    doc = lhtml.fromstring(html)
    main = doc.cssselect('[role="main"]')[0]
    for el in main.xpath(".//script|.//style"):
        el.drop_tree()
    return _words(main.text_content())


@pytest.mark.parametrize("page", PAGES)
def test_text_quality_on_python_docs(pydocs_dir: Path, page: str) -> None:
    html = (pydocs_dir / page).read_text(encoding="utf-8")
    title, text = convert.html_to_text(html, "http://docs.invalid/" + page)
    assert title.endswith("Python 3.11.2 documentation") or "documentation" in title
    p, r = _precision_recall(_main_content_words(html), _words(text))
    assert p >= 0.95 and r >= 0.95, (page, p, r)
    p2, r2 = _precision_recall(_words(convert.crawl4ai_reference("http://docs.invalid/" + page, html)), _words(text))
    assert p2 >= 0.99 and r2 >= 0.99, (page, p2, r2)


def test_code_blocks_and_tables_are_kept(pydocs_dir: Path) -> None:
    _, re_text = convert.html_to_text((pydocs_dir / "library/re.html").read_text(encoding="utf-8"))
    assert re_text.count("```") >= 20 and ">>> m = re.search('(?<=abc)def', 'abcdef')" in re_text
    _, std = convert.html_to_text((pydocs_dir / "library/stdtypes.html").read_text(encoding="utf-8"))
    # the table of boolean operations: header row, separator, cells
    assert re.search(r"\|\s*Operation\s*\|\s*Result\s*\|", std)
    assert "| --- |" in std and "`x or y`" in std
    assert "Table of Contents" not in std and "Navigation" not in std


def test_excluded_tags_selector_and_title_fallbacks() -> None:
    html = """<html><head><title> Page  T </title><style>.x{}</style></head><body>
      <nav>Home | About</nav><header>Site header</header>
      <main><h1>Heading</h1><p>Kept paragraph with <code>inline_code()</code>.</p>
        <form><input value="search"><p>form text</p></form><script>var secret = 1;</script>
        <article><p>Nested article text.</p></article></main>
      <footer>Copyright footer</footer></body></html>"""
    title, text = convert.html_to_text(html)
    assert title == "Page  T"
    assert "Kept paragraph with `inline_code()`." in text and "# Heading" in text
    assert text.count("Nested article text.") == 1  # a selected element inside another is not repeated
    for gone in ("Home | About", "Site header", "form text", "secret", "Copyright footer", ".x{}"):
        assert gone not in text
    og, _ = convert.html_to_text(
        '<html><head><meta property="og:title" content="OG T"></head><body><p>x</p></body></html>'
    )
    h1, body = convert.html_to_text("<body><h1>Only H1</h1><p>whole body used</p></body>")
    assert og == "OG T" and h1 == "Only H1" and "whole body used" in body
    assert convert.html_to_text("") == ("", "")


@pytest.mark.parametrize(
    ("ctype", "head", "kind"),
    [
        ("text/html", b"", "html"),
        ("application/xhtml+xml", b"", "html"),
        ("application/pdf", b"", "pdf"),
        ("text/plain", b"", "text"),
        ("text/csv", b"", "text"),
        ("application/json", b"", "text"),
        ("application/ld+json", b"", "text"),
        ("application/rss+xml", b"", "text"),
        ("application/octet-stream", b"%PDF-1.7\n", "pdf"),
        (None, b"  <!DOCTYPE html><html>", "html"),
        (None, b"plain words", "text"),
    ],
)
def test_classify(ctype: str | None, head: bytes, kind: str) -> None:
    assert decode.classify(ctype, head) == kind


@pytest.mark.parametrize(
    ("ctype", "head"),
    [
        ("image/png", b""),
        ("video/mp4", b""),
        ("application/octet-stream", b"\x00\x01"),
        (None, b"\x00\x01bin"),
    ],
)
def test_classify_refuses_naming_the_type(ctype: str | None, head: bytes) -> None:
    with pytest.raises(FetchRefused, match="unsupported content type") as e:
        decode.classify(ctype, head, "http://x.invalid/f")
    assert (ctype or "(none") in str(e.value) and "http://x.invalid/f" in str(e.value)


def test_decode_text_rules() -> None:
    assert decode.decode_text("café".encode("latin-1"), "iso-8859-1", html=False) == "café"
    assert (
        decode.decode_text("“smart”".encode("cp1252"), "latin1", html=False) == "“smart”"
    )  # WHATWG: latin1 = cp1252
    sjis = '<meta charset="shift_jis"><p>日本語のテキスト</p>'.encode("shift_jis")
    assert "日本語のテキスト" in decode.decode_text(sjis, None, html=True)
    assert decode.decode_text("ünïcödé".encode(), None, html=False) == "ünïcödé"
    assert decode.decode_text(b"\xef\xbb\xbfbom", "latin-1", html=False) == "bom"
    assert decode.decode_text("naïve".encode(), "no-such-charset", html=False) == "naïve"
    assert (
        decode.meta_charset(b'<meta http-equiv="Content-Type" content="text/html; charset=EUC-JP">')
        == "EUC-JP"
    )


def test_pool_conversion_reports_bad_pdf_in_one_line() -> None:
    with pytest.raises(FetchRefused, match="unreadable PDF") as e:
        pool.convert("pdf", b"%PDF-1.4 broken", None, "http://x.invalid/a.pdf")
    assert "\n" not in str(e.value)


def test_overlong_conversion_is_refused_and_the_pool_recovers(pydocs_dir: Path) -> None:
    big = (pydocs_dir / "library/stdtypes.html").read_bytes()
    with pytest.raises(FetchRefused, match="took longer than 0.001 s"):
        pool.convert("html", big, "utf-8", "http://x.invalid/", timeout_s=0.001)
    title, text = pool.convert("html", big, "utf-8", "http://x.invalid/")
    assert "Built-in Types" in title and len(text) > 100_000
