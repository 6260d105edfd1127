"""Downloaded body -> (title, plain text), in this process, by kind (see :func:`decode.classify`).

* HTML: crawl4ai's html2text converter (``CustomHTML2Text``) with the options crawl4ai's
  ``DefaultMarkdownGenerator`` uses (no wrapping, code marked, links and images ignored), after the
  cleanup crawl4ai's ``LXMLWebScrapingStrategy`` would do with our settings: tags nav/footer/script/
  style/noscript/form removed, content selector ``main, [role="main"], article`` falling back to the body,
  no pruning filters. We do NOT round-trip through crawl4ai's scraper: it serializes the cleaned tree back
  to HTML and html2text re-tokenizes it with the pure-Python ``html.parser``, and it normalizes every link
  and image we then ignore (≈2/3 of the time). Instead the lxml tree is walked once and its start/data/end
  events are fed straight into the same converter object. Same converter, same options, one parse.
* PDF: crawl4ai's PDF processor (``crawl4ai.processors.pdf``, pypdf), images not extracted.
* text/*, JSON, XML: decoded text (JSON pretty-printed so it greps line by line).

crawl4ai is imported lazily, after :func:`prepare_crawl4ai_env` pointed ``CRAWL4_AI_BASE_DIRECTORY`` at our
cache and silenced the cloud notice. Conversion is CPU-bound pure Python: the fetch service runs
:func:`convert_bytes` in the process pool of :mod:`fte_shell.fetch.pool`.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from ..errors import FetchRefused
from ..workspace import url_title
from .decode import Kind, decode_text

EXCLUDED_TAGS = ("nav", "footer", "script", "style", "noscript", "form")
"""Removed with their content before conversion (crawl4ai ``excluded_tags``)."""

CONTENT_SELECTOR = 'main, [role="main"], article'
"""Main-content selector; the whole body is used when nothing matches."""

HTML2TEXT_OPTIONS: dict[str, Any] = {
    "body_width": 0,
    "ignore_emphasis": False,
    "ignore_links": True,
    "ignore_images": True,
    "protect_links": False,
    "single_line_break": True,
    "mark_code": True,
    "escape_snob": False,
}
"""crawl4ai DefaultMarkdownGenerator's html2text options, with links and images ignored."""

MAX_PDF_PAGES = 2000
"""Pages of a PDF converted at most (the rest is dropped)."""

_VOID = frozenset(
    [
        "area",
        "base",
        "br",
        "col",
        "embed",
        "hr",
        "img",
        "input",
        "link",
        "meta",
        "param",
        "source",
        "track",
        "wbr",
    ]
)


# --- crawl4ai -----------------------------------------------------------------------------------------
_env_ready = False


def prepare_crawl4ai_env() -> None:
    """Set crawl4ai's environment (its base directory, no cloud notice, no telemetry) once, before its
    first import in this process."""
    global _env_ready
    if _env_ready:
        return
    if "CRAWL4_AI_BASE_DIRECTORY" not in os.environ:
        # crawl4ai creates ~/.crawl4ai at import: point it at our cache (one fixed place, not a temporary
        # directory per process that nobody removes)
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "fte-shell" / "crawl4ai"
        try:
            cache.mkdir(parents=True, exist_ok=True)
        except OSError:  # no writable home: a temporary directory after all
            cache = Path(tempfile.mkdtemp(prefix="fte-crawl4ai-"))
        os.environ["CRAWL4_AI_BASE_DIRECTORY"] = str(cache)
    os.environ.setdefault("CRAWL4AI_NO_CLOUD_NOTICE", "1")
    os.environ.setdefault("CRAWL4AI_TELEMETRY", "0")
    _env_ready = True


# --- HTML ---------------------------------------------------------------------------------------------
_selector: Any = None


def _content_roots(doc: Any) -> list[Any]:
    global _selector
    if _selector is None:
        from lxml.cssselect import CSSSelector

        _selector = CSSSelector(CONTENT_SELECTOR)
    picked = _selector(doc)
    if picked:
        chosen = set(picked)
        return [el for el in picked if not any(a in chosen for a in el.iterancestors())]
    body = doc.find("body")
    return [body if body is not None else doc]


def _title(doc: Any) -> str:
    t = doc.find(".//title")
    if t is not None and t.text_content().strip():
        return str(t.text_content()).strip()
    for m in doc.iterfind(".//meta[@property='og:title']"):
        if (m.get("content") or "").strip():
            return str(m.get("content")).strip()
    h1 = doc.find(".//h1")
    if h1 is not None:
        return str(h1.text_content()).strip().rstrip("¶").strip()
    return ""


