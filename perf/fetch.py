"""Fetch pipeline benchmark: one run, figures and ratios against baselines measured in the same run.

    python3 perf/fetch.py [--pages 60] [--refetch 500] [--concurrency 8] [--js 10]

Serves Debian's python3.11-doc HTML on a loopback server (tests/servers.py) and measures:

1. cached re-fetch latency: ``FetchService.fetch`` of a page the workspace already holds (target ≤ 5 ms),
   and a page-cache hit (another question's workspace, shared PageCache);
2. HTML -> text median per page, in this process, one page at a time, interleaved: our converter vs
   crawl4ai's converters as-is (LXMLWebScrapingStrategy + DefaultMarkdownGenerator, the settings of convert.crawl4ai_reference)
   vs trafilatura; and end to end (download + convert) our FetchService vs crawl4ai's full
   ``AsyncWebCrawler`` (with its browserless AsyncHTTPCrawlerStrategy: no playwright browsers here);
   plus word precision/recall of our text vs crawl4ai's and vs the page's main content;
3. pages per second with N concurrent fetches of distinct pages through one FetchService vs 1 at a time;
4. (``--js N``) opt-in JavaScript rendering through chromium vs the plain pipeline.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from fte_shell.config import FetchPolicy
from fte_shell.fetch import FetchService, PageCache, convert, pool
from fte_shell.workspace import Workspace
from tests.servers import LoopbackServer

PYDOCS = Path("/usr/share/doc/python3.11/html")
_WORD = re.compile(r"[^\W_]+")


def _ms(xs: list[float]) -> str:
    return f"{statistics.median(xs) * 1e3:8.2f} ms"


def _words(text: str) -> Counter[str]:
    return Counter(w.lower() for w in _WORD.findall(text))


def _pr(ref: Counter[str], got: Counter[str]) -> tuple[float, float]:
    common = sum((ref & got).values())
    return common / max(1, sum(got.values())), common / max(1, sum(ref.values()))


def _trafilatura() -> Callable[[str, str], str] | None:
    try:
        import trafilatura
    except ImportError as e:
        print(f"  (trafilatura unavailable: {e}; pip install trafilatura lxml_html_clean)")
        return None

    def run(url: str, html: str) -> str:
        return trafilatura.extract(html, url=url, include_tables=True, include_comments=False) or ""

    return run


def _main_words(html: str) -> Counter[str]:
    from lxml import html as lhtml

    doc = lhtml.fromstring(html)
    found = doc.cssselect('[role="main"]') or [doc]
    for el in found[0].xpath(".//script|.//style"):
        el.drop_tree()
    return _words(found[0].text_content())


def bench_refetch(srv: LoopbackServer, n: int) -> None:
    print("\n1. cached re-fetch")
    with tempfile.TemporaryDirectory() as d:
        cache = PageCache(Path(d) / "pages")
        policy = FetchPolicy(allow_private=[srv.host_port])
        svc = FetchService(Workspace(Path(d) / "a"), policy, page_cache=cache)
        url = srv.url("/library/re.html")
        t = time.perf_counter()
        first = svc.fetch(url)
        cold = time.perf_counter() - t
        before = srv.count()
        held: list[float] = []
        for _ in range(n):
            t = time.perf_counter()
            rec = svc.fetch(url)
            held.append(time.perf_counter() - t)
            assert not rec.new
        assert srv.count() == before, "a held page must not be requested again"
        hits: list[float] = []
        for i in range(min(n, 100)):
            other = FetchService(Workspace(Path(d) / f"q{i}"), policy, page_cache=cache)
            t = time.perf_counter()
            other.fetch(url)
            hits.append(time.perf_counter() - t)
        svc.close()
        print(f"  first fetch (download + convert, {first.chars:,} chars): {cold * 1e3:.1f} ms")
        print(
            f"  held page, median of {n}:            {_ms(held)}   (target <= 5 ms; p95 "
            f"{sorted(held)[int(len(held) * 0.95)] * 1e3:.2f} ms)"
        )
        print(f"  page-cache hit, new workspace:        {_ms(hits)}")
        print(f"  ratio first fetch / held:             {cold / statistics.median(held):,.0f}x")


def bench_convert(srv: LoopbackServer, pages: list[Path]) -> None:
    print(
        f"\n2. HTML -> text, median per page over {len(pages)} Python-docs pages (one at a time, interleaved)"
    )
    as_is = convert.crawl4ai_reference
    traf = _trafilatura()
    times: dict[str, list[float]] = {"ours": [], "crawl4ai converters as-is": [], "trafilatura": []}
    prec, rec, prec_m, rec_m = [], [], [], []
    for p in pages:
        html = p.read_text(encoding="utf-8")
        url = srv.url("/" + str(p.relative_to(PYDOCS)))
        t = time.perf_counter()
        _, ours = convert.html_to_text(html, url)
        times["ours"].append(time.perf_counter() - t)
        t = time.perf_counter()
        ref = as_is(url, html)
        times["crawl4ai converters as-is"].append(time.perf_counter() - t)
        if traf is not None:
            t = time.perf_counter()
            traf(url, html)
            times["trafilatura"].append(time.perf_counter() - t)
        a, b = _pr(_words(ref), _words(ours))
        prec.append(a)
        rec.append(b)
        a, b = _pr(_main_words(html), _words(ours))
        prec_m.append(a)
        rec_m.append(b)
    base = statistics.median(times["crawl4ai converters as-is"])
    for name, xs in times.items():
        if xs:
            print(f"  {name:28s} {_ms(xs)}   x{base / statistics.median(xs):.2f} vs crawl4ai as-is")
    print(
        f"  our words vs crawl4ai as-is: precision {statistics.mean(prec):.3f} recall {statistics.mean(rec):.3f}"
    )
    print(
        f"  our words vs main content:   precision {statistics.mean(prec_m):.3f} recall {statistics.mean(rec_m):.3f}"
        f" (min {min(prec_m):.3f} / {min(rec_m):.3f})"
    )

    print("  end to end (download from loopback + convert), one page at a time:")
    ours_e2e: list[float] = []
    with tempfile.TemporaryDirectory() as d:
        svc = FetchService(Workspace(d), FetchPolicy(allow_private=[srv.host_port], max_fetches=10_000))
        for p in pages:
            t = time.perf_counter()
            svc.fetch(srv.url("/" + str(p.relative_to(PYDOCS))))
            ours_e2e.append(time.perf_counter() - t)
        svc.close()
    c4a = _async_web_crawler(srv, pages)
    print(f"  {'our FetchService.fetch':28s} {_ms(ours_e2e)}")
    if c4a:
        ratio = statistics.median(c4a) / statistics.median(ours_e2e)
        print(f"  {'crawl4ai AsyncWebCrawler':28s} {_ms(c4a)}   (ours is x{ratio:.2f} faster)")


def _async_web_crawler(srv: LoopbackServer, pages: list[Path]) -> list[float]:
    convert.prepare_crawl4ai_env()
    try:
        from crawl4ai import AsyncWebCrawler, CacheMode, CrawlerRunConfig
        from crawl4ai.async_crawler_strategy import AsyncHTTPCrawlerStrategy
        from crawl4ai.markdown_generation_strategy import DefaultMarkdownGenerator
    except ImportError as e:
        print(f"  (AsyncWebCrawler unavailable: {e})")
        return []
    cfg = CrawlerRunConfig(
        cache_mode=CacheMode.BYPASS,
        css_selector=convert.CONTENT_SELECTOR,
        excluded_tags=list(convert.EXCLUDED_TAGS),
        exclude_all_images=True,
        markdown_generator=DefaultMarkdownGenerator(options={"ignore_links": True, "ignore_images": True}),
        verbose=False,
    )
    out: list[float] = []

    async def run() -> None:
        async with AsyncWebCrawler(crawler_strategy=AsyncHTTPCrawlerStrategy(), verbose=False) as crawler:
            for p in pages:
                t = time.perf_counter()
                r = await crawler.arun(srv.url("/" + str(p.relative_to(PYDOCS))), config=cfg)
                out.append(time.perf_counter() - t)
                if not r.success:
                    print(f"  (AsyncWebCrawler failed on {p.name}: {r.error_message})")

    asyncio.run(run())
    return out


def bench_concurrency(srv: LoopbackServer, pages: list[Path], n: int) -> None:
    print(
        f"\n3. throughput: distinct pages through one FetchService ({pool.pool_size()} conversion workers)"
    )
    urls = [srv.url("/" + str(p.relative_to(PYDOCS))) for p in pages]

    def run(workers: int) -> float:
        with tempfile.TemporaryDirectory() as d:
            svc = FetchService(Workspace(d), FetchPolicy(allow_private=[srv.host_port], max_fetches=10_000))
            t = time.perf_counter()
            with ThreadPoolExecutor(workers) as ex:
                recs = list(ex.map(svc.fetch, urls))
            wall = time.perf_counter() - t
            svc.close()
        assert all(r.new for r in recs)
        return len(urls) / wall

    seq = run(1)
    par = run(n)
    print(f"  1 at a time:  {seq:7.1f} pages/s")
    print(
        f"  {n} concurrent: {par:7.1f} pages/s   x{par / seq:.2f} vs 1 at a time (on {os.cpu_count()} CPUs)"
    )


def bench_js(srv: LoopbackServer, pages: list[Path], n: int) -> None:
    """Opt-in JS rendering (render_js) vs the plain pipeline on the same pages."""
    from fte_shell.errors import ConfigError
    from fte_shell.fetch import render

    print(f"\n4. opt-in JavaScript rendering (chromium), {n} pages, one at a time")
    try:
        render.find_chromium()
    except ConfigError as e:
        print(f"  (skipped: {e})")
        return
    urls = [srv.url("/" + str(p.relative_to(PYDOCS))) for p in pages[:n]]
    times: dict[str, list[float]] = {"plain": [], "render_js": []}
    with tempfile.TemporaryDirectory() as d:
        for mode in ("plain", "render_js"):
            policy = FetchPolicy(
                allow_private=[srv.host_port], render_js=mode == "render_js", max_fetches=10_000
            )
            svc = FetchService(Workspace(Path(d) / mode), policy)
            svc.fetch(srv.url("/library/index.html"))  # start the browser outside the figures
            for u in urls:
                t = time.perf_counter()
                svc.fetch(u)
                times[mode].append(time.perf_counter() - t)
            svc.close()
    render.shutdown_renderer()
    ratio = statistics.median(times["render_js"]) / statistics.median(times["plain"])
    print(f"  plain pipeline:   {_ms(times['plain'])}")
    print(f"  with render_js:   {_ms(times['render_js'])}   x{ratio:.1f} the plain time")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", type=int, default=60, help="Python-docs pages to use (sampled evenly)")
    ap.add_argument("--refetch", type=int, default=500, help="re-fetches of a held page")
    ap.add_argument("--concurrency", type=int, default=8, help="concurrent fetches for the throughput figure")
    ap.add_argument("--js", type=int, default=0, help="also time opt-in JS rendering on this many pages")
    args = ap.parse_args(argv)
    if not (PYDOCS / "library" / "re.html").exists():
        raise SystemExit("python3.11-doc is not installed (apt-get install python3.11-doc)")
    every = sorted(PYDOCS.glob("library/*.html"))
    step = max(1, len(every) // max(1, args.pages))
    pages = every[::step][: args.pages]
    t = time.perf_counter()
    pool.warm_up()
    print(
        f"conversion pool warm-up (start {pool.pool_size()} workers, import crawl4ai): "
        f"{time.perf_counter() - t:.1f} s (once per process)"
    )
    with LoopbackServer(directory=PYDOCS) as srv:
        bench_refetch(srv, args.refetch)
        bench_convert(srv, pages)
        bench_concurrency(srv, pages, args.concurrency)
        if args.js:
            bench_js(srv, pages, args.js)
    pool.shutdown_pool()


if __name__ == "__main__":
    main()
