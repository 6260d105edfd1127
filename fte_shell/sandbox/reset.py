"""Making a used box as good as a fresh one: what :meth:`~.facade.Sandbox.reset` does inside the box
and on the host (``SandboxPool.release`` hands a reset box out again instead of starting a new one).

A fresh box holds the warden (PID 1), an empty ``/tmp``, an empty session directory (:data:`~.base.RUN_MOUNT`),
an empty workspace and gateway directory and a new shell. What the agent can change in a box, and how
the reset undoes it:

* processes (the session shell, background jobs, ``setsid``/``nohup`` daemons): all run as the box's
  user. Where this process can reach into the box (root; runc or bwrap) the warden (PID 1, which the
  agent cannot end or stop) ends every one of them with ``kill -KILL -1`` until none is left and only
  then starts the new shell's first process (:mod:`.warden_shell`: no engine exec); elsewhere the engine
  starts it and :data:`RESET_SCRIPT`, run by that process as the box's user (:data:`RESET_PRELUDE`), does
  the same (``kill -1`` spares the namespace's PID 1 and the sender itself);
* files: the hardening leaves the agent these writable places, each a tmpfs of the box —
  :data:`WRITABLE` — which the script empties (a directory the agent made unreadable is given back
  its owner's rights first); in a bwrap box ``/dev`` too (:data:`DEV_LINKS`); the root file system
  and ``/work`` are read-only;
* System V IPC objects (which outlive their processes): removed (``ipcrm --all``) when
  ``/proc/sysvipc`` lists any;
* the host's side: the gateway is stopped and its fetches under way waited for
  (:data:`RESET_FETCH_WAIT_S`), then the workspace (``/work``, filled by those fetches) and the
  gateway directory are emptied in place (they stay the directories the box has mounted);
* the shell's state (environment, working directory, functions, aliases, options): a new shell.

A box is reset only when the warden is PID 1 (``protect_warden``: else ``kill -1`` would end it too),
its root file system is read-only (else the agent could have changed anything) and it does not run on
gVisor (where ``kill -1`` from inside ends the box): :func:`refusal` says why not; the pool then closes
it instead.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

from ..config import SandboxConfig
from ..errors import SandboxError
from .base import RUN_MOUNT

WRITABLE = ("/tmp", "/dev/shm", "/dev/mqueue", RUN_MOUNT)
"""The box's places the agent's user can write to (those that exist in a given box: Docker and podman
mount all four; bwrap ``/tmp`` and the session's directory), each a tmpfs of the box's own."""

RESET_FETCH_WAIT_S = 30.0
"""How long a reset waits for the fetches its gateway has under way (a late page must not land in the
next user's workspace); a box still fetching then is closed instead."""

KILL_WAIT_S = 10.0
"""How long the wipe goes on killing before it gives up on a process that does not end (the reset then
fails and the box is closed)."""

DEV_LINKS = {"core": "/proc/kcore", "fd": "/proc/self/fd", "ptmx": "pts/ptmx", "stdin": "/proc/self/fd/0",
             "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"}
"""The symbolic links of a bwrap box's ``/dev`` (``bwrap --dev``), whose tmpfs belongs to the box's user:
the reset removes whatever else the agent put there and mends these (its device nodes are bind mounts,
which it cannot remove)."""

RESET_SCRIPT = r"""
cd / || exit 2
shopt -s dotglob nullglob
woke= t0=${EPOCHREALTIME/./}
for ((i = 0; ${EPOCHREALTIME/./} - t0 < @KILL_US@; i++)); do  # (a loaded host may take a while to end them)
  builtin kill -KILL -1 2>/dev/null
  left= dead=
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    [[ $p == 1 || $p == "$$" ]] && continue
    IFS= read -r st 2>/dev/null <"$d/stat" || continue
    st=${st##*) }
    if [[ ${st:0:1} != Z ]]; then
      left+=" $p"
    elif [[ ${st:2:2} == "1 " ]]; then  # an orphan's zombie, for the warden to reap (not one of a
      dead+=" $p"                       # parent outside the box: the engine's or the host's business)
    fi
  done
  [[ -z $left$dead ]] && break
  if [[ -z $left && -z $woke ]]; then  # only orphans' zombies: wake the warden (PID 1), which reaps them
    builtin kill -USR1 1 2>/dev/null     # (a wake-up without a new sweep request does nothing else)
    woke=1
  fi
  ((i < 20)) || /bin/sleep 0.01
done
if [[ -n $left ]]; then
  echo "processes still alive after the kill:$left"
  exit 3
fi
gone=() fix=() make=()
if [[ -O /dev ]]; then  # bwrap: /dev is a tmpfs of the box's user; keep (and mend) only what bwrap made
  declare -A want=(@LINKS@) good=()
  while IFS=' ' read -r -d '' dep y m && read -r -d '' p && read -r -d '' t; do  # (bash cannot read a link or a mode)
    [[ $y == d && $m != 755 && -O $p && ($dep == 0 || $p == /dev/shm) ]] && fix+=("$p")
    ((dep == 0)) && continue
    [[ $p == /dev/* ]] || continue
    n=${p#/dev/}
    case $n in
      null | zero | full | random | urandom | tty | pts) ;;
      shm) if [[ $y == d ]]; then good[shm]=1; else gone+=("$p"); fi ;;
      *) if [[ -n ${want[$n]} && $y == l && $t == "${want[$n]}" ]]; then good[$n]=1; else gone+=("$p"); fi ;;
    esac
  done < <(/usr/bin/find /dev @WRITABLE@ -maxdepth 1 -printf '%d %y %m\0%p\0%l\0' 2>/dev/null)
  for n in "${!want[@]}"; do [[ -n ${good[$n]} ]] || make+=("$n"); done
  [[ -n ${good[shm]} ]] || make+=(shm)
fi
((${#fix[@]})) && /bin/chmod 755 -- "${fix[@]}"  # bwrap's tmpfs roots are the box user's (mode 755)
for d in @WRITABLE@; do
  [[ -d $d && -w $d ]] && gone+=("$d"/*)
done
if ((${#gone[@]})) && ! /bin/rm -rf -- "${gone[@]}" 2>/dev/null; then
  /bin/chmod -R u+rwX -- "${gone[@]}" 2>/dev/null  # a directory the agent made unreadable
  /bin/rm -rf -- "${gone[@]}" 2>/dev/null
fi
full=
for n in "${make[@]}"; do
  if [[ $n == shm ]]; then
    /bin/mkdir -m 755 /dev/shm || full+=" /dev/shm"
  else
    /bin/ln -s -- "${want[$n]}" "/dev/$n" || full+=" /dev/$n"
  fi
done
for d in @WRITABLE@; do
  [[ -d $d && -w $d ]] || continue
  e=("$d"/*)
  ((${#e[@]})) && full+=" $d"
done
if [[ -O /dev ]]; then
  for e in /dev/*; do
    n=${e#/dev/}
    case $n in
      null | zero | full | random | urandom | tty | pts | shm) ;;
      *) [[ -n ${want[$n]} && -L $e ]] || full+=" $e" ;;
    esac
  done
fi
if [[ -n $full ]]; then
  echo "could not empty:$full"
  exit 4
fi
for f in /proc/sysvipc/shm /proc/sysvipc/sem /proc/sysvipc/msg; do
  mapfile -t l 2>/dev/null <"$f"
  if ((${#l[@]} > 1)); then
    /usr/bin/ipcrm --all 2>/dev/null
    break
  fi
done
/usr/bin/stty raw -echo 2>/dev/null  # what a process of the last user put in the terminal's input: drained
for ((i = 0; i < 1000; i++)); do
  IFS= read -r -t 0 -u 0 2>/dev/null || break
  IFS= read -r -d '' -N 4096 -t 0.01 -u 0 _ 2>/dev/null
done
printf '\n__FTE_%s\n' WIPED
exec "$@"
""".replace("@WRITABLE@", " ".join(WRITABLE)).replace("@KILL_US@", str(int(KILL_WAIT_S * 1e6))).replace("@LINKS@", " ".join(f"[{k}]={v}" for k, v in DEV_LINKS.items()))
"""Run in the box as its user as ``bash -c RESET_SCRIPT NAME ARGV…`` (the next shell of the session,
:data:`RESET_PRELUDE`): kill every process but PID 1 and itself (zombies left by orphans are waited for
while the warden reaps them), empty :data:`WRITABLE`, remove System V IPC objects, then become ``ARGV`` (the new shell, its environment the box's own: nothing of the
script's is exported). Before it becomes ``ARGV`` it drains the terminal's input and prints
:data:`WIPED` (what came before on the terminal, a process of the last user may have written). When
something could not be done it says what and exits (status 3: processes left, 4: files left) instead."""

WIPED = b"\n__FTE_WIPED\n"
"""The line :data:`RESET_SCRIPT` prints when it is done, just before it becomes the shell: the host sends
the new shell's set-up only after it."""


def refusal(cfg: SandboxConfig) -> str | None:
    """Why boxes of ``cfg`` cannot be reset (None: they can)."""
    if not cfg.protect_warden:
        return "the warden is not PID 1 (sandbox.protect_warden is false): killing the agent's processes would end it"
    if not cfg.read_only_root:
        return "the root file system is writable (sandbox.read_only_root is false): the agent may have changed it"
    if cfg.runtime == "runsc":
        return "under gVisor (runtime runsc) a kill of every process from inside ends the box"
    return None


RESET_PRELUDE = ("bash", "--norc", "--noprofile", "-c", RESET_SCRIPT, "fte-reset")
"""The reset's new shell starts as ``RESET_PRELUDE + shell argv`` (``ShellSession.start(prelude=)``): the one
process wipes the box, then becomes the shell, so nothing of the last user runs when the shell starts;
a failed wipe ends it and the shell does not start."""


def empty_dir(path: Path) -> None:
    """Remove everything in ``path``, which stays (a box has it mounted); raises :class:`SandboxError`
    when something is left."""
    with os.scandir(path) as it:
        entries = list(it)
    for e in entries:
        p = Path(e.path)
        with contextlib.suppress(FileNotFoundError):
            if e.is_dir(follow_symlinks=False):
                shutil.rmtree(p)
            else:
                p.unlink()
    if any(path.iterdir()):
        raise SandboxError(f"could not empty {path}")
