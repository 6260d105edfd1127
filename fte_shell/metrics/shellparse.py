"""Parse and classify the bash commands of the shell profile.

Every command line is split into simple commands by :mod:`.shellsplit` (bashlex, with a fallback
tokenizer); the script of ``bash -c '…'`` / ``sh -c "…"`` is split in turn. Each simple command is classified (see :data:`Kind`) and the /work documents it
reads are resolved against the workspace listing. Definitions: ``docs/metrics.md``.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from .shellsplit import Split, split_commands

Kind = Literal["search", "fetch", "grep", "read", "list", "other"]
"""search: ``search``; fetch: ``fetch``; grep: grep/egrep/fgrep/rg/zgrep with document operands (or a
recursive search); read: sed/head/tail/cat/awk/less/more/nl/tac/cut with document operands; list: ls,
find, list_fetched, wc, du, stat, tree, file; other: everything else, including grep-like and read-like
commands that only filter their stdin (``… | head -5``)."""

GREP_TOOLS = frozenset({"grep", "egrep", "fgrep", "rg", "zgrep"})
READ_TOOLS = frozenset({"sed", "head", "tail", "cat", "awk", "gawk", "mawk", "less", "more", "nl", "tac", "cut"})
LIST_TOOLS = frozenset({"ls", "find", "list_fetched", "wc", "du", "stat", "tree", "file"})
WRAPPERS = frozenset({"timeout", "nice", "command", "env", "stdbuf", "time", "nohup", "exec", "builtin"})
GLOB_CHARS = re.compile(r"[*?\[]")

# options taking a separate argument, per tool (short letters; long options use --opt=value or are listed)
_ARG_SHORT = {
    "grep": "efmABCdDX",
    "rg": "efgmABCMjtTE",
    "sed": "efl",
    "head": "nc",
    "tail": "ncs",
    "awk": "fFv",
    "cut": "dfcb",
    "nl": "bdfhilnpsvw",
}
_ARG_LONG = {
    "grep": {"--regexp", "--file", "--max-count", "--after-context", "--before-context", "--context",
             "--include", "--exclude", "--exclude-dir", "--directories", "--devices", "--label"},
    "rg": {"--regexp", "--file", "--glob", "--iglob", "--max-count", "--after-context", "--before-context",
           "--context", "--type", "--type-not", "--max-columns", "--threads", "--encoding", "--max-depth",
           "--sort", "--sortr", "--replace", "--colors", "--color"},
    "sed": {"--expression", "--file", "--line-length"},
    "head": {"--lines", "--bytes"},
    "tail": {"--lines", "--bytes", "--sleep-interval", "--pid", "--max-unchanged-stats"},
    "awk": {"--file", "--field-separator", "--assign"},
    "cut": {"--delimiter", "--fields", "--characters", "--bytes", "--output-delimiter"},
}
# tools whose first positional operand is a program/pattern, not a file (unless -e/-f gave one)
_FIRST_IS_SCRIPT = {"grep", "rg", "sed", "awk"}


class SimpleCommand(BaseModel):
    """One simple command of a command line, classified."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    argv: list[str]
    """Words after stripping assignments and wrappers (``timeout 5``, ``env``, ``nice`` …)."""

    tool: str
    """Base name of the program (``/usr/bin/grep`` → ``grep``)."""

    kind: Kind
    """The class of the command (see :data:`Kind`)."""

    operands: list[str] = Field(default_factory=list)
    """Non-option operands that name files or URLs (for grep-like/read-like: files; fetch: URLs)."""

    recursive: bool = False
    """A recursive search (``grep -r``/``-R``, any ``rg``)."""

    docs: list[str] = Field(default_factory=list)
    """Workspace documents (file names) the command reads, resolved against the listing."""

    whole_cache: bool = False
    """The command reads every document of the workspace (recursive search of /work, ``/work/*``,
    a glob matching all files)."""

    pattern: str | None = None
    """grep-like: the pattern (first positional, or the first ``-e``/``--regexp`` value)."""

    offset: int | None = None
    """read-like: first line of an explicit window (``sed -n 'A,Bp'`` → A, ``tail -n +K`` → K)."""

    limit: int | None = None
    """read-like: explicit number of lines (``sed -n 'A,Bp'`` → B-A+1, ``head -n N`` / ``tail -n N`` → N)."""

    nested: bool = False
    """It came from the script of a ``bash -c '…'`` / ``sh -c "…"`` command."""