def html_to_text(html: str, url: str = "") -> tuple[str, str]:
    """``(title, text)`` of an HTML page (see the module docstring)."""
    from lxml import etree
    from lxml import html as lhtml

    prepare_crawl4ai_env()
    from crawl4ai.html2text import CustomHTML2Text

    if not html.strip():
        return "", ""
    try:
        doc = lhtml.document_fromstring(
            html.encode("utf-8", "replace"), parser=lhtml.HTMLParser(encoding="utf-8")
        )
    except (etree.ParserError, ValueError):
        return "", ""
    title = _title(doc)
    etree.strip_elements(
        doc, etree.Comment, etree.ProcessingInstruction, "head", *EXCLUDED_TAGS, with_tail=False
    )
    h = CustomHTML2Text(baseurl=url)
    h.update_params(**HTML2TEXT_OPTIONS)
    h.start = True
    start, data, end = h.handle_starttag, h.handle_data, h.handle_endtag
    for root in _content_roots(doc):
        for event, el in etree.iterwalk(root, events=("start", "end")):
            tag = el.tag
            if not isinstance(tag, str):
                if event == "end" and el is not root and el.tail:
                    data(el.tail)
                continue
            if event == "start":
                start(tag, el.items())
                if el.text:
                    data(el.text)
            else:
                if tag not in _VOID:
                    end(tag)
                if el is not root and el.tail:
                    data(el.tail)
    text = h.optwrap(h.finish())
    if h.pad_tables:
        from crawl4ai.html2text.utils import pad_tables_in_text

        text = pad_tables_in_text(text)
    return title, text.replace("    ```", "```")


def crawl4ai_reference(url: str, html: str) -> str:
    """crawl4ai's converters used as-is: ``LXMLWebScrapingStrategy().scrap`` with our content selector and
    excluded tags, then ``DefaultMarkdownGenerator`` with links and images ignored (measured here on
    Python-docs pages: word recall and precision 0.97 against the main content): the reference that
    :func:`html_to_text`'s faster path is checked against for identical words (tests) and timed against
    (perf/fetch.py). Not used to fetch."""
    prepare_crawl4ai_env()
    from crawl4ai.content_scraping_strategy import LXMLWebScrapingStrategy
    from crawl4ai.markdown_generation_strategy import DefaultMarkdownGenerator

    scraped = LXMLWebScrapingStrategy().scrap(
        url, html, css_selector=CONTENT_SELECTOR, excluded_tags=list(EXCLUDED_TAGS), exclude_all_images=True
    )
    gen = DefaultMarkdownGenerator(options={"ignore_links": True, "ignore_images": True})
    return gen.generate_markdown(scraped.cleaned_html, base_url=url, citations=False).raw_markdown


# --- PDF ----------------------------------------------------------------------------------------------
def pdf_to_text(data: bytes) -> tuple[str, str]:
    """``(title, text)`` of a PDF through crawl4ai's PDF processor (pypdf); images are not extracted."""
    prepare_crawl4ai_env()
    from crawl4ai.processors.pdf.processor import NaivePDFProcessorStrategy

    fd, tmp = tempfile.mkstemp(suffix=".pdf")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        proc = NaivePDFProcessorStrategy(extract_images=False, max_pages=MAX_PDF_PAGES)
        try:
            result = proc.process(Path(tmp))
        except Exception as e:  # noqa: BLE001 - pypdf raises many types on broken files
            raise FetchRefused(f"unreadable PDF: {e.__class__.__name__}: {e}".splitlines()[0]) from None
    finally:
        os.unlink(tmp)
    pages = [p.markdown.strip() for p in result.pages]
    title = (result.metadata.title or "").strip()
    text = "\n\n".join(p for p in pages if p)
    if not title:
        title = next((ln.strip("# ").strip() for ln in text.splitlines() if ln.strip()), "")[:200]
    return title, text


# --- dispatch -----------------------------------------------------------------------------------------
def _pretty_size(value: Any) -> int:
    """Characters of indentation ``json.dumps(value, indent=1)`` adds (one per nesting level per line)."""
    total, stack = 0, [(value, 0)]
    while stack:
        v, depth = stack.pop()
        total += depth + 2
        if isinstance(v, dict):
            stack.extend((x, depth + 1) for x in v.values())
        elif isinstance(v, list):
            stack.extend((x, depth + 1) for x in v)
    return total


def _pretty_json(text: str, max_chars: int | None) -> str:
    """JSON pretty-printed one value per line (so it greps line by line), unless it is not JSON or the
    indentation would blow it past ``max_chars`` (deeply nested arrays: indentation grows with depth)."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return text
    if max_chars is not None and len(text) + _pretty_size(value) > max_chars:
        return text
    return json.dumps(value, indent=1, ensure_ascii=False)


def convert_bytes(
    kind: Kind,
    body: bytes,
    charset: str | None,
    url: str,
    content_type: str | None = None,
    max_chars: int | None = None,
) -> tuple[str, str]:
    """``(title, text)`` of a downloaded body, in this process. ``max_chars``: a text longer than this is
    refused (nested lists indent every line, so a small page can convert to a huge text)."""
    if kind == "pdf":
        title, text = pdf_to_text(body)
    else:
        text = decode_text(body, charset, html=kind == "html")
        if kind == "html":
            title, text = html_to_text(text, url)
        else:
            ct = (content_type or "").lower()
            if ct == "application/json" or ct.endswith("+json"):
                text = _pretty_json(text, max_chars)
            title = url_title(url)
    if max_chars is not None and len(text) > max_chars:
        raise FetchRefused(
            f"converted text too large: {len(text):,} characters from a {len(body):,}-byte body "
            f"(at most {max_chars:,}, max_bytes)"
        )
    return title, text
