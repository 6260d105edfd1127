"""Split a bash command line into its simple commands (used by :mod:`.shellparse`).

bashlex parses pipelines, ``&&``, ``||``, ``;``, subshells, ``{ …; }``, ``for`` loops (their variable is
expanded from the word list), ``if``/``while`` bodies and command/process substitutions; when it cannot
parse a line, a simple tokenizer splits it on control operators instead.
"""

from __future__ import annotations

import re
import shlex
from typing import Literal

import bashlex

Split = tuple[list[str], bool, bool]
"""(argv, reads a pipe, runs in the top-level shell) of one simple command."""


def _words_bashlex(command: str) -> list[Split]:
    """Every simple command, via bashlex."""
    out: list[Split] = []
    loopvars: dict[str, list[str]] = {}

    def word_values(w: bashlex.ast.node) -> list[str]:
        text = w.word
        m = re.fullmatch(r"\$\{?(\w+)\}?", text)
        if m and m.group(1) in loopvars:
            return list(loopvars[m.group(1)])
        return [text]

    def visit(node: bashlex.ast.node, piped: bool, top: bool = True) -> None:
        kind = node.kind
        if kind == "command":
            argv: list[str] = []
            for p in node.parts:
                if p.kind == "word":
                    argv.extend(word_values(p))
                for sub in _substitutions(p):
                    visit(sub, False, False)
            if argv:
                out.append((argv, piped, top))
        elif kind == "pipeline":
            cmds = [p for p in node.parts if p.kind != "pipe"]
            for i, p in enumerate(cmds):
                visit(p, piped or i > 0, top and len(cmds) == 1)
        elif kind == "list":
            for p in node.parts:
                if p.kind != "operator":
                    visit(p, piped, top)
        elif kind == "compound":
            subshell = bool(node.list) and getattr(node.list[0], "word", "") == "("
            for p in node.list:
                if p.kind not in ("reservedword", "operator"):
                    visit(p, piped, top and not subshell)
        elif kind == "for":
            parts = node.parts
            names = [p for p in parts if p.kind == "word"]
            if names:
                var = names[0].word
                items: list[str] = []
                for p in names[1:]:
                    items.extend(word_values(p))
                loopvars[var] = items
            for p in parts:
                if p.kind not in ("word", "reservedword", "operator"):
                    visit(p, piped, top)
        elif kind in ("if", "while", "until"):
            for p in node.parts:
                if p.kind not in ("reservedword", "operator", "word"):
                    visit(p, piped, top)
        elif kind == "function":
            for p in node.parts:
                if p.kind not in ("reservedword", "word"):
                    visit(p, piped, False)

    for tree in bashlex.parse(command):
        visit(tree, False)
    return out


def _substitutions(node: bashlex.ast.node) -> list[bashlex.ast.node]:
    subs: list[bashlex.ast.node] = []
    for p in getattr(node, "parts", []) or []:
        if p.kind in ("commandsubstitution", "processsubstitution"):
            subs.append(p.command)
        else:
            subs.extend(_substitutions(p))
    return subs


_OPS = {";", "&&", "||", "|", "&", "(", ")", "{", "}", "|&", ";;", "\n"}


def _words_fallback(command: str) -> list[Split]:
    """Split on control operators with shlex; unbalanced quotes are closed at the end."""
    lex = shlex.shlex(command, posix=True, punctuation_chars=";&|(){}")
    lex.whitespace_split = True
    lex.commenters = ""
    tokens: list[str] = []
    try:
        tokens = list(lex)
    except ValueError:  # unbalanced quotes: split on whitespace around control operators
        tokens = re.sub(r"(\|\||&&|;|\||\(|\))", r" \1 ", command).replace('"', " ").replace("'", " ").split()
    out: list[tuple[list[str], bool, bool]] = []
    cur: list[str] = []
    piped = False
    depth = 0
    for tok in tokens + [";"]:
        if tok in _OPS or set(tok) <= set(";&|(){}"):
            if cur:
                out.append((cur, piped, depth == 0 and not piped and tok not in ("|", "|&")))
            cur = []
            piped = tok in ("|", "|&")
            depth += tok.count("(") - tok.count(")")
        elif re.fullmatch(r"\d*[<>]+&?\d*", tok):
            cur.append(tok)
        else:
            cur.append(tok)
    # drop redirection targets from argv
    cleaned: list[Split] = []
    for argv, p, top in out:
        words: list[str] = []
        skip = False
        for w in argv:
            if skip:
                skip = False
                continue
            if re.fullmatch(r"\d*(>>?|<|&>)&?\d*", w):
                skip = not re.fullmatch(r"\d*>&\d+", w)
                continue
            words.append(w)
        if words:
            cleaned.append((words, p, top))
    return cleaned


def split_commands(command: str) -> tuple[list[Split], Literal["bashlex", "fallback"]]:
    """Simple commands of ``command`` in textual order (see :data:`Split`), and which parser split them."""
    try:
        return _words_bashlex(command), "bashlex"
    except Exception:  # noqa: BLE001 - bashlex raises many kinds (ParsingError, NotImplementedError, …)
        return _words_fallback(command), "fallback"


