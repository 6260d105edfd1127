"""How fast ``fte-shell view`` opens a large sweep.

A base sweep (scripted policy, structured profiles: no Docker) is replicated into a sweep of N runs (default
2,000; each copy a real run directory under a new question id). Measured in this invocation, for the base
sweep (the baseline) and the large one: the server's start-up (finding runs and computing the index),
writing the static site, and in headless Chromium the time from navigation until the matrix and the first
page of the runs table are on screen — over HTTP from ``fte-shell view`` and from the static site on
file:// — plus opening one run. Printed with the ratio large / baseline. The goal: under 2 s to open.

    python perf/viewer.py [--runs 2000] [--questions 5] [--profiles fte,open-find,snippet-only,visit-snippet]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fte_shell.viewer import Catalog, ViewerServer, write_static

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def base_sweep(out: Path, questions: int, profiles: str) -> None:
    """``fte-shell bench hotpotqa --scripted`` (judged at the end, as the command does by default)."""
    subprocess.run([sys.executable, "-m", "fte_shell", "bench", "hotpotqa", "--scripted", "--limit", str(questions),
                    "--profiles", profiles, "--out", str(out), "--corpus-dir", str(out.parent / "corpus"),
                    "--no-progress"], check=True, stdout=subprocess.DEVNULL)


def replicate(base: Path, out: Path, n: int) -> int:
    """A sweep of ``n`` runs made of copies of ``base``'s runs, each copy under a new question id."""
    runs = sorted(base.glob("runs/*/*/r*"))
    qs = {json.loads(x)["id"]: json.loads(x) for x in (base / "questions.jsonl").read_text().splitlines() if x.strip()}
    out.mkdir(parents=True)
    lines, made, copy = [], 0, 0
    while made < n:
        for r in runs:
            if made >= n:
                break
            profile, qid = r.parent.parent.name, r.parent.name
            new = f"{qid}-{copy}"
            shutil.copytree(r, out / "runs" / profile / new / r.name, symlinks=True)
            if profile == min({p.parent.parent.name for p in runs}):
                lines.append(json.dumps({**qs.get(qid, {"id": qid}), "id": new}))
            made += 1
        copy += 1
    (out / "questions.jsonl").write_text("\n".join(lines) + "\n")
    return made


def open_times(page, url: str, view: str, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        page.goto("about:blank")
        t = time.perf_counter()
        page.goto(url)
        page.wait_for_selector(f'body[data-ready="1"][data-view="{view}"]', timeout=120_000)
        out.append(time.perf_counter() - t)
    return out


def measure(sweep: Path, work: Path, browser, repeat: int) -> dict[str, float]:
    t = time.perf_counter()
    catalog = Catalog([sweep])
    server = ViewerServer(catalog)
    server.site.index()
    startup = time.perf_counter() - t
    t = time.perf_counter()
    site = work / (sweep.name + "-site")
    write_static(Catalog([sweep]), site)
    static_s = time.perf_counter() - t
    server.start()
    page = browser.new_page()
    try:
        http = statistics.median(open_times(page, server.url, "sweep", repeat))
        static = statistics.median(open_times(page, site.joinpath("index.html").as_uri(), "sweep", repeat))
        one = statistics.median(open_times(page, server.url + "#/run/0", "run", repeat))
        rows = page.evaluate("FTE.cache.index.runs.length")
    finally:
        page.close()
        server.shutdown()
        server.server_close()
    return {"runs": rows, "startup_s": startup, "static_write_s": static_s, "open_http_s": http,
            "open_static_s": static, "open_run_s": one}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--questions", type=int, default=5)
    ap.add_argument("--profiles", default="fte,open-find,snippet-only,visit-snippet")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    a = ap.parse_args()
    from playwright.sync_api import sync_playwright

    work = Path(tempfile.mkdtemp(prefix="fte-viewer-bench-"))
    try:
        base = work / "base"
        base_sweep(base, a.questions, a.profiles)
        large = work / "large"
        replicate(base, large, a.runs)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=a.chromium, args=FLAGS)
            b = measure(base, work, browser, a.repeat)
            big = measure(large, work, browser, a.repeat)
            browser.close()
        print(f"{'':18}{'baseline':>12}{'large':>12}{'ratio':>8}")
        for k in b:
            ratio = big[k] / b[k] if b[k] else float("nan")
            fmt = "{:>12.0f}" if k == "runs" else "{:>12.3f}"
            print(f"{k:18}" + fmt.format(b[k]) + fmt.format(big[k]) + f"{ratio:>8.1f}")
        ok = big["open_http_s"] < 2 and big["open_static_s"] < 2
        print(f"open {big['runs']:.0f} runs: {'under' if ok else 'OVER'} 2 s (median of {a.repeat})")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
