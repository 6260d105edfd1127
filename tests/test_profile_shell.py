"""The shell profile in the real sandbox (Docker), side by side with the structured profile: the shell's
``search`` prints the same text as the structured ``search``; the shell's ``fetch`` and the structured
``fetch`` of one page give the same file name, source line and body (byte-identical files when both read
one shared page snapshot); ``grep -n``/``sed -n`` and the structured grep/read agree on line numbers.
Pages are served on loopback, search is a local corpus built in tmp."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

import pytest
from servers import LoopbackServer

from fte_shell.config import RunConfig
from fte_shell.fetch import PageCache
from fte_shell.profiles import QuestionContext, ToolResult, make_profile
from fte_shell.profiles.shell import ShellProfile
from fte_shell.search import LocalCorpus
from fte_shell.search.corpus import CorpusDoc, build_corpus
from fte_shell.workspace import Workspace, parse_document
from fte_shell.world import RunWorld

pytestmark = pytest.mark.docker

LEDGER = "\n".join(
    [
        "The Copper Ledger is a bookshop founded in 1987 on Wharf Street.",
        "Its founder, Tomas Reyl, sold only maps for the first decade.",
        "",
        "The shop moved to the old customs house in 2004.",
        "Its reading room hosts a chess club every Thursday.",
    ]
)
HTML = """<!doctype html><html><head><title>Kestrel Bridge</title></head><body><main>
<h1>Kestrel Bridge</h1><p>Kestrel Bridge crosses the Alder river in seven stone arches.</p>
<p>It was completed in 1841 by the engineer Mara Vell.</p>
<p>Heavy traffic was banned from the bridge in 1978.</p></main></body></html>"""


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> LocalCorpus:
    docs = [
        CorpusDoc(docid="copper-ledger", title="The Copper Ledger", text=LEDGER),
        CorpusDoc(docid="chess-club-notes", title="Chess club notes", text="The chess club meets on Thursday evenings."),
    ]
    c = LocalCorpus(build_corpus(docs, tmp_path_factory.mktemp("corpus") / "idx", name="shop"))
    yield c
    c.close()


def contexts(tmp_path: Path, corpus: LocalCorpus, server: LoopbackServer) -> tuple[QuestionContext, QuestionContext]:
    cfg = RunConfig.model_validate(
        {"sandbox": {"fetch_policy": {"allow_private": [server.host_port]}, "command_timeout_s": 20}}
    )
    cache = PageCache(tmp_path / "page-cache")
    shell = QuestionContext(cfg, tmp_path / "ws-shell", RunWorld(corpus, corpus, cache), "test-shell-profile")
    fte = QuestionContext(cfg, tmp_path / "ws-fte", RunWorld(corpus, corpus, cache), "test-fte-profile")
    return shell, fte


def bash(p: ShellProfile, command: str) -> ToolResult:
    return p.execute("bash", {"command": command})


def test_shell_and_structured_agree(docker_ready: None, tmp_path: Path, corpus: LocalCorpus) -> None:
    with LoopbackServer() as server:
        url = server.route("/kestrel", body=HTML)
        sctx, fctx = contexts(tmp_path, corpus, server)
        shell = make_profile("shell", sctx)
        fte = make_profile("fte", fctx)
        assert isinstance(shell, ShellProfile)
        try:
            assert [t["function"]["name"] for t in shell.tools()] == ["bash"]
            assert "/tmp" in shell.system_addendum() and "read-only" in shell.system_addendum()

            # search: identical text
            s_search = bash(shell, "search chess club Thursday")
            f_search = fte.execute("search", {"query": "chess club Thursday"})
            assert not s_search.error and s_search.meta["exit_code"] == 0
            assert s_search.output == f_search.output
            assert f_search.output.startswith('2 results for "chess club Thursday":')
            assert bash(shell, "search -n 1 copper ledger").output == fte.execute(
                "search", {"query": "copper ledger", "n": 1}).output

            # fetch of one web page: same record line, byte-identical files (shared page snapshot)
            s_fetch = bash(shell, f"fetch {url}")
            f_fetch = fte.execute("fetch", {"url": url})
            assert not f_fetch.error, f_fetch.output
            assert s_fetch.output == f_fetch.output
            assert re.fullmatch(rf'/work/127-0-0-1-[0-9a-f]{{16}}\.txt  [\d,]+ chars  new  {re.escape(url)}  "Kestrel Bridge"',
                                f_fetch.output)
            name = Path(f_fetch.meta["path"]).name
            assert (sctx.workspace_dir / name).read_bytes() == (fctx.workspace_dir / name).read_bytes()
            assert server.count("/kestrel") == 1  # the second interface read the shared snapshot
            s_held, f_held = bash(shell, f"fetch {url}").output, fte.execute("fetch", {"url": url}).output
            assert s_held == f_held == f_fetch.output.replace("  new  ", "  held  ")

            # fetch of a corpus document: same name, source line and body (the Retrieved time may differ)
            s_doc = bash(shell, "fetch copper-ledger")
            f_doc = fte.execute("fetch", {"url": "copper-ledger"})
            assert s_doc.output == f_doc.output
            # the same fetch facts, the shell's from the gateway's per-command log; each names the time its
            # own file was written (its Retrieved: line)
            dname = Path(f_doc.meta["path"]).name
            for doc, ws in ((s_doc, sctx.workspace_dir), (f_doc, fctx.workspace_dir)):
                when = datetime.fromisoformat(doc.meta["fetches"][0].pop("retrieved_at")).replace(microsecond=0)
                assert when == parse_document((ws / dname).read_text()).retrieved_at
            assert s_doc.meta["fetches"] == f_doc.meta["fetches"] and f_doc.meta["fetches"][0]["ok"]
            s_lines = (sctx.workspace_dir / dname).read_text().split("\n")
            f_lines = (fctx.workspace_dir / dname).read_text().split("\n")
            assert s_lines[:2] == f_lines[:2] == ["Docid: copper-ledger", "Title: The Copper Ledger"]
            assert s_lines[3:] == f_lines[3:]

            # listing: same text
            assert bash(shell, "list_fetched").output == fte.execute("list_fetched", {}).output

            # line numbers agree: grep -n / sed -n in the shell, grep / read in the structured profile
            path = f"/work/{dname}"
            s_grep = bash(shell, f"grep -n -i 'customs house' {path}")
            assert s_grep.output == "8:The shop moved to the old customs house in 2004."
            f_grep = fte.execute("grep", {"pattern": "customs house", "path": path, "context": 0})
            assert f_grep.output.split("\n")[1] == "8: The shop moved to the old customs house in 2004."
            s_sed = bash(shell, f"sed -n '5,6p' {path}").output.split("\n")
            f_read = fte.execute("read", {"path": path, "offset": 5, "limit": 2}).output.split("\n")
            assert [f"{5 + i}: {t}" for i, t in enumerate(s_sed)] == f_read[:2]
            assert bash(shell, f"wc -l < {path}").output == re.search(r"of (\d+)\.", f_read[-1]).group(1)

            # the shell's own behaviour: exit status, read-only /work, scratch /tmp
            fail = bash(shell, "ls /nonexistent")
            assert not fail.error and fail.meta["exit_code"] == 2 and fail.output.endswith("[exit code 2]")
            assert set(fail.meta) == {"exit_code", "timed_out", "truncated", "restarted", "duration_s", "cwd", "fetches", "searches"}
            assert fail.meta["fetches"] == [] and fail.meta["searches"] == []
            ro = bash(shell, "touch /work/forged.txt")
            assert ro.meta["exit_code"] != 0 and "Read-only file system" in ro.output
            assert bash(shell, "echo hi > /tmp/x && cat /tmp/x").output == "hi"
            assert not (sctx.workspace_dir / "forged.txt").exists()

            # dispatch errors
            assert shell.execute("grep", {"pattern": "x"}).output == "Error: unknown tool 'grep'. Available tools: bash."
            empty = bash(shell, "   ")
            assert empty.error and empty.output == "Error: bash needs a non-empty command"
            missing = shell.execute("bash", {})
            assert missing.error and "missing required argument 'command'" in missing.output
        finally:
            shell.close()
            fte.close()
        assert shell.sandbox is None
        closed = bash(shell, "echo after")
        assert closed.error and closed.output == "Error: the sandbox is closed"


def test_close_removes_the_container(docker_ready: None, tmp_path: Path, corpus: LocalCorpus) -> None:
    import docker

    with LoopbackServer() as server:
        sctx, _ = contexts(tmp_path, corpus, server)
        shell = make_profile("shell", sctx)
        assert isinstance(shell, ShellProfile) and shell.sandbox is not None
        cid = shell.sandbox.container_id
        client = docker.from_env()
        try:
            assert client.containers.get(cid).status == "running"
            assert bash(shell, "pwd").output == "/work"
        finally:
            shell.close()
            shell.close()  # idempotent
        assert client.containers.list(all=True, filters={"id": cid}) == []
        assert Workspace(sctx.workspace_dir).entries() == []  # the workspace dir stays (it was given)
        assert sctx.workspace_dir.is_dir()
        client.close()


def test_real_page_same_file_and_same_grep_lines(docker_ready: None, pydocs_dir: Path, tmp_path: Path,
                                                 corpus: LocalCorpus) -> None:
    """A long real page (Python's ``re`` docs): byte-identical files, and GNU grep in the shell and the
    structured grep report the same matching line numbers and texts."""
    with LoopbackServer(directory=pydocs_dir) as server:
        url = server.url("/library/re.html")
        sctx, fctx = contexts(tmp_path, corpus, server)
        shell = make_profile("shell", sctx)
        fte = make_profile("fte", fctx)
        try:
            s_rec = bash(shell, f"fetch {url}")
            f_rec = fte.execute("fetch", {"url": url})
            assert s_rec.output == f_rec.output and f_rec.meta["chars"] > 20_000
            name = Path(f_rec.meta["path"]).name
            assert (sctx.workspace_dir / name).read_bytes() == (fctx.workspace_dir / name).read_bytes()
            path = f"/work/{name}"
            s_grep = bash(shell, f"grep -n -i -E 'lookbehind' {path}").output.split("\n")
            f_grep = fte.execute("grep", {"pattern": "lookbehind", "path": path, "context": 0}).output.split("\n")
            shell_hits = [tuple(line.split(":", 1)) for line in s_grep]
            structured_hits = [tuple(line.split(": ", 1)) for line in f_grep[1:] if re.match(r"^\d+: ", line)]
            assert 0 < len(shell_hits) <= 20
            short = [(n, t) for n, t in shell_hits if len(t) <= 600]
            assert [h for h in structured_hits if len(h[1]) <= 600] == short
            assert [n for n, _ in structured_hits] == [n for n, _ in shell_hits]
            n = int(shell_hits[0][0])
            assert bash(shell, f"sed -n '{n}p' {path}").output == shell_hits[0][1]
            read = fte.execute("read", {"path": path, "offset": n, "limit": 1}).output.split("\n")[0]
            assert read == f"{n}: {shell_hits[0][1]}"
        finally:
            shell.close()
            fte.close()


def test_search_facts_say_whether_the_result_cache_answered(docker_ready: None, tmp_path: Path, corpus: LocalCorpus) -> None:
    """A search fact's ``cache_hit``: False when the backend was asked, True when the shared result cache
    answered — the same for a shell ``search`` (through the gateway) and the structured tool."""
    from fte_shell.search.cache import CachedSearch

    cached = CachedSearch(corpus, tmp_path / "search-cache", owns_backend=False)
    cfg = RunConfig()
    sctx = QuestionContext(cfg, tmp_path / "ws-shell", RunWorld(cached, corpus), "test-cache-hit-shell")
    fctx = QuestionContext(cfg, tmp_path / "ws-fte", RunWorld(cached, corpus), "test-cache-hit-fte")
    shell, fte = make_profile("shell", sctx), make_profile("fte", fctx)
    try:
        first = bash(shell, "search chess club Thursday")
        again = bash(shell, "search chess club Thursday; search 'copper ledger'")
        structured = fte.execute("search", {"query": "chess club Thursday"})
    finally:
        shell.close()
        fte.close()
    assert [s["cache_hit"] for s in first.meta["searches"]] == [False]
    assert [(s["query"], s["cache_hit"]) for s in again.meta["searches"]] == [
        ("chess club Thursday", True), ("copper ledger", False)]
    assert [s["cache_hit"] for s in structured.meta["searches"]] == [True]
    assert first.meta["searches"][0]["urls"] == structured.meta["searches"][0]["urls"]
