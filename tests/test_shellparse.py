"""Classification of shell commands and resolution of the /work documents they read."""

from __future__ import annotations

import pytest

from fte_shell.metrics.shellparse import classify, parse_command

DOCS = ["a.txt", "b.txt", "wiki-c.txt"]


def kinds(cmd: str, cwd: str = "/work") -> list[tuple[str, str, list[str], bool]]:
    return [(c.tool, c.kind, c.docs, c.whole_cache) for c in parse_command(cmd, DOCS, cwd=cwd).commands]


@pytest.mark.parametrize(
    ("cmd", "expected"),
    [
        ("search 'who wrote x'", [("search", "search", [], False)]),
        ("fetch https://x.org/a", [("fetch", "fetch", [], False)]),
        ("grep -n foo /work/a.txt | head -5",
         [("grep", "grep", ["a.txt"], False), ("head", "other", [], False)]),
        ("grep -rn foo /work", [("grep", "grep", DOCS, True)]),
        ("grep -i foo /work/*.txt", [("grep", "grep", DOCS, True)]),
        ("rg -i 'a|b' /work/[ab].txt 2>/dev/null || echo none",
         [("rg", "grep", ["a.txt", "b.txt"], False), ("echo", "other", [], False)]),
        ("rg -i born", [("rg", "grep", DOCS, True)]),  # rg without a path searches the cwd (/work)
        ("egrep -e x -A 3 b.txt", [("egrep", "grep", ["b.txt"], False)]),
        ("sed -n '1,20p' /work/b.txt", [("sed", "read", ["b.txt"], False)]),
        ("head -n 50 /work/wiki-c.txt && tail -20 /work/a.txt",
         [("head", "read", ["wiki-c.txt"], False), ("tail", "read", ["a.txt"], False)]),
        ("awk 'NR<5' /work/a.txt", [("awk", "read", ["a.txt"], False)]),
        ("cat /work/a.txt | grep -i baz", [("cat", "read", ["a.txt"], False), ("grep", "other", [], False)]),
        ("ls -la /work; list_fetched", [("ls", "list", [], False), ("list_fetched", "list", [], False)]),
        ("find /work -name '*.txt'", [("find", "list", [], False)]),
        ("wc -l /work/*.txt", [("wc", "list", [], False)]),
        ("timeout 5 grep -c x /work/a.txt", [("grep", "grep", ["a.txt"], False)]),
        ("LC_ALL=C grep x /tmp/notes.txt", [("grep", "grep", [], False)]),  # outside /work: no document
        ("echo $(cat /work/b.txt) > /tmp/y", [("cat", "read", ["b.txt"], False), ("echo", "other", [], False)]),
        ("for f in /work/a.txt /work/b.txt; do head -3 $f; done", [("head", "read", ["a.txt", "b.txt"], False)]),
        ("(cd /tmp && python3 -c 'print(1)')", [("cd", "other", [], False), ("python3", "other", [], False)]),
        ("grep foo /work/missing.txt", [("grep", "grep", [], False)]),
    ],
)
def test_classify_and_resolve(cmd: str, expected: list) -> None:
    assert kinds(cmd) == expected


def test_cd_and_relative_paths() -> None:
    p = parse_command("cd /work && grep -c foo *.txt", DOCS, cwd="/tmp")
    assert p.cwd_after == "/work"
    assert [(c.kind, c.docs, c.whole_cache) for c in p.commands][1] == ("grep", DOCS, True)
    # from /tmp, a relative glob does not reach /work
    assert kinds("grep foo *.txt", cwd="/tmp") == [("grep", "grep", [], False)]
    assert kinds("grep -r foo .", cwd="/work") == [("grep", "grep", DOCS, True)]
    # a cd in a subshell or a pipeline does not move the session
    assert parse_command("(cd /tmp && ls); grep x a.txt", DOCS).cwd_after == "/work"
    assert parse_command("(cd /tmp && ls); grep x a.txt", DOCS).commands[-1].docs == ["a.txt"]
    assert parse_command("cd /tmp | cat", DOCS).cwd_after == "/work"
    assert parse_command("{ cd /tmp; }", DOCS).cwd_after == "/tmp"
    assert parse_command("cd /tmp && (cd /work)", DOCS, cwd="/work").cwd_after == "/tmp"


def test_fallback_parser_on_syntax_bashlex_rejects() -> None:
    p = parse_command('grep "unbalanced /work/a.txt | head', DOCS)
    assert p.parser == "fallback"
    assert [c.kind for c in p.commands] == ["grep", "other"]
    p2 = parse_command("case x in x) cat /work/a.txt;; esac", DOCS)
    assert any(c.tool == "cat" and c.docs == ["a.txt"] for c in p2.commands)


def test_glob_subset_is_not_whole_cache() -> None:
    assert kinds("grep x /work/wiki-*.txt") == [("grep", "grep", ["wiki-c.txt"], False)]


def test_classify_options_with_arguments() -> None:
    c = classify(["grep", "-m", "3", "-e", "pat", "/work/a.txt", "/work/b.txt"])
    assert c.operands == ["/work/a.txt", "/work/b.txt"]
    c = classify(["sed", "-e", "s/a/b/", "f.txt"])
    assert c.operands == ["f.txt"] and c.kind == "read"
    c = classify(["head", "-5"], piped=True)
    assert c.kind == "other"
    assert classify(["/usr/bin/grep", "-R", "x"]).recursive


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        # (kind, docs, pattern, offset, limit, nested) per simple command
        ("sed -n '10,29p' /work/a.txt", [("read", ["a.txt"], None, 10, 20, False)]),
        ("sed -n 5p /work/a.txt", [("read", ["a.txt"], None, 5, 1, False)]),
        ("sed -ne 3,+4p /work/a.txt", [("read", ["a.txt"], None, 3, 5, False)]),
        ("sed 's/a/b/' /work/a.txt", [("read", ["a.txt"], None, None, None, False)]),  # no -n: no window
        ("head -n 20 /work/a.txt", [("read", ["a.txt"], None, None, 20, False)]),
        ("head -5 /work/a.txt", [("read", ["a.txt"], None, None, 5, False)]),
        ("tail -n +40 /work/a.txt", [("read", ["a.txt"], None, 40, None, False)]),
        ("grep -i -e 'foo|bar' /work/a.txt", [("grep", ["a.txt"], "foo|bar", None, None, False)]),
        ("rg -n --regexp=x.y /work", [("grep", ["a.txt"], "x.y", None, None, False)]),
        ("bash -c 'search \"foo bar\" && grep -rn baz /work'",
         [("search", [], None, None, None, True), ("grep", ["a.txt"], "baz", None, None, True)]),
        ("timeout 5 sh -c \"head -n 3 /work/a.txt\" | wc -l",
         [("read", ["a.txt"], None, None, 3, True), ("other", [], None, None, None, False)]),
        ("bash script.sh", [("other", [], None, None, None, False)]),  # a file, not a -c string
    ],
)
def test_patterns_windows_and_shell_c(command: str, expected: list[tuple]) -> None:
    got = [(c.kind, c.docs, c.pattern, c.offset, c.limit, c.nested) for c in parse_command(command, ["a.txt"]).commands]
    assert got == expected


def test_cd_inside_shell_c_does_not_move_the_session() -> None:
    assert parse_command("bash -c 'cd /tmp'", ["a.txt"]).cwd_after == "/work"
