"""The structured ``fte`` profile's explore tools (grep, read, list_fetched) over a real workspace, plus
dispatch errors (unknown tool, bad arguments, bad regex, bad paths and escapes). Documents are stored with
the real :class:`Workspace`; no part of our code is mocked."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from fte_shell.config import RunConfig
from fte_shell.profiles import QuestionContext, ToolResult, make_profile
from fte_shell.profiles.fte import FteProfile, Matcher, merge_windows, split_lines
from fte_shell.workspace import Document, Workspace

WHEN = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)


def body_lines(n: int, special: dict[int, str] | None = None) -> str:
    """``n`` body lines ``line K`` (K = 1-based body line), with some replaced."""
    special = special or {}
    return "\n".join(special.get(k, f"line {k}") for k in range(1, n + 1))


@pytest.fixture()
def ws(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path / "ws")


def store(ws: Workspace, url: str, title: str, text: str) -> str:
    rec = ws.store(Document(source=url, kind="url", title=title, text=text, retrieved_at=WHEN))
    return rec.path


def profile(ws: Workspace, **agent: object) -> FteProfile:
    cfg = RunConfig.model_validate({"agent": agent})
    p = make_profile("fte", QuestionContext(config=cfg, workspace_dir=ws.root))
    assert isinstance(p, FteProfile)
    return p


def run(p: FteProfile, name: str, **args: object) -> ToolResult:
    return p.execute(name, dict(args))


# --- read -----------------------------------------------------------------------------------------------
def test_read_numbers_whole_file_lines_like_sed(ws: Workspace) -> None:
    path = store(ws, "https://example.org/a", "Alpha page", body_lines(5))
    p = profile(ws)
    r = run(p, "read", path=path)
    assert not r.error
    assert r.output == (
        "1: URL: https://example.org/a\n"
        "2: Title: Alpha page\n"
        "3: Retrieved: 2026-11-30T12:00:00Z\n"
        "4: \n"
        "5: line 1\n6: line 2\n7: line 3\n8: line 4\n9: line 5\n"
        "(Showing lines 1-9 of 9. End of file.)"
    )
    # the same numbering as `sed -n` (split on \n, final newline ends the last line)
    content = (ws.root / Path(path).name).read_text()
    assert split_lines(content)[4] == "line 1" and len(split_lines(content)) == 9
    assert r.meta == {"path": path, "first": 1, "last": 9, "lines": 9}


def test_read_pages_with_continuation_hint(ws: Workspace) -> None:
    path = store(ws, "https://example.org/long", "Long", body_lines(500))
    p = profile(ws)
    first = run(p, "read", path=path)
    lines = first.output.split("\n")
    assert len(lines) == 201 and lines[0].startswith("1: URL: ") and lines[199] == "200: line 196"
    assert lines[-1] == "(Showing lines 1-200 of 504. Use offset=201 to continue.)"
    second = run(p, "read", path=path, offset=201, limit=3)
    assert second.output == "201: line 197\n202: line 198\n203: line 199\n(Showing lines 201-203 of 504. Use offset=204 to continue.)"
    last = run(p, "read", path=path, offset=450)
    assert last.output.split("\n")[-1] == "(Showing lines 450-504 of 504. End of file.)"
    # a limit above the maximum is capped to 200 lines
    capped = run(p, "read", path=path, offset=2, limit=1000)
    assert capped.output.split("\n")[-1] == "(Showing lines 2-201 of 504. Use offset=202 to continue.)"


def test_read_bare_name_and_agent_path_agree(ws: Workspace) -> None:
    path = store(ws, "https://example.org/a", "A", body_lines(3))
    p = profile(ws)
    assert run(p, "read", path=Path(path).name).output == run(p, "read", path=path).output


def test_read_byte_cap(ws: Workspace) -> None:
    long_line = "x" * 999
    path = store(ws, "https://example.org/wide", "Wide", "\n".join(long_line for _ in range(150)))
    p = profile(ws)
    r = run(p, "read", path=path)
    size = len(r.output.encode())
    assert size <= 50_000
    shown = [ln for ln in r.output.split("\n") if ln.endswith(long_line)]
    assert 45 <= len(shown) < 150
    last = 4 + len(shown)
    assert r.output.split("\n")[-1] == f"(Showing lines 1-{last} of 154. Use offset={last + 1} to continue.)"


def test_read_single_huge_line_is_cut_and_says_so(ws: Workspace) -> None:
    path = store(ws, "https://example.org/huge", "Huge", "y" * 120_000)
    p = profile(ws)
    r = run(p, "read", path=path, offset=5)
    assert len(r.output.encode()) <= 50_000
    first, note = r.output.split("\n")
    assert first.startswith("5: yyyy") and first.endswith("…")
    assert note.startswith("(Showing lines 5-5 of 5. End of file. Line 5 was cut after ")
    assert "of 120,000 characters; use grep to find text in it.)" in note


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"offset": 0}, "Error: offset must be at least 1 (line numbers start at 1), got 0"),
        ({"offset": 99}, "Error: offset 99 is past the end of /work/{name} (7 lines)"),
        ({"limit": 0}, "Error: limit must be at least 1, got 0"),
    ],
)
def test_read_bad_ranges(ws: Workspace, args: dict[str, int], message: str) -> None:
    path = store(ws, "https://example.org/a", "A", body_lines(3))
    r = run(profile(ws), "read", path=path, **args)
    assert r.error and r.output == message.format(name=Path(path).name)


@pytest.mark.parametrize(
    "bad",
    ["/etc/passwd", "/work/../etc/passwd", "../ws/x.txt", "/work/sub/x.txt", "..", "a\x00b"],
)
def test_paths_outside_the_workspace_are_refused(ws: Workspace, bad: str) -> None:
    store(ws, "https://example.org/a", "A", "secret-free body")
    (ws.root.parent / "outside.txt").write_text("outside")
    p = profile(ws)
    for tool, extra in (("read", {}), ("grep", {"pattern": "."})):
        r = run(p, tool, path=bad, **extra)
        assert r.error and r.output.startswith("Error: not a workspace file: "), (tool, bad, r.output)


def test_missing_file_names_list_fetched(ws: Workspace) -> None:
    r = run(profile(ws), "read", path="/work/nothing-0000000000000000.txt")
    assert r.error
    assert r.output == "Error: no such cached document: /work/nothing-0000000000000000.txt (use list_fetched to see the paths)"


# --- grep -----------------------------------------------------------------------------------------------
def test_grep_context_default_three_with_merge_and_separator(ws: Workspace) -> None:
    text = body_lines(40, {3: "Alpha one", 5: "alpha two", 30: "ALPHA three"})
    path = store(ws, "https://example.org/a", "A", text)
    r = run(profile(ws), "grep", pattern="alpha", path=path)
    assert not r.error
    # body line K is file line K + 4; windows [3,11] and [30,37] (file lines); the first two merge
    expected = (
        f"{path}:\n"
        "4- \n5- line 1\n6- line 2\n7: Alpha one\n8- line 4\n9: alpha two\n10- line 6\n11- line 7\n12- line 8\n"
        "--\n"
        "31- line 27\n32- line 28\n33- line 29\n34: ALPHA three\n35- line 31\n36- line 32\n37- line 33\n"
        "\n(3 matching lines in 1 file.)"
    )
    assert r.output == expected
    assert r.meta["matches"] == 3 and r.meta["shown"] == 3 and r.meta["context"] == 3


def test_grep_context_zero_and_cap(ws: Workspace) -> None:
    path = store(ws, "https://example.org/a", "A", body_lines(30, {10: "needle", 25: "Needle"}))
    p = profile(ws)
    assert run(p, "grep", pattern="needle", path=path, context=0).output == (
        f"{path}:\n14: needle\n--\n29: Needle\n\n(2 matching lines in 1 file.)"
    )
    wide = run(p, "grep", pattern="needle", path=path, context=50)
    lines = wide.output.split("\n")
    assert lines[1] == "4- " and "24- line 20" in lines  # 10 lines before line 14
    assert wide.output.endswith("(context capped at 10; 2 matching lines in 1 file.)")
    neg = run(p, "grep", pattern="needle", path=path, context=-1)
    assert neg.error and neg.output == "Error: context must be between 0 and 10, got -1"


def test_grep_default_context_is_configurable(ws: Workspace) -> None:
    path = store(ws, "https://example.org/a", "A", body_lines(9, {5: "needle"}))
    r = run(profile(ws, grep_context=1), "grep", pattern="needle", path=path)
    assert r.output == f"{path}:\n8- line 4\n9: needle\n10- line 6\n\n(1 matching line in 1 file.)"


def test_grep_all_files_groups_by_file_in_fetch_order_and_caps_at_20(ws: Workspace) -> None:
    a = store(ws, "https://example.org/a", "A", body_lines(15, {k: f"hit a{k}" for k in range(1, 16)}))
    b = store(ws, "https://example.org/b", "B", body_lines(15, {k: f"HIT b{k}" for k in range(1, 16)}))
    c = store(ws, "https://example.org/c", "C", "nothing here")
    p = profile(ws)
    r = run(p, "grep", pattern=r"hit [ab]\d+", context=0)
    blocks = r.output.split("\n\n")
    assert blocks[0] == a + ":\n" + "\n".join(f"{k + 4}: hit a{k}" for k in range(1, 16))
    assert blocks[1] == b + ":\n" + "\n".join(f"{k + 4}: HIT b{k}" for k in range(1, 6))
    assert blocks[2] == (
        "(showing 20 of 30 matching lines in 2 files; at most 20 are shown: narrow the pattern, give a path "
        "or read around a line.)"
    )
    assert c not in r.output
    assert r.meta == {"matches": 30, "shown": 20, "files": 2, "context": 0, "all_files": True}


def test_grep_no_match_and_empty_cache(ws: Workspace) -> None:
    p = profile(ws)
    empty = run(p, "grep", pattern="x")
    assert not empty.error and empty.output == "No documents are cached yet: fetch a page first."
    path = store(ws, "https://example.org/a", "A", "abc")
    store(ws, "https://example.org/b", "B", "def")
    assert run(p, "grep", pattern="zzz").output == "No matches for 'zzz' in 2 cached documents."
    assert run(p, "grep", pattern="zzz", path=path).output == f"No matches for 'zzz' in {path}."


@pytest.mark.parametrize("whole", [None, "", "/work", "/work/", "."])
def test_grep_path_of_the_mount_means_every_file(ws: Workspace, whole: str | None) -> None:
    a = store(ws, "https://example.org/a", "A", "needle in a")
    b = store(ws, "https://example.org/b", "B", "needle in b")
    args = {"pattern": "needle", "context": 0} | ({} if whole is None else {"path": whole})
    r = profile(ws).execute("grep", args)
    assert r.output == f"{a}:\n5: needle in a\n\n{b}:\n5: needle in b\n\n(2 matching lines in 2 files.)"
    assert r.meta["all_files"] is True


def test_grep_searches_the_header_too_like_shell_grep(ws: Workspace) -> None:
    path = store(ws, "https://example.org/a", "Findable Title", "body")
    r = run(profile(ws), "grep", pattern="^title:", context=0)
    assert r.output == f"{path}:\n2: Title: Findable Title\n\n(1 matching line in 1 file.)"


def test_grep_invalid_regex_is_a_clear_error(ws: Workspace) -> None:
    store(ws, "https://example.org/a", "A", "abc")
    r = run(profile(ws), "grep", pattern="(unclosed")
    assert r.error
    assert r.output == (
        "Error: invalid regular expression '(unclosed': missing ) at position 9 "
        "(Python syntax: escape special characters such as ( ) [ ] . * + ? with a backslash)"
    )


def test_grep_runaway_pattern_is_stopped_with_a_clear_error(ws: Workspace) -> None:
    path = store(ws, "https://example.org/a", "A", "a" * 60 + "!")
    r = run(profile(ws, grep_timeout_s=0.2), "grep", pattern="(a|aa)+$", path=path)
    assert r.error
    assert r.output == (
        "Error: the pattern '(a|aa)+$' took longer than 0.2 s to match (nested repetition such as (a+)+ or "
        "(a|aa)* backtracks without end); simplify it"
    )


def test_grep_long_lines_become_excerpts_around_the_match(ws: Workspace) -> None:
    line = "a" * 5000 + " NEEDLE " + "b" * 5000
    path = store(ws, "https://example.org/a", "A", "before " + "c" * 3000 + "\n" + line)
    r = run(profile(ws), "grep", pattern="needle", path=path, context=1)
    out = r.output.split("\n")
    assert out[1] == "5- before " + "c" * 593 + "…"
    assert out[2].startswith("6: …a") and out[2].endswith("b…") and "NEEDLE" in out[2]
    assert len(out[2]) == len("6: ") + 600 + 2


def test_grep_output_respects_byte_cap(ws: Workspace) -> None:
    text = "\n".join(("hit " + "z" * 590) if k % 2 else ("c" * 600) for k in range(200))
    path = store(ws, "https://example.org/a", "A", text)
    r = run(profile(ws, read_max_bytes=5_000), "grep", pattern="hit", path=path, context=2)
    assert len(r.output.encode()) <= 5_300
    assert "the output size limit was reached" in r.output


@pytest.mark.parametrize(
    "pattern",
    ["foo", "", "x*", "^", "$", r"^\s*$", r"a\sb", r"[^x]+y", r"o\nb", r"(?<=\n)b", r"(?<!\s)foo", r"foo(?!\s)",
     r"\Afoo", r"foo\Z", r"(?>\s*)$", r"b\s*+$", r"\bfoo\b", r"(a|b)\1", "FOO bar"],
)
def test_matcher_finds_exactly_the_lines_a_line_by_line_grep_finds(pattern: str) -> None:
    import re

    lines = ["foo bar", "a", "b  ", "", "  foo", "xy ay", "bb", "foo", "b", "   ", "zfoo  ", "foo ba"]
    rx = re.compile(pattern, re.IGNORECASE)
    expected = [i for i, line in enumerate(lines) if rx.search(line)]
    assert Matcher(pattern, 5.0).matching_lines(lines) == expected


def test_merge_windows() -> None:
    assert merge_windows([0, 2, 9], 1, 11) == [(0, 3), (8, 10)]
    assert merge_windows([5], 0, 6) == [(5, 5)]
    assert merge_windows([1, 4], 1, 10) == [(0, 5)]  # touching windows merge


# --- list_fetched ---------------------------------------------------------------------------------------
def test_list_fetched(ws: Workspace) -> None:
    p = profile(ws)
    assert run(p, "list_fetched").output == "(no documents fetched yet)"
    a = store(ws, "https://example.org/a", "Alpha", "12345")
    b = store(ws, "https://Example.org:443/b#frag", "Beta", "1234567890")
    r = run(p, "list_fetched")
    assert r.output == (
        f'{a}  6 chars  https://example.org/a  "Alpha"\n'  # the body's final newline counts
        f'{b}  11 chars  https://example.org/b  "Beta"\n'
        "2 documents, 17 chars"
    )
    assert r.output == ws.listing_text() and r.meta == {"documents": 2}


# --- dispatch -------------------------------------------------------------------------------------------
def test_unknown_tool_and_bad_arguments(ws: Workspace) -> None:
    p = profile(ws)
    unknown = run(p, "bash", command="ls")
    assert unknown.error and unknown.output == "Error: unknown tool 'bash'. Available tools: fetch, grep, read, list_fetched."
    missing = run(p, "grep")
    assert missing.error and missing.output == (
        "Error: invalid arguments for grep: missing required argument 'pattern'. "
        "Expected: pattern (string, required), path (string), context (integer)."
    )
    extra = run(p, "read", path="/work/x.txt", lines=3)
    assert extra.error and "unexpected argument 'lines'" in extra.output
    typed = run(p, "read", path="/work/x.txt", offset="ten")
    assert typed.error and "'offset': Input should be a valid integer" in typed.output
    not_obj = p.execute("read", ["x"])  # type: ignore[arg-type]
    assert not_obj.error and not_obj.output.startswith("Error: invalid arguments for read: expected a JSON object, got list.")


def test_null_arguments_mean_not_given(ws: Workspace) -> None:
    path = store(ws, "https://example.org/a", "A", body_lines(3, {2: "needle"}))
    p = profile(ws)
    r = p.execute("read", {"path": path, "offset": None, "limit": None})
    assert not r.error and r.output.endswith("(Showing lines 1-7 of 7. End of file.)")
    g = p.execute("grep", {"pattern": "needle", "path": None, "context": None})
    assert g.meta["all_files"] is True and g.meta["context"] == 3
    assert p.execute("grep", {"pattern": None}).output.startswith("Error: invalid arguments for grep: missing required argument 'pattern'")


def test_tools_without_search_backend(ws: Workspace) -> None:
    p = profile(ws)
    assert [t["function"]["name"] for t in p.tools()] == ["fetch", "grep", "read", "list_fetched"]
    p.close()
