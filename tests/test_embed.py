"""fte-shell embedded in other people's programs: the conversion workers never import the caller's
``__main__``, and they come and go with the process that uses them (fte_shell/fetch/pool.py).

Every program here is a real Python process fetching a page from the loopback server through
``FetchService``; it appends a line to a file at top level, so the file says how often it ran.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fte_shell.errors import FetchRefused
from fte_shell.fetch import pool
from tests.servers import LoopbackServer

REPO = Path(__file__).resolve().parent.parent
PAGE = "<html><head><title>Embedded</title></head><body><main><p>quokka zebra marmot</p></main></body></html>"

FETCH = """
import os
from fte_shell import FetchPolicy, FetchService, Workspace

with open(os.environ["RAN_LOG"], "a") as f:
    f.write(__name__ + "\\n")


def fetch(ws=os.environ["WS"]):
    svc = FetchService(Workspace(ws), FetchPolicy(allow_private=[os.environ["HOST_PORT"]]))
    rec = svc.fetch(os.environ["URL"])
    svc.close()
    return rec
"""


@pytest.fixture(scope="module")
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as srv:
        srv.route("/page", body=PAGE)
        yield srv


def _run(
    tmp_path: Path, srv: LoopbackServer, *args: str, timeout: float = 180
) -> subprocess.CompletedProcess:
    env = dict(
        os.environ,
        PYTHONPATH=str(REPO),
        RAN_LOG=str(tmp_path / "ran.log"),
        WS=str(tmp_path / "ws"),
        HOST_PORT=srv.host_port,
        URL=srv.url("/page"),
        FTE_CONVERT_WORKERS="2",
    )
    p = subprocess.run(
        [sys.executable, *args],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    return p


def _check_fetched(tmp_path: Path) -> None:
    files = list((tmp_path / "ws").glob("*.txt"))
    assert len(files) == 1, files
    text = files[0].read_text()
    assert "Title: Embedded" in text and "quokka zebra marmot" in text


def _ran(tmp_path: Path) -> list[str]:
    return (tmp_path / "ran.log").read_text().splitlines()


def test_plain_script_without_main_guard_fetches_and_runs_once(
    tmp_path: Path, server: LoopbackServer
) -> None:
    script = tmp_path / "plain.py"
    script.write_text(FETCH + "\nfrom fte_shell.fetch import pool\npool.warm_up()\nprint(fetch().title)\n")
    p = _run(tmp_path, server, str(script))
    assert p.stdout.strip() == "Embedded"
    _check_fetched(tmp_path)
    assert _ran(tmp_path) == ["__main__"]  # two warmed workers, and the script ran exactly once


def test_python_c_without_a_main_file(tmp_path: Path, server: LoopbackServer) -> None:
    p = _run(tmp_path, server, "-c", FETCH + "\nprint(fetch().title)\n")
    assert p.stdout.strip() == "Embedded"
    _check_fetched(tmp_path)
    assert _ran(tmp_path) == ["__main__"]


def test_exec_in_a_main_without_file_like_a_notebook(tmp_path: Path, server: LoopbackServer) -> None:
    code = "import __main__; exec(compile(CODE, '<cell>', 'exec'), vars(__main__)); print(fetch().title)"
    p = _run(tmp_path, server, "-c", f"CODE = {FETCH!r}\n" + code)
    assert p.stdout.strip() == "Embedded"
    assert _ran(tmp_path) == ["__main__"]


def test_script_with_its_own_multiprocessing(tmp_path: Path, server: LoopbackServer) -> None:
    script = tmp_path / "mp.py"
    script.write_text(
        FETCH
        + textwrap.dedent(
            """
            import multiprocessing


            def fetch_in_child(i):
                return fetch(os.environ["WS"] + f"-child{i}").new


            if __name__ == "__main__":
                multiprocessing.set_start_method("spawn")
                with multiprocessing.Pool(2) as p:
                    squares = p.starmap(pow, [(2, 2), (3, 2)])
                    rec = fetch()
                    print(len(multiprocessing.active_children()), squares, rec.title)
                print(multiprocessing.get_start_method())
                # forked children of a process whose pool is running convert in workers of their own
                with multiprocessing.get_context("fork").Pool(2) as p:
                    print(p.map(fetch_in_child, [0, 1]))
                print(fetch().title)
            """
        )
    )
    p = _run(tmp_path, server, str(script))
    assert p.stdout.splitlines() == ["2 [4, 9] Embedded", "spawn", "[True, True]", "Embedded"]
    _check_fetched(tmp_path)
    ran = _ran(tmp_path)
    assert ran.count("__main__") == 1 and ran.count("__mp_main__") == 2 and len(ran) == 3  # its own 2 workers


def test_asyncio_loop_stays_responsive(tmp_path: Path, server: LoopbackServer) -> None:
    script = tmp_path / "aio.py"
    script.write_text(
        FETCH
        + textwrap.dedent(
            """
            import asyncio, signal, time


            async def main():
                gaps = []
                handlers = {s: signal.getsignal(s) for s in signal.valid_signals() if s not in (9, 19)}

                async def tick():
                    last = time.monotonic()
                    while True:
                        await asyncio.sleep(0.01)
                        now = time.monotonic()
                        gaps.append(now - last)
                        last = now

                ticker = asyncio.create_task(tick())
                t = time.monotonic()
                rec = await asyncio.to_thread(fetch)  # a cold pool: a worker starts and imports crawl4ai
                took = time.monotonic() - t
                ticker.cancel()
                print(rec.title, len(gaps), f"{max(gaps):.3f}", f"{took:.3f}")
                print(handlers == {s: signal.getsignal(s) for s in handlers},
                      signal.getsignal(signal.SIGCHLD) == signal.SIG_DFL)


            asyncio.run(main())
            """
        )
    )
    p = _run(tmp_path, server, str(script))
    first, second = p.stdout.splitlines()
    title, ticks, max_gap, took = first.split()
    assert title == "Embedded" and second == "True True"
    assert float(max_gap) < max(0.5, float(took) / 2), first  # the loop ran all along the fetch
    assert int(ticks) >= 5, first
    _check_fetched(tmp_path)
    assert _ran(tmp_path) == ["__main__"]


# --- crash isolation and clean shutdown ------------------------------------------------------------------
def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def _workers_of(parent: int) -> list[int]:
    """Pids of the live conversion workers whose parent is ``parent``."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            cmd = (d / "cmdline").read_bytes()
        except OSError:
            continue
        mine = int(stat.rsplit(")", 1)[1].split()[1]) == parent and b"fte_shell.fetch.worker" in cmd
        if mine and _alive(int(d.name)):
            out.append(int(d.name))
    return out