class ParsedCommand(BaseModel):
    """A whole command line: its simple commands in textual order."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    commands: list[SimpleCommand]
    """Simple commands in the order they appear."""

    parser: Literal["bashlex", "fallback"]
    """Which parser produced the split."""

    cwd_after: str
    """Working directory after top-level ``cd`` commands (tracked across calls of one session; a ``cd``
    in a subshell, a pipeline or a command substitution does not change it)."""


# --- classification ------------------------------------------------------------------------------------
def _strip(argv: list[str]) -> list[str]:
    """Remove leading assignments and wrapper programs (with their own options/duration)."""
    words = list(argv)
    while words:
        w = words[0]
        if re.fullmatch(r"[A-Za-z_]\w*=.*", w):
            words.pop(0)
            continue
        base = posixpath.basename(w)
        if base in WRAPPERS and len(words) > 1:
            words.pop(0)
            while words and (words[0].startswith("-") or re.fullmatch(r"[A-Za-z_]\w*=.*", words[0])):
                words.pop(0)
            if base == "timeout" and words and re.fullmatch(r"\d+(\.\d+)?[smhd]?", words[0]):
                words.pop(0)
            if base == "nice" and words and re.fullmatch(r"-?\d+", words[0]):
                words.pop(0)
            continue
        break
    return words


def _operands(tool: str, args: list[str]) -> tuple[list[str], bool, str | None]:
    """(file operands, recursive flag, script/pattern) for ``tool``'s argument list; the script is the
    first ``-e``/``--regexp``/``--expression`` value, else the first positional (grep, rg, sed, awk)."""
    arg_short = _ARG_SHORT.get(tool, "")
    arg_long = _ARG_LONG.get(tool, set())
    positional: list[str] = []
    recursive = tool == "rg"
    script_by_option = False
    script: str | None = None
    i = 0
    end_of_opts = False
    while i < len(args):
        a = args[i]
        i += 1
        if end_of_opts or a == "-" or not a.startswith("-") or (tool in ("head", "tail") and re.fullmatch(r"[-+]\d+", a)):
            if tool in ("head", "tail") and re.fullmatch(r"[-+]\d+", a) and not end_of_opts:
                continue
            positional.append(a)
            continue
        if a == "--":
            end_of_opts = True
            continue
        if a.startswith("--"):
            name = a.split("=", 1)[0]
            if name in ("--recursive", "--dereference-recursive"):
                recursive = True
            if name in ("--regexp", "--file", "--expression") and tool in _FIRST_IS_SCRIPT:
                script_by_option = True
                if script is None and name != "--file":
                    script = a.split("=", 1)[1] if "=" in a else (args[i] if i < len(args) else None)
            if name in arg_long and "=" not in a:
                i += 1
            continue
        # short option cluster
        letters = a[1:]
        for j, ch in enumerate(letters):
            if tool in ("grep", "egrep", "fgrep", "zgrep") and ch in "rR":
                recursive = True
            if ch in arg_short:
                if tool in _FIRST_IS_SCRIPT and ch in ("e", "f"):
                    script_by_option = True
                    if script is None and ch == "e":
                        rest = letters[j + 1 :]
                        script = rest if rest else (args[i] if i < len(args) else None)
                if j == len(letters) - 1:
                    i += 1  # argument is the next word
                break  # rest of the cluster is the argument
    if tool in _FIRST_IS_SCRIPT and not script_by_option and positional:
        script = positional[0]
        positional = positional[1:]
    return positional, recursive, script


_SED_WINDOW = re.compile(r"\s*(\d+)\s*(?:,\s*(\+)?(\d+)\s*)?p\s*;?\s*(?:q\s*)?")
_COUNT = re.compile(r"[-+]?\d+")


def _window(tool: str, args: list[str], script: str | None) -> tuple[int | None, int | None]:
    """(offset, limit) of an explicit line window of a read-like command (docs/metrics.md, Table 8)."""
    if tool == "sed":
        quiet = False
        for a in args:
            if a in ("--quiet", "--silent"):
                quiet = True
            elif a.startswith("-") and not a.startswith("--"):
                for ch in a[1:]:
                    if ch == "n":
                        quiet = True
                    if ch in "efl":
                        break
        m = _SED_WINDOW.fullmatch(script or "")
        if not (quiet and m):
            return None, None
        first = int(m.group(1))
        if m.group(3) is None:
            return first, 1
        last = first + int(m.group(3)) if m.group(2) else int(m.group(3))
        return first, max(0, last - first + 1)
    if tool in ("head", "tail"):
        for k, a in enumerate(args):
            val: str | None = None
            if a in ("-n", "--lines"):
                val = args[k + 1] if k + 1 < len(args) else None
            elif a.startswith("--lines="):
                val = a.split("=", 1)[1]
            elif re.fullmatch(r"-n[-+]?\d+", a):
                val = a[2:]
            elif re.fullmatch(r"-\d+", a):
                val = a[1:]
            if val is not None and _COUNT.fullmatch(val):
                if tool == "tail" and val.startswith("+"):
                    return int(val[1:]), None
                return None, abs(int(val))
    return None, None


def classify(argv: list[str], piped: bool = False) -> SimpleCommand:
    """Classify one simple command (documents are resolved later by :func:`resolve`)."""
    words = _strip(argv)
    if not words:
        return SimpleCommand(argv=argv, tool="", kind="other")
    tool = posixpath.basename(words[0])
    args = words[1:]
    norm = {"egrep": "grep", "fgrep": "grep", "zgrep": "grep", "gawk": "awk", "mawk": "awk"}.get(tool, tool)
    if tool == "search":
        return SimpleCommand(argv=words, tool=tool, kind="search")
    if tool == "fetch":
        urls = [a for a in args if not a.startswith("-")]
        return SimpleCommand(argv=words, tool=tool, kind="fetch", operands=urls)
    if tool in GREP_TOOLS:
        files, recursive, pattern = _operands(norm, args)
        if not files and not recursive:
            return SimpleCommand(argv=words, tool=tool, kind="other")  # filters stdin
        if not files and recursive:
            files = ["."]  # grep -r / rg without a path search the working directory
        return SimpleCommand(argv=words, tool=tool, kind="grep", operands=files, recursive=recursive,
                             pattern=pattern)
    if tool in READ_TOOLS:
        files, _, script = _operands(norm, args)
        files = [f for f in files if f != "-"]
        if not files:
            return SimpleCommand(argv=words, tool=tool, kind="other")  # filters stdin
        offset, limit = _window(norm, args, script)
        return SimpleCommand(argv=words, tool=tool, kind="read", operands=files, offset=offset, limit=limit)
    if tool in LIST_TOOLS:
        files = [a for a in args if not a.startswith("-")]
        if piped and not files and tool != "list_fetched":
            return SimpleCommand(argv=words, tool=tool, kind="other")  # ``… | wc -l`` counts stdin
        return SimpleCommand(argv=words, tool=tool, kind="list", operands=files)
    return SimpleCommand(argv=words, tool=tool, kind="other")


# --- resolution against the workspace listing ---------------------------------------------------------
def resolve(
    cmd: SimpleCommand, docs: Sequence[str], *, mount: str = "/work", cwd: str = "/work"
) -> SimpleCommand:
    """Fill ``docs`` and ``whole_cache`` of a grep/read command: each operand is made absolute against
    ``cwd``; ``/work`` itself (recursive only) or a glob matching every document reads the whole cache; a
    glob reads the documents it matches; a plain path reads that document if it is in the listing."""
    if cmd.kind not in ("grep", "read") or not docs:
        return cmd
    mount = mount.rstrip("/") or "/"
    all_docs = list(dict.fromkeys(docs))
    hit: list[str] = []
    whole = False
    for op in cmd.operands:
        path = posixpath.normpath(posixpath.join(cwd, op))
        if path == mount:
            if cmd.recursive:
                whole = True
                hit.extend(all_docs)
            continue
        if not path.startswith(mount + "/"):
            continue
        rel = path[len(mount) + 1 :]
        if GLOB_CHARS.search(rel):
            matched = [d for d in all_docs if fnmatch.fnmatchcase(d, rel)]
            if matched and len(matched) == len(all_docs):
                whole = True
            hit.extend(matched)
        elif rel in all_docs:
            hit.append(rel)
    return cmd.model_copy(update={"docs": list(dict.fromkeys(hit)), "whole_cache": whole})


SHELLS = frozenset({"bash", "sh", "dash", "zsh", "ksh"})
MAX_NESTING = 3


def shell_c_script(argv: list[str]) -> str | None:
    """The script of ``bash -c 'SCRIPT'`` / ``sh -c "SCRIPT"`` (after wrappers), else None."""
    words = _strip(argv)
    if not words or posixpath.basename(words[0]) not in SHELLS:
        return None
    for k, w in enumerate(words[1:], start=1):
        if w == "--":
            return None
        if not w.startswith("-"):
            return None  # ``bash script.sh``: a file, not a string
        if "c" in w[1:] and not w.startswith("--"):
            return words[k + 1] if k + 1 < len(words) else None
    return None


def _expand_shell_c(words: list[Split], depth: int = 0) -> list[tuple[list[str], bool, bool, bool]]:
    """Replace each ``bash -c 'SCRIPT'`` by the simple commands of SCRIPT (they run in a child shell: a
    ``cd`` there does not move the session). Returns (argv, piped, top, nested)."""
    out: list[tuple[list[str], bool, bool, bool]] = []
    for argv, piped, top in words:
        script = shell_c_script(argv) if depth < MAX_NESTING else None
        if script is None:
            out.append((argv, piped, top, depth > 0))
            continue
        inner, _parser = split_commands(script)
        out.extend(_expand_shell_c([(a, p or piped, False) for a, p, _t in inner], depth + 1))
    return out


def parse_command(
    command: str, docs: Sequence[str] = (), *, mount: str = "/work", cwd: str = "/work"
) -> ParsedCommand:
    """Split, classify and resolve one command line. ``docs`` is the workspace listing (file names) at
    that point; ``cwd`` the session's working directory before the command (top-level ``cd`` updates it:
    the session is persistent)."""
    words, parser = split_commands(command)
    out: list[SimpleCommand] = []
    for argv, piped, top, nested in _expand_shell_c(words):
        c = classify(argv, piped)
        if nested:
            c = c.model_copy(update={"nested": True})
        if c.tool == "cd" and top:
            target = c.argv[1] if len(c.argv) > 1 else "~"
            if not target.startswith(("~", "-", "$")):
                cwd = posixpath.normpath(posixpath.join(cwd, target))
        out.append(resolve(c, docs, mount=mount, cwd=cwd))
    return ParsedCommand(commands=out, parser=parser, cwd_after=cwd)
