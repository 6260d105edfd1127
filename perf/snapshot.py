"""Snapshot benchmark: a replayed fetch against a page-cache hit, measured in the same run.

    python3 perf/snapshot.py [--pages 40] [--rounds 5]

Serves Debian's python3.11-doc HTML on a loopback server (tests/servers.py), downloads and converts
``--pages`` pages once, recording them into a WARC snapshot (record mode) and into a ``PageCache``, then
stops the server and, interleaved page by page for ``--rounds`` rounds, times:

1. page-cache hit: ``FetchService.fetch`` into a fresh workspace with the shared ``PageCache``
   (today's sweep path: JSON file read + workspace write);
2. replayed fetch: the same with the snapshot in replay mode (index lookup + one gzip member read +
   workspace write), no HTTP client;
3. the same two with ``get_document`` (no workspace write): the lookups alone.

Prints medians and the ratio replay / page cache (the target: about 1, "as fast as the page cache").
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from fte_shell.config import FetchPolicy
from fte_shell.fetch import FetchService, PageCache
from fte_shell.snapshot import Snapshot, SnapshotStore
from fte_shell.workspace import Workspace
from tests.servers import LoopbackServer

PYDOCS = Path("/usr/share/doc/python3.11/html")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pages", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    pages = sorted((PYDOCS / "library").glob("*.html"))[: args.pages]
    if not pages:
        sys.exit(f"no pages under {PYDOCS}/library (apt-get install python3.11-doc)")
    tmp = Path(tempfile.mkdtemp(prefix="fte-snapbench-"))
    server = LoopbackServer(PYDOCS).start()
    policy = FetchPolicy(allow_private=[server.host_port])
    urls = [server.url(f"/library/{p.name}") for p in pages]
    cache = PageCache(tmp / "page-cache")
    store = SnapshotStore(tmp / "snap")
    t0 = time.perf_counter()
    rec = FetchService(Workspace(tmp / "rec"), policy, page_cache=Snapshot(store, "record"))
    for u in urls:
        doc = rec.get_document(u)
        cache.put(u, doc)
    rec.close()
    print(f"recorded {len(urls)} pages in {time.perf_counter() - t0:.1f} s "
          f"({sum(c.size for c in store.index.all()):,} bytes of text); server stopped")
    server.stop()
    replay = Snapshot(store, "replay")
    timings: dict[str, list[float]] = {k: [] for k in ("cache fetch", "replay fetch", "cache lookup", "replay lookup")}
    n = 0
    for _ in range(args.rounds):
        for u in urls:
            n += 1
            for name, pc in (("cache", cache), ("replay", replay)):
                svc = FetchService(Workspace(tmp / f"ws-{name}-{n}"), policy, page_cache=pc)
                t = time.perf_counter()
                svc.fetch(u)
                timings[f"{name} fetch"].append(time.perf_counter() - t)
                svc = FetchService(Workspace(tmp / f"ws-{name}-{n}"), policy, page_cache=pc)
                t = time.perf_counter()
                svc.get_document(u)
                timings[f"{name} lookup"].append(time.perf_counter() - t)
                assert svc._http is None
    med = {k: statistics.median(v) for k, v in timings.items()}
    for k, v in med.items():
        print(f"{k:14s} median {v * 1e3:7.2f} ms  (n={len(timings[k])})")
    print(f"ratio replay/page-cache: fetch {med['replay fetch'] / med['cache fetch']:.2f}x, "
          f"lookup {med['replay lookup'] / med['cache lookup']:.2f}x")


if __name__ == "__main__":
    main()