def _gone_within(pids: list[int], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not any(_alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


def test_a_dead_worker_is_replaced_and_a_crash_is_one_clear_error(
    monkeypatch: pytest.MonkeyPatch, pydocs_dir: Path
) -> None:
    big = (pydocs_dir / "library/stdtypes.html").read_bytes()
    pool.shutdown_pool()
    monkeypatch.setenv("FTE_CONVERT_WORKERS", "1")
    try:
        (first,) = pool.warm_up()
        os.kill(first, signal.SIGKILL)
        assert _gone_within([first], 5)
        title, _ = pool.convert("html", PAGE.encode(), "utf-8", "http://x.invalid/")  # retried in a new one
        assert title == "Embedded"
        (second,) = pool.warm_up()
        assert second != first and _workers_of(os.getpid()) == [second]

        # every worker killed mid-conversion (the first try and its retry): one line, no hang
        result: list[BaseException | tuple[str, str]] = []
        t = threading.Thread(target=lambda: result.append(_catch(big)))
        t.start()
        killed: set[int] = set()
        while t.is_alive():
            for pid in _workers_of(os.getpid()):
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            time.sleep(0.01)
        t.join()
        assert len(killed) >= 2
        assert isinstance(result[0], FetchRefused)
        assert str(result[0]) == "conversion of the HTML body crashed its worker process"
        title, text = pool.convert("html", big, "utf-8", "http://x.invalid/")
        assert "Built-in Types" in title and len(text) > 100_000

        # an overrun kills that worker alone; the next conversion gets a fresh one
        (busy,) = _workers_of(os.getpid())
        with pytest.raises(FetchRefused, match="took longer than 0.001 s"):
            pool.convert("html", big, "utf-8", "http://x.invalid/", timeout_s=0.001)
        assert _gone_within([busy], 5) and _workers_of(os.getpid()) == []
        assert pool.convert("html", PAGE.encode(), "utf-8", "http://x.invalid/")[0] == "Embedded"
    finally:
        pool.shutdown_pool()
    assert _workers_of(os.getpid()) == []


def _catch(body: bytes) -> BaseException | tuple[str, str]:
    try:
        return pool.convert("html", body, "utf-8", "http://x.invalid/", timeout_s=120)
    except FetchRefused as e:
        return e


@pytest.mark.parametrize("end", ["exit", "sigkill"])
def test_no_orphan_workers_when_the_parent_ends(tmp_path: Path, end: str, pydocs_dir: Path) -> None:
    """A parent that exits stops its workers; a SIGKILLed one too (its workers notice within a second),
    even a worker in the middle of a long conversion."""
    script = tmp_path / "parent.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys, threading, time
            from fte_shell.fetch import pool

            print(*pool.warm_up(), flush=True)
            big = open({str(pydocs_dir / "library/stdtypes.html")!r}, "rb").read() * 40
            threading.Thread(target=pool.convert, args=("html", big, "utf-8", "http://x/"),
                             kwargs={{"timeout_s": 600}}, daemon=True).start()
            time.sleep(0.5)
            print("converting", flush=True)
            if {end == "sigkill"}:
                time.sleep(600)
            """
        )
    )
    env = dict(os.environ, PYTHONPATH=str(REPO), FTE_CONVERT_WORKERS="2")
    proc = subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        pids = [int(x) for x in proc.stdout.readline().split()]
        assert len(pids) == 2 and all(_alive(p) for p in pids)
        assert proc.stdout.readline().strip() == "converting"
        if end == "sigkill":
            proc.kill()
        assert proc.wait(timeout=60) in (0, -signal.SIGKILL)
        assert _gone_within(pids, 5), [p for p in pids if _alive(p)]
    finally:
        proc.kill()
        proc.wait()
