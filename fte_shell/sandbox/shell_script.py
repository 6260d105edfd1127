"""What the persistent shell runs: the functions installed in every (re)started shell (:data:`_INIT`,
:func:`init_script`); the host side, which sends one line per command and reads the report, is
:mod:`.session` (nothing here runs per command).

A new shell writes its pid and terminal (``/proc/PID/fd/0`` where ``tty`` cannot name it: gVisor hands
an exec its terminal as a host file) to the state file the warden reads (once: nothing per command;
the host's sweep request carries the command's start, on the box's clock, which the READY line gives)
and prints ``READY <nonce> <pid> <uptime>``. Per command the shell writes the command's output to a
file on the box's private tmpfs, then one end-of-command report to its terminal: ``BEGIN <nonce>``, the
output, ``END <nonce> <status> <size> <cwd>``; the output file is read and emptied through fd 3, which
the shell does not hold (no copy of an open descriptor to save and restore, as one of 0 or 1 would
need), and the shell's stdout is its terminal (or channel) again from the report on (the warden tells a
running command by it).
A short output is written inside the report's single write (``read`` drops NUL bytes: an output it
read nothing of though the file is not empty, only NULs, takes the long way, which counts its bytes). A long one by one ``dd`` of at most the
cap + 1 bytes, in 128 KiB blocks (every write to the terminal costs a wake-up of each relay between it
and the host, Docker's containerd-shim and dockerd, podman's conmon and exec client, and of the reader);
its file offset, which the shell reads from ``/proc/self/fdinfo`` (a builtin ``read``: no process),
says whether the output was longer than the cap. Only then are its last ``tail`` bytes sent by ``tail``
(and its size taken from that one's offset), with size -1 otherwise: one process for an output within
the cap, two beyond it (it was ``wc``, in a subshell, then ``cat``, or ``head`` and ``tail``: three or
four; each costs about 1-1.5 ms in a box here). Where fdinfo has no ``pos`` (gVisor), ``wc -c`` gives
the size. ``LC_ALL=C`` for each program spares it loading the locale (about 0.3 ms).
The output file is then removed (bash's loadable ``unlink``, from the image's bash-builtins: no
process), so the box's tmpfs holds no file per command; a shell without it only empties the file.
"""

from __future__ import annotations

INLINE_BYTES = 900
"""An output of up to this many characters (of the shell's locale: bytes for ASCII) goes back inside
the one write of the end-of-command report (bash's stdout on a terminal is line-buffered with a 1 KiB
buffer: a report that fits is one write, so one wake-up of every relay and of the reader); a longer one
is written by ``dd`` in large blocks (bash's own printf would write it line by line). (No ``LC_ALL=C``
around the ``read``: setting it reloads the locale, about 50 µs twice per command; the report is
assembled by an assignment, half the bash time of ``printf -v``; the markers' words are split in the
source, so the functions' text never holds a marker.)"""


_INIT = r"""
/usr/bin/stty raw -echo 2>/dev/null
PS1=''; PS2=''; PS0=''; PROMPT_COMMAND=''; unset HISTFILE; set +o history; set +H; set +m
shopt -s expand_aliases; shopt -u checkwinsize 2>/dev/null
__fte_post() {
  __fte_sz=-1 __fte_d=
  if [[ -s $2 ]] && { \builtin read -r -d '' -N @INLINE1@ -u 3 __fte_d || [[ -z $__fte_d ]]; } 3<"$2"; then
    __fte_d= __fte_x=
    \builtin printf '\n__FTE_%s_%s\n' BEGIN "$1"
    { LC_ALL=C /usr/bin/dd bs=128K count=$(( $3 + 1 )) iflag=count_bytes status=none <&3 &&
      IFS=$'\t' \builtin read -r __fte_x __fte_p </proc/self/fdinfo/3; } 3<"$2" 2>/dev/null || :
    [[ $__fte_x == pos: ]] || __fte_p=$(LC_ALL=C /usr/bin/wc -c <"$2")
    if (( __fte_p > $3 )); then
      __fte_x=
      { LC_ALL=C /usr/bin/tail -c "$5" <&3 &&
        IFS=$'\t' \builtin read -r __fte_x __fte_sz </proc/self/fdinfo/3; } 3<"$2" 2>/dev/null || :
      [[ $__fte_x == pos: ]] && (( __fte_sz > $3 )) || __fte_sz=$(LC_ALL=C /usr/bin/wc -c <"$2")
    fi
    \builtin : 3>|"$2"
    __fte_r=$'\n__FTE_'END_"$1 ${__fte_st:-0} $__fte_sz ${PWD//[$'\n\r']/}"$'\n'
  else
    [[ -n $__fte_d || -s $2 ]] && \builtin : 3>|"$2"
    __fte_r=$'\n__FTE_'BEGIN_$1$'\n'$__fte_d$'\n__FTE_'END_"$1 ${__fte_st:-0} -1 ${PWD//[$'\n\r']/}"$'\n'
    __fte_d=
  fi
  [[ -z $__fte_ul ]] || \builtin unlink "$2" 2>/dev/null
  \builtin printf '%s' "$__fte_r"
  [[ $__fte_f != *x* ]] || \builtin set -x
}
\builtin enable -f /usr/lib/bash/unlink unlink 2>/dev/null && __fte_ul=1
__fte_x=$(/usr/bin/tty) || __fte_x=/proc/$$/fd/0
\builtin printf '%s %s\n' "$$" "$__fte_x" >|@STATE@
__fte_f=; __fte_st=0
\builtin cd -- @CWD@ 2>/dev/null || \builtin cd /work
IFS=' ' \builtin read -r __fte_up __fte_x </proc/uptime
\builtin printf '\n__FTE_%s_%s %s %s\n' READY @NONCE@ "$$" "$__fte_up"
__fte_up= __fte_x=
"""


def _quote(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'"


def init_script(state: str, cwd: str, nonce: str, *, rlimit_as: int | None = None) -> str:
    """Set up a fresh shell in ``cwd`` (falling back to /work); it ends by printing ``READY nonce pid
    uptime`` (the box's /proc/uptime: the host measures the box's clock by it). ``rlimit_as``: bytes of
    address space for the shell and what it starts (soft and hard: the agent cannot raise it)."""
    text = (_INIT.replace("@STATE@", state).replace("@CWD@", _quote(cwd)).replace("@NONCE@", nonce)
            .replace("@INLINE1@", str(INLINE_BYTES + 1)))
    if rlimit_as:  # (after the stty line: not echoed)
        stty = "/usr/bin/stty raw -echo 2>/dev/null\n"
        text = text.replace(stty, f"{stty}\\builtin ulimit -v {max(rlimit_as >> 10, 1)} 2>/dev/null\n", 1)
    return text
