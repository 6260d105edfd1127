"""Structured fetch/search and the four baselines through the real pipeline: a local corpus built from a
tiny JSONL-like list in tmp (search + docids), pages served on loopback by tests/servers.py, the real
FetchService and Workspace, and the visit-summary reader model as the scripted OpenAI-compatible server
reached through the real ``openai`` client. Nothing of ours is mocked."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest
from servers import LoopbackServer

from fte_shell.config import ModelConfig, RunConfig
from fte_shell.errors import ConfigError
from fte_shell.model import ModelClient
from fte_shell.profiles import PROFILES, QuestionContext, ToolResult, make_profile
from fte_shell.prompts import summary_instructions
from fte_shell.search import LocalCorpus, format_results
from fte_shell.search.corpus import CorpusDoc, build_corpus
from fte_shell.standins.server import ScriptedServer
from fte_shell.workspace import Workspace, parse_document
from fte_shell.world import RunWorld

# Paragraphs written for these tests (no third-party text).
ORCHARD = "\n".join(
    [
        "The Hollow Pine orchard lies on the eastern slope of the valley.",
        "It was planted in 1911 by the Marrow family, who grew pears and quinces.",
        "",
        "In 1950 the orchard passed to the county, which opened it to visitors.",
        "The orchard keeper today is Ada Quill, who lives in the stone lodge.",
        "Each autumn the county holds a cider festival under the old trees.",
    ]
)
LIGHTHOUSE = "\n".join(
    [
        "Gull Point lighthouse stands on a granite spit at the mouth of the bay.",
        "Its lamp was first lit in 1872 and was electrified in 1936.",
        "The tower is 31 metres tall and painted with red and white bands.",
    ]
)
FILLER = "\n".join(f"Filler sentence number {k} about weather and tides." for k in range(1, 121))

HTML_PAGE = """<!doctype html><html><head><title>River Otters of the Lowlands</title></head>
<body><nav>Home | About</nav><main><h1>River Otters of the Lowlands</h1>
<p>River otters in the lowland marshes eat mostly fish and crayfish.</p>
<p>A survey in 2019 counted 412 otters along the Brindle river.</p>
<p>Otter cubs stay with their mother for about a year.</p></main>
<footer>Copyright nobody</footer></body></html>"""


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> LocalCorpus:
    docs = [
        CorpusDoc(docid="hollow-pine-orchard", title="Hollow Pine orchard", text=ORCHARD),
        CorpusDoc(docid="gull-point-lighthouse", title="Gull Point lighthouse", text=LIGHTHOUSE,
                  url="https://lights.example/gull-point"),
        CorpusDoc(docid="tide-notes", title="Tide notes", text=FILLER + "\nThe orchard keeper is unrelated here."),
    ]
    out = build_corpus(docs, tmp_path_factory.mktemp("corpus") / "idx", name="tiny")
    c = LocalCorpus(out)
    yield c
    c.close()


@pytest.fixture()
def server() -> LoopbackServer:
    with LoopbackServer() as srv:
        srv.route("/otters", body=HTML_PAGE)
        yield srv


def make_ctx(tmp_path: Path, corpus: LocalCorpus | None, server: LoopbackServer | None = None,
             model: ModelClient | None = None, **agent: object) -> QuestionContext:
    data: dict[str, object] = {"agent": agent}
    if server is not None:
        data["sandbox"] = {"fetch_policy": {"allow_private": [server.host_port]}}
    cfg = RunConfig.model_validate(data)
    return QuestionContext(config=cfg, workspace_dir=tmp_path / "ws", world=RunWorld(corpus, corpus),
                           run_id="test", model=model)


def call(p: object, name: str, **args: object) -> ToolResult:
    return p.execute(name, dict(args))  # type: ignore[attr-defined]


# --- search: identical text everywhere ------------------------------------------------------------------
@pytest.mark.parametrize("name", ["fte", "snippet-only", "visit-snippet", "open-find"])
def test_search_prints_format_results_of_the_backend(tmp_path: Path, corpus: LocalCorpus, name: str) -> None:
    p = make_profile(name, make_ctx(tmp_path, corpus))
    try:
        r = call(p, "search", query="orchard keeper")
        assert not r.error
        assert r.output == format_results("orchard keeper", corpus.search("orchard keeper", 10))
        assert r.output.startswith('2 results for "orchard keeper":\n[1] Hollow Pine orchard\n    hollow-pine-orchard\n')
        facts = r.meta.pop("searches")
        assert r.meta == {"query": "orchard keeper", "n": 10, "results": 2}
        assert [(f["query"], f["n"], f["backend"], f["urls"]) for f in facts] == [
            ("orchard keeper", 10, corpus.name, [h.url for h in corpus.search("orchard keeper", 10)])]
        one = call(p, "search", query="lighthouse", n=1)
        assert one.output == format_results("lighthouse", corpus.search("lighthouse", 1))
        assert call(p, "search", query="zebra xylophone").output == 'No results for "zebra xylophone".'
        bad = call(p, "search", query="x", n=0)
        assert bad.error and bad.output == "Error: n must be at least 1, got 0"
    finally:
        p.close()


def test_snippet_only_offers_search_alone_and_needs_a_backend(tmp_path: Path, corpus: LocalCorpus) -> None:
    p = make_profile("snippet-only", make_ctx(tmp_path, corpus))
    assert [t["function"]["name"] for t in p.tools()] == ["search"]
    r = call(p, "fetch", url="hollow-pine-orchard")
    assert r.error and r.output == "Error: unknown tool 'fetch'. Available tools: search."
    with pytest.raises(ConfigError, match="needs a search backend"):
        make_profile("snippet-only", make_ctx(tmp_path, None))


def test_unknown_profile_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown profile 'browser'"):
        make_profile("browser", make_ctx(tmp_path, None))
    assert PROFILES == ("shell", "fte", "snippet-only", "visit-snippet", "visit-summary", "open-find",
                        "fte-no-grep", "fte-no-read", "fte-single-grep", "standard")


# --- structured fetch -----------------------------------------------------------------------------------
def test_fte_fetch_docid_url_and_held(tmp_path: Path, corpus: LocalCorpus, server: LoopbackServer) -> None:
    ctx = make_ctx(tmp_path, corpus, server)
    p = make_profile("fte", ctx)
    ws = Workspace(ctx.workspace_dir)
    try:
        r = call(p, "fetch", url="hollow-pine-orchard")
        name = ws.filename_for("hollow-pine-orchard", "docid")
        body_chars = len(ORCHARD) + 1
        assert r.output == f'/work/{name}  {body_chars:,} chars  new  hollow-pine-orchard  "Hollow Pine orchard"'
        facts = r.meta.pop("fetches")
        assert r.meta == {"path": f"/work/{name}", "chars": body_chars, "new": True, "source": "hollow-pine-orchard"}
        written = parse_document((ctx.workspace_dir / name).read_text()).retrieved_at  # the file's Retrieved: line
        assert datetime.fromisoformat(facts[0].pop("retrieved_at")).replace(microsecond=0) == written
        assert facts == [{"url": "hollow-pine-orchard", "ok": True, "path": f"/work/{name}", "source": "hollow-pine-orchard",
                          "chars": body_chars, "new": True, "error": None}]
        again = call(p, "fetch", url="hollow-pine-orchard")
        assert again.output == r.output.replace("  new  ", "  held  ") and again.meta["new"] is False
        # a corpus document's URL is served from the corpus (a Docid: file, no HTTP)
        gull = call(p, "fetch", url="https://lights.example/gull-point")
        assert "  new  gull-point-lighthouse  " in gull.output
        # a loopback page through HTTP + conversion
        url = server.url("/otters")
        web = call(p, "fetch", url=url)
        assert not web.error, web.output
        wname = ws.filename_for(url, "url")
        assert web.output.startswith(f"/work/{wname}  ") and web.output.endswith(f'  new  {url}  "River Otters of the Lowlands"')
        content = (ws.root / wname).read_text()
        assert content.startswith(f"URL: {url}\nTitle: River Otters of the Lowlands\nRetrieved: ")
        assert "412 otters along the Brindle river" in content and "Copyright nobody" not in content
        assert server.count("/otters") == 1
        assert call(p, "fetch", url=url).meta["new"] is False and server.count("/otters") == 1
        # then explore it
        g = call(p, "grep", pattern=r"\d+ otters", path=f"/work/{wname}", context=0)
        assert g.output.startswith(f"/work/{wname}:\n") and "412 otters" in g.output
        listing = call(p, "list_fetched")
        assert listing.output == ws.listing_text() and listing.output.endswith("3 documents, " + listing.output.rsplit(", ", 1)[1])
    finally:
        p.close()


@pytest.mark.parametrize(
    ("ref", "start"),
    [
        ("http://10.1.2.3/secret", "Error: refused "),
        ("file:///etc/passwd", "Error: refused file:///etc/passwd: scheme file: is not supported"),
        ("no-such-doc", "Error: unknown document 'no-such-doc': not a URL and not an id in the local corpus"),
        ("   ", "Error: fetch needs a URL or a document id"),
    ],
)
def test_fte_fetch_refusals_are_one_line_errors(tmp_path: Path, corpus: LocalCorpus, ref: str, start: str) -> None:
    p = make_profile("fte", make_ctx(tmp_path, corpus))
    try:
        r = call(p, "fetch", url=ref)
        assert r.error and r.output.startswith(start) and "\n" not in r.output, r.output
        assert Workspace(tmp_path / "ws").entries() == []
    finally:
        p.close()


# --- visit-snippet --------------------------------------------------------------------------------------
def test_visit_snippet_returns_the_best_chunk_and_writes_nothing(tmp_path: Path, corpus: LocalCorpus) -> None:
    ctx = make_ctx(tmp_path, corpus, visit_snippet_chars=200)
    p = make_profile("visit-snippet", ctx)
    try:
        assert [t["function"]["name"] for t in p.tools()] == ["search", "visit"]
        r = call(p, "visit", url="hollow-pine-orchard", goal="who is the orchard keeper today")
        # chunks of <= 200 chars along lines: [lines 1-3 (the third is blank)], [lines 4-5], [line 6]
        second = "In 1950 the orchard passed to the county, which opened it to visitors.\nThe orchard keeper today is Ada Quill, who lives in the stone lodge.\n"
        start = ORCHARD.index("In 1950") + 1
        assert r.output == (
            "Docid: hollow-pine-orchard\nTitle: Hollow Pine orchard\n"
            f"Passage 2 of 3 (characters {start:,}-{start + len(second) - 1:,} of {len(ORCHARD) + 1:,}), best match for the goal:\n\n"
            + second.strip()
        )
        assert r.meta["chunk"] == 2 and r.meta["chunks"] == 3 and r.meta["score"] > 0
        none = call(p, "visit", url="hollow-pine-orchard", goal="zzz qqq")
        assert "No passage shares a word with the goal; showing passage 1 of 3" in none.output
        assert none.output.endswith("It was planted in 1911 by the Marrow family, who grew pears and quinces.")
        bad = call(p, "visit", url="hollow-pine-orchard", goal="  ")
        assert bad.error and bad.output == "Error: visit needs a goal: say what you want to find on the page"
        missing = call(p, "visit", url="nope", goal="x")
        assert missing.error and "unknown document 'nope'" in missing.output
        assert not (tmp_path / "ws").exists() or Workspace(tmp_path / "ws").entries() == []
    finally:
        p.close()


def test_visit_snippet_over_http_and_long_pages(tmp_path: Path, corpus: LocalCorpus, server: LoopbackServer) -> None:
    p = make_profile("visit-snippet", make_ctx(tmp_path, corpus, server))
    try:
        r = call(p, "visit", url=server.url("/otters"), goal="how many otters did the survey count")
        assert r.output.startswith(f"URL: {server.url('/otters')}\nTitle: River Otters of the Lowlands\nPassage 1 of 1")
        assert "412 otters" in r.output
        long = call(p, "visit", url="tide-notes", goal="orchard keeper")
        text = long.output.split("\n\n", 1)[1]
        assert len(text) <= 3000 and text.endswith("The orchard keeper is unrelated here.")
        assert Workspace(tmp_path / "ws").entries() == []
    finally:
        p.close()


# --- visit-summary --------------------------------------------------------------------------------------
def test_visit_summary_asks_the_reader_model(tmp_path: Path, corpus: LocalCorpus) -> None:
    summary = "The page says the orchard keeper today is Ada Quill."
    with ScriptedServer([summary, "  "]) as srv:
        reader = ModelClient(ModelConfig(base_url=srv.base_url, model="reader", max_retries=0))
        try:
            ctx = make_ctx(tmp_path, corpus, model=reader, visit_summary_page_chars=1000)
            p = make_profile("visit-summary", ctx)
            r = call(p, "visit", url="hollow-pine-orchard", goal="Who keeps the orchard?")
            assert not r.error
            assert r.output == (
                "Docid: hollow-pine-orchard\nTitle: Hollow Pine orchard\n"
                f"Evidence for the goal (summary by the reader model):\n{summary}"
            )
            assert r.meta["truncated"] is False and r.meta["summary_usage"]["total_tokens"] > 0
            sent = srv.requests[0]["messages"]
            assert sent[0] == {"role": "system", "content": summary_instructions()}
            assert sent[1]["content"] == (
                "Goal: Who keeps the orchard?\n\nPage:\nDocid: hollow-pine-orchard\nTitle: Hollow Pine orchard\n\n" + ORCHARD
            )
            assert "tools" not in srv.requests[0]
            # a long page is cut to the bound and the reader is told so; an empty answer is an error
            empty = call(p, "visit", url="tide-notes", goal="tides")
            assert empty.error and empty.output.startswith("Error: visit failed: the reader model returned no text")
            cut = srv.requests[1]["messages"][1]["content"]
            assert cut.endswith(f"[The page continues; only its first 1,000 of {len(FILLER) + 39:,} characters are shown.]")
            p.close()
        finally:
            reader.close()


def test_visit_summary_uses_its_own_reader_when_configured(tmp_path: Path, corpus: LocalCorpus) -> None:
    with ScriptedServer(["Evidence: built in 1872."]) as reader_srv, ScriptedServer(["unused"]) as agent_srv:
        agent_model = ModelClient(ModelConfig(base_url=agent_srv.base_url, model="agent"))
        ctx = make_ctx(tmp_path, corpus, model=agent_model,
                       summary_model={"base_url": reader_srv.base_url, "model": "reader"})
        p = make_profile("visit-summary", ctx)
        try:
            r = call(p, "visit", url="gull-point-lighthouse", goal="When was the lamp first lit?")
            assert r.output.endswith("Evidence: built in 1872.")
            assert len(reader_srv.requests) == 1 and agent_srv.requests == []
            assert reader_srv.requests[0]["model"] == "reader"
        finally:
            p.close()
            agent_model.close()
    # unset endpoint fields of the reader come from the agent's [model]
    with ScriptedServer(["From the same server, another model."]) as srv:
        ctx = make_ctx(tmp_path, corpus, summary_model={"model": "small-reader"})
        ctx.config.model.base_url = srv.base_url
        ctx.config.model.model = "agent-model"
        p = make_profile("visit-summary", ctx)
        try:
            assert call(p, "visit", url="gull-point-lighthouse", goal="lamp").output.endswith("another model.")
            assert srv.requests[0]["model"] == "small-reader"
        finally:
            p.close()
    with pytest.raises(ConfigError, match="needs a reader model"):
        make_profile("visit-summary", make_ctx(tmp_path, corpus))


# --- open-find ------------------------------------------------------------------------------------------
def test_open_find_one_transient_page(tmp_path: Path, corpus: LocalCorpus) -> None:
    p = make_profile("open-find", make_ctx(tmp_path, corpus, open_window_lines=4))
    try:
        assert [t["function"]["name"] for t in p.tools()] == ["search", "open", "scroll", "find"]
        nothing = call(p, "find", pattern="x")
        assert nothing.error and nothing.output == "Error: no page is open: open a page first (open(url))"
        r = call(p, "open", url="hollow-pine-orchard")
        lines = r.output.split("\n")
        assert lines[0] == 'Open page: hollow-pine-orchard  "Hollow Pine orchard"'
        assert lines[1:4] == ["1: Docid: hollow-pine-orchard", "2: Title: Hollow Pine orchard", lines[3]]
        assert lines[3].startswith("3: Retrieved: ") and lines[4] == "4: "
        assert lines[5] == "(Showing lines 1-4 of 10. Scroll down to continue.)"
        down = call(p, "scroll")
        assert down.output.split("\n")[1:] == [
            "5: The Hollow Pine orchard lies on the eastern slope of the valley.",
            "6: It was planted in 1911 by the Marrow family, who grew pears and quinces.",
            "7: ",
            "8: In 1950 the orchard passed to the county, which opened it to visitors.",
            "(Showing lines 5-8 of 10. Scroll down to continue.)",
        ]
        end = call(p, "scroll", direction="down")
        assert end.output.endswith("(Showing lines 9-10 of 10. End of page.)")
        assert call(p, "scroll").output == "Already at the end of the page (lines 9-10 of 10 shown)."
        up = call(p, "scroll", direction="up")
        assert up.output.endswith("(Showing lines 5-8 of 10. Scroll down to continue.)")
        jump = call(p, "scroll", line=9)
        assert jump.output.split("\n")[1] == "9: The orchard keeper today is Ada Quill, who lives in the stone lodge."
        found = call(p, "find", pattern="ORCHARD (keeper|passed)")
        assert found.output == (
            "8: In 1950 the orchard passed to the county, which opened it to visitors.\n"
            "9: The orchard keeper today is Ada Quill, who lives in the stone lodge.\n"
            "(2 matching lines. Scroll with line=N to read around one.)"
        )
        # opening another page releases the first: find sees only the new page
        other = call(p, "open", url="https://lights.example/gull-point", line=5)
        assert other.output.split("\n")[0] == 'Open page: gull-point-lighthouse  "Gull Point lighthouse"'
        assert other.output.split("\n")[1] == "5: Gull Point lighthouse stands on a granite spit at the mouth of the bay."
        gone = call(p, "find", pattern="Ada Quill")
        assert gone.output == "No matches for 'Ada Quill' in the open page (gull-point-lighthouse)."
        # re-opening the open page by id just moves the window
        again = call(p, "open", url="gull-point-lighthouse", line=6)
        assert again.output.split("\n")[1] == "6: Its lamp was first lit in 1872 and was electrified in 1936."
        # a failed open keeps the current page; bad lines and regexes are clear errors
        fail = call(p, "open", url="no-such-doc")
        assert fail.error and "unknown document 'no-such-doc'" in fail.output
        assert "1872" in call(p, "find", pattern="lamp").output
        assert call(p, "scroll", line=99).output == "Error: line 99 is past the end of the page (7 lines)"
        assert call(p, "open", url="hollow-pine-orchard", line=0).error
        assert call(p, "find", pattern="[").output.startswith("Error: invalid regular expression '['")
        bad_dir = call(p, "scroll", direction="left")
        assert bad_dir.error and "'direction': Input should be 'down' or 'up'" in bad_dir.output
        assert Workspace(tmp_path / "ws").entries() == []
    finally:
        p.close()


def test_open_find_caps_matches(tmp_path: Path, corpus: LocalCorpus) -> None:
    p = make_profile("open-find", make_ctx(tmp_path, corpus))
    try:
        call(p, "open", url="tide-notes")
        r = call(p, "find", pattern="filler")
        out = r.output.split("\n")
        assert len(out) == 21 and out[0] == "5: Filler sentence number 1 about weather and tides."
        assert out[-1] == "(120 matching lines; showing the first 20. Narrow the pattern, or scroll with line=N to read around one.)"
        assert r.meta == {"source": "tide-notes", "matches": 120, "shown": 20}
    finally:
        p.close()
