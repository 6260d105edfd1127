"""The text the host sends the session's bash: the init script of a (re)started shell, and each command.

Shell functions installed in every (re)started shell. Aliases defined later by the agent cannot change
them (aliases expand when a function is defined); absolute paths bypass the agent's PATH and functions.
See :mod:`fte_shell.session` for the protocol.
"""

from __future__ import annotations

import base64
import secrets

_INIT = r"""
/usr/bin/stty raw -echo 2>/dev/null
PS1=''; PS2=''; PS0=''; PROMPT_COMMAND=''; unset HISTFILE; set +o history; set +H; set +m
shopt -s expand_aliases; shopt -u checkwinsize 2>/dev/null
__fte_tty=$(/usr/bin/tty)
__fte_pre() {
  IFS=' ' \builtin read -r __fte_up __fte_x </proc/uptime
  \builtin printf '%s %s\nrun %s\n' "$$" "$__fte_tty" "$__fte_up" >|@STATE@
}
__fte_post() {
  \builtin printf '%s %s\nidle 0\n' "$$" "$__fte_tty" >|@STATE@
  __fte_sz=-1
  \builtin printf '\n__FTE_%s_%s\n' BEGIN "$1"
  if [[ -s $2 ]]; then
    if LC_ALL=C IFS= \builtin read -r -d '' -N "$(( $3 + 1 ))" __fte_d <"$2"; then
      __fte_sz=$(/usr/bin/wc -c <"$2")
      /usr/bin/head -c "$4" -- "$2"; /usr/bin/tail -c "$5" -- "$2"
      /usr/bin/rm -f -- "$2"
    else
      \builtin printf '%s' "$__fte_d"; \builtin : >|"$2"
    fi
    __fte_d=
  fi
  \builtin printf '\n__FTE_%s_%s %s %s %s\n' END "$1" "${__fte_st:-0}" "$__fte_sz" "${PWD//[$'\n\r']/}"
  if [[ $__fte_f == *x* ]]; then \builtin set -x; fi
}
\builtin printf '%s %s\nidle 0\n' "$$" "$__fte_tty" >|@STATE@
__fte_f=; __fte_st=0
\builtin cd -- @CWD@ 2>/dev/null || \builtin cd /work
\builtin printf '\n__FTE_%s_%s %s\n' READY @NONCE@ "$$"
"""


def _quote(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'"


def _plain(text: str) -> bool:
    """Text that can cross the raw terminal verbatim (no control bytes except tab and newline)."""
    return not any((c < " " and c not in "\t\n") or c == "\x7f" for c in text)


def init_script(state: str, cwd: str, nonce: str) -> str:
    """Set up a fresh shell in ``cwd`` (falling back to /work); it ends by printing ``READY nonce pid``."""
    return _INIT.replace("@STATE@", state).replace("@CWD@", _quote(cwd)).replace("@NONCE@", nonce)


def command_payload(command: str, out_file: str, post: str) -> str:
    """One command, loaded verbatim (base64 when it holds control characters) into a variable by a
    here-document with a random delimiter, ``eval``'d with stdin from /dev/null and its output to
    ``out_file``, then the end-of-command report ``post``."""
    delim = f"__FTE_D_{secrets.token_hex(8)}"
    body = command if command.endswith("\n") else command + "\n"
    if _plain(command):
        load = f"__fte_c=; IFS= \\builtin read -r -d '' __fte_c <<'{delim}' || \\builtin :\n{body}{delim}\n"
    else:
        enc = base64.encodebytes(command.encode("utf-8", "surrogateescape")).decode()
        load = f"__fte_c=; __fte_c=$(/usr/bin/base64 -d <<'{delim}'\n{enc}{delim}\n)\n"
    return (
        load
        + f'\\__fte_pre; \\builtin eval "$__fte_c" </dev/null >|{out_file} 2>&1; '
        + "{ __fte_st=$? __fte_f=$-; \\builtin set +x; } 2>/dev/null; "
        + post
    )
