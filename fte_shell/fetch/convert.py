"""Downloaded bytes -> (title, plain text), by content type.

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
* Anything else: refused, naming the type.

Conversion is CPU-bound pure Python, so it runs in a module-level process pool (lazily created, shared by
every FetchService of the process); crawl4ai is imported lazily inside the worker, with
``CRAWL4_AI_BASE_DIRECTORY`` pointed at a temporary directory and the cloud notice silenced.
"""

from __future__ import annotations

import codecs
import json
import multiprocessing
import os
import re
import tempfile
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

from ..errors import FetchRefused

Kind = Literal["html", "pdf", "text"]

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

_HTML_TYPES = {"text/html", "application/xhtml+xml"}
_PDF_TYPES = {"application/pdf", "application/x-pdf"}
_TEXT_TYPES = {
    "application/json",
    "application/xml",
    "application/javascript",
    "application/x-ndjson",
    "application/ld+json",
}
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
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:\-]+)""", re.IGNORECASE)
_WHATWG_ALIASES = {
    "iso8859-1": "cp1252",
    "latin-1": "cp1252",
    "ascii": "cp1252",
    "shift_jis": "cp932",
    "euc_kr": "cp949",
}


# --- content type -------------------------------------------------------------------------------------
def classify(content_type: str | None, body_head: bytes, url: str = "") -> Kind:
    """Which converter handles this response; raises :class:`FetchRefused` naming an unsupported type.

    ``content_type`` is the bare MIME type (lower-case, no parameters) or None; ``body_head`` the first
    bytes of the body, used to sniff a missing or generic type; ``url`` is named in the refusal.
    """
    ct = (content_type or "").strip().lower()
    if ct in _HTML_TYPES:
        return "html"
    if ct in _PDF_TYPES:
        return "pdf"
    if ct.startswith("text/") or ct in _TEXT_TYPES or ct.endswith(("+json", "+xml")):
        return "text"
    if ct in ("", "application/octet-stream", "binary/octet-stream", "application/unknown"):
        head = body_head.lstrip()[:2048]
        if head.startswith(b"%PDF-"):
            return "pdf"
        lowered = head[:1024].lower()
        if lowered.startswith((b"<!doctype html", b"<html")) or b"<html" in lowered:
            return "html"
        if ct == "" and body_head and b"\x00" not in body_head[:8192]:
            return "text"
    where = f" from {url if len(url) <= 200 else url[:199] + '…'}" if url else ""
    ct = ct if len(ct) <= 100 else ct[:99] + "…"  # the server's header, quoted back in one short line
    raise FetchRefused(
        f"unsupported content type {ct or '(none, binary body)'}{where} (only HTML, PDF, text, JSON and XML are converted)"
    )


# --- text decoding ------------------------------------------------------------------------------------
_NOT_CHARSETS = frozenset(
    {"unicode-escape", "raw-unicode-escape", "punycode", "idna", "undefined", "charmap", "utf-7"}
)
"""Python codecs that are not web page charsets: a server naming one (``charset=unicode_escape`` rewrites
``\\x41`` into ``A``; ``undefined`` always fails) is ignored like an unknown label."""


def _codec(label: str | None) -> str | None:
    """Python codec for a charset label; None for unknown labels, bytes-to-bytes codecs (``zlib``,
    ``base64``, ``rot13``) and Python-only codecs (:data:`_NOT_CHARSETS`)."""
    if not label:
        return None
    try:
        info = codecs.lookup(label.strip().strip("\"'").lower())
    except LookupError:
        return None
    if not getattr(info, "_is_text_encoding", True) or info.name in _NOT_CHARSETS:
        return None
    return _WHATWG_ALIASES.get(info.name, info.name)


def meta_charset(body: bytes) -> str | None:
    """Charset declared by an HTML ``<meta charset>`` / ``http-equiv`` tag in the first 4 KB."""
    m = _META_CHARSET.search(body[:4096])
    return m.group(1).decode("ascii", "replace") if m else None


def decode_text(body: bytes, charset: str | None, *, html: bool) -> str:
    """Decode a body: BOM, then the Content-Type charset, then (HTML) the meta charset, then UTF-8, then
    charset detection (charset-normalizer); undecodable bytes become U+FFFD."""
    for bom, enc in (
        (codecs.BOM_UTF8, "utf-8-sig"),
        (codecs.BOM_UTF16_LE, "utf-16"),
        (codecs.BOM_UTF16_BE, "utf-16"),
    ):
        if body.startswith(bom):
            return body.decode(enc, errors="replace")
    declared = [_codec(charset)]
    if html:
        declared.append(_codec(meta_charset(body)))
    for enc in declared:
        if enc is None:
            continue
        try:
            return body.decode(enc)
        except UnicodeDecodeError:
            if enc == "cp1252":
                return body.decode("latin-1")
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        pass
    from charset_normalizer import from_bytes

    best = from_bytes(body[:500_000]).best()
    enc = _codec(best.encoding) if best is not None else None
    return body.decode(enc or declared[0] or "cp1252", errors="replace")


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

    _prepare_crawl4ai_env()
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
    """crawl4ai's converters used as-is with the settings DESIGN.md measured (scrape, then
    ``DefaultMarkdownGenerator``): the reference that :func:`html_to_text`'s faster path is checked
    against for identical words (tests) and timed against (benchmarks/fetch.py). Not used to fetch."""
    _prepare_crawl4ai_env()
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
    _prepare_crawl4ai_env()
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
def _title_from_url(url: str) -> str:
    last = unquote(urlsplit(url).path.rstrip("/").rsplit("/", 1)[-1])
    return last


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
            title = _title_from_url(url)
    if max_chars is not None and len(text) > max_chars:
        raise FetchRefused(
            f"converted text too large: {len(text):,} characters from a {len(body):,}-byte body "
            f"(at most {max_chars:,}, max_bytes)"
        )
    return title, text


_env_ready = False


def _prepare_crawl4ai_env() -> None:
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


def _worker_init() -> None:
    _prepare_crawl4ai_env()


def _worker_warm() -> int:
    _prepare_crawl4ai_env()
    import crawl4ai.html2text  # noqa: F401 - the slow import, done once per worker
    import lxml.cssselect  # noqa: F401

    return os.getpid()


_pool: ProcessPoolExecutor | None = None
_pool_lock = threading.Lock()


def pool_size() -> int:
    """Worker processes of the conversion pool (``FTE_CONVERT_WORKERS`` or min(4, CPUs))."""
    env = os.environ.get("FTE_CONVERT_WORKERS")
    if env and env.isdigit() and int(env) > 0:
        return int(env)
    return max(1, min(4, os.cpu_count() or 1))


def _get_pool() -> ProcessPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ProcessPoolExecutor(
                max_workers=pool_size(),
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_worker_init,
            )
        return _pool


def _drop_pool(broken: ProcessPoolExecutor, *, kill: bool = False) -> None:
    """Forget ``broken`` (the next conversion starts a fresh pool); ``kill`` also terminates its workers
    (a conversion that overran its time would otherwise keep a worker busy for good)."""
    global _pool
    with _pool_lock:
        if _pool is broken:
            _pool = None
    if kill:
        procs: dict[int, Any] = getattr(broken, "_processes", None) or {}
        for proc in list(procs.values()):
            proc.terminate()
    broken.shutdown(wait=False, cancel_futures=True)


def warm_up() -> None:
    """Start the pool's workers and import the converters in each (2-4 s once); optional."""
    pool = _get_pool()
    for f in [pool.submit(_worker_warm) for _ in range(pool_size())]:
        f.result()


def shutdown_pool() -> None:
    """Stop the conversion pool (a later conversion starts a new one)."""
    global _pool
    with _pool_lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.shutdown(wait=True, cancel_futures=True)


def convert(
    kind: Kind,
    body: bytes,
    charset: str | None,
    url: str,
    content_type: str | None = None,
    *,
    timeout_s: float = 60.0,
    max_chars: int | None = None,
) -> tuple[str, str]:
    """``(title, text)`` of a downloaded body, converted in the process pool.

    Raises :class:`FetchRefused` if conversion fails, takes longer than ``timeout_s`` or gives more than
    ``max_chars`` characters.
    """
    for attempt in (1, 2):
        pool = _get_pool()
        try:
            fut = pool.submit(convert_bytes, kind, body, charset, url, content_type, max_chars)
            return fut.result(timeout=max(0.0001, timeout_s))
        except FetchRefused:
            raise
        except FutureTimeout:
            _drop_pool(pool, kill=True)
            raise FetchRefused(
                f"conversion of the {kind.upper()} body took longer than {timeout_s:g} s"
            ) from None
        except BrokenProcessPool:
            _drop_pool(pool)
            if attempt == 2:
                raise FetchRefused(
                    f"conversion of the {kind.upper()} body crashed its worker process"
                ) from None
        except Exception as e:  # noqa: BLE001 - a converter bug must become one line, not a crash
            raise FetchRefused(
                f"conversion of the {kind.upper()} body failed: {e.__class__.__name__}: {e}".splitlines()[0]
            ) from None
    raise AssertionError("unreachable")
