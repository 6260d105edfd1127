# fte-shell warden: the sandbox container's main process (bash, run as `bash warden.sh TTL`).
#
# It is a bash script, not a Python program, to be small: ~0.3 MiB of private memory against ~4 MiB for a
# Python interpreter, and the bash binary's pages are shared with the session shell of every sandbox.
# After its start it runs shell builtins only (no fork), so it works even when a fork bomb holds every
# pid of the container.
#
# By default it is PID 1 (SandboxConfig.protect_warden): the kernel drops a signal sent to a namespace's
# PID 1 from inside the namespace unless PID 1 handles it. The warden ignores every signal it does not
# need, so `kill -9 -1`, `kill -TERM 1`, `kill -SEGV 1` from the agent cannot end it; as PID 1 bash reaps
# the zombies re-parented to it. Only the host reaches it.
#
# 1. Dead-man timer: exits TTL seconds after its start, so the container stops (and is auto-removed) even
#    when the harness that started it was SIGKILLed.
# 2. Fork-bomb breaker: every half second it reads the pids cgroup; when the container has used 90 % of
#    its process limit for a second, it kills every process except the session shell, PID 1 and itself.
#    A box without a pids cgroup of its own (bwrap or rootless podman limited by rlimits only) counts the
#    processes of its pid namespace (/proc, a glob: no fork) against its RLIMIT_NPROC, read at start.
# 3. Timeout enforcer: on SIGUSR1 (the host's `docker kill --signal USR1`: no new process has to start in
#    the container) it kills the timed-out command's processes: it freezes every process that started
#    after the command began (all but the session shell, PID 1 and itself), kills those that ignore
#    SIGINT, sends SIGINT to the rest and, while it still runs the command, to the shell together (like
#    Ctrl-C: the shell abandons the rest of the command), kills whatever is left, interrupts a builtin
#    loop in the shell (or kills the shell when it ignores SIGINT: the host then starts a new one), and
#    writes a SWEPT line to the session's terminal so the host knows the sweep is over (also when the
#    kill failed half-way).
#    The agent can send SIGUSR1 too (it runs as the same user), so a sweep is only done when the host
#    asked for it: before signalling, the host writes a fresh request to $REQUEST, a file in the gateway
#    directory, which is mounted read-only in the container: `TOKEN START_CS IDLE_STDOUT`. A signal
#    without a new token is ignored. START_CS is when the host sent the command, in hundredths of a
#    second of the box's /proc/uptime clock (the host measured the offset when the shell started); the
#    processes that started since are the command's. IDLE_STDOUT is the shell's stdout between commands
#    (`-`: its terminal): while the shell's stdout (/proc/SHELL/fd/1) is anything else, it is inside the
#    command (the command's output file, or a redirection of the command's own).
#
# 4. Shell starter (the reset of a reused box): on SIGUSR1 with a new token in $SPAWN (`TOKEN PTS`, then
#    the command's words, each ended by a NUL) it ends every other process of the box (`kill -KILL -1`
#    from PID 1 spares only PID 1; the agent cannot end or stop the warden), waits until none is left,
#    then starts the command as a new session on the terminal PTS (one the host made in the box's devpts
#    and holds the master of), with the environment the warden itself was started with and every signal
#    at its default: what the engine's exec would have started, without an exec (Docker's costs about
#    80 ms of the daemons' CPU). Nothing of the agent's runs when it starts, so nothing can race it.
#
# The session shell writes `SHELL_PID TTY` to $STATE once, when it starts (nothing per command).
#
# Sourced with FTE_WARDEN_LIB=1 it only defines its functions (the tests call them on the host).

STATE=${FTE_WARDEN_STATE:-/opt/fte/run/state}
REQUEST=${FTE_WARDEN_REQUEST:-/run/fte/sweep}
SPAWN=${FTE_WARDEN_SPAWN:-/run/fte/spawn}
LAST_SPAWN=
ENV0=()
CLK_TCK=100
TICK_FD=
LAST_REQUEST=
WANTED=
PIDS_DIR=
NPROC_MAX=0
T=()

log() { printf 'fte-shell warden: %s\n' "$*" >&2; }

# nap SECONDS: sleep without a process (read with a timeout on a pipe nobody writes to)
nap() { read -r -t "$1" -u "$TICK_FD" _ 2>/dev/null; }

# uptime_cs: seconds since boot, in hundredths, into UP
uptime_cs() {
  local up _x
  IFS=' ' read -r up _x 2>/dev/null </proc/uptime
  up=${up/./}
  UP=$((10#${up:-0}))
}

# read_state: the session shell's pid and terminal into S_PID S_TTY
read_state() {
  local a b
  S_PID= S_TTY=
  IFS=' ' read -r a b 2>/dev/null <"$STATE" || return 1
  [[ $a =~ ^[0-9]+$ && -n $b ]] || return 1
  S_PID=$a S_TTY=$b
}

# started_at PID: when PID started, in hundredths of a second since boot, into ST (1 if it is gone)
started_at() {
  local line rest f
  ST=
  IFS= read -r line 2>/dev/null <"/proc/$1/stat" || return 1
  rest=${line##*) }
  f=($rest)  # numbers and a state letter: nothing to glob
  [[ ${f[19]} =~ ^[0-9]+$ ]] || return 1
  ST=$((${f[19]} * 100 / CLK_TCK))
}

ignores_sigint() {
  local k v
  while IFS=$' \t' read -r k v; do
    if [[ $k == SigIgn: ]]; then
      (((16#$v >> 1) & 1))
      return
    fi
  done 2>/dev/null <"/proc/$1/status"
  return 1
}

# targets T0 PROTECTED...: the pids that started at or after T0 (hundredths), except the protected, in T
targets() {
  local t0=$1 d pid
  shift
  local protect=" $* "
  T=()
  for d in /proc/[0-9]*; do
    pid=${d#/proc/}
    [[ $protect == *" $pid "* ]] && continue
    started_at "$pid" || continue
    ((ST >= t0 - 1)) && T+=("$pid")
  done
}

signal_all() {  # signal_all SIG PID...
  local sig=$1
  shift
  (($#)) && kill "-$sig" "$@" 2>/dev/null
  return 0
}

# in_command SHELL_PID IDLE_STDOUT: the shell runs a command (its stdout is not its stdout between
# commands; also when /proc/SHELL/fd/1 cannot be read)
in_command() {
  [[ ! /proc/$1/fd/1 -ef $2 ]]
}

kill_command() {  # kill_command SHELL_PID T0 IDLE_STDOUT (T0 in hundredths of the box's uptime)
  local shell=$1 t0c=$2 idle=$3 running=0 p i
  local -a pids ignoring rest
  local -a protect=(1 "$$" "$PPID" "$shell")
  targets "$t0c" "${protect[@]}"
  pids=("${T[@]}")
  in_command "$shell" "$idle" && running=1
  if ((${#pids[@]})); then
    # Like Ctrl-C: the shell and the command's processes get SIGINT together, so a foreground child that
    # dies of SIGINT makes the shell (and any bash in between) abandon the rest of the command. All are
    # frozen first, so nothing forks in between; processes that ignore SIGINT (background jobs) are
    # killed before anything resumes, so a background subshell cannot go on to its next command.
    signal_all STOP "${pids[@]}"
    ignoring=() rest=()
    for p in "${pids[@]}"; do
      if ignores_sigint "$p"; then ignoring+=("$p"); else rest+=("$p"); fi
    done
    signal_all KILL "${ignoring[@]}"
    signal_all INT "${rest[@]}"
    ((running)) && signal_all INT "$shell"
    signal_all CONT "${rest[@]}"
    nap 0.03
  elif ((running)) && ignores_sigint "$shell"; then
    # a loop of builtins in a shell that ignores SIGINT (`trap '' INT`): nothing can interrupt it. End
    # the shell: the host sees it die and starts a fresh one in the same directory.
    signal_all KILL "$shell"
    return 0
  elif ((running)); then  # a loop of shell builtins in the shell itself
    signal_all INT "$shell"
  fi
  for ((i = 0; i < 100; i++)); do
    targets "$t0c" "${protect[@]}"
    ((${#T[@]})) || break
    signal_all STOP "${T[@]}"  # freeze first, so a fork bomb cannot outrun the kill
    signal_all KILL "${T[@]}"
    nap 0.01
  done
  nap 0.03
  in_command "$shell" "$idle" && signal_all INT "$shell"  # SIGINT was caught or came too early: once more
  return 0
}

report_swept() {  # report_swept TTY: tell the host, on the session's terminal, that the sweep is over
  printf '\n__FTE_%s\n' SWEPT 2>/dev/null >>"$1"
  return 0
}

# sweep T0 IDLE_STDOUT: kill the processes of the command the host sent at T0 (hundredths of the box's
# uptime), then report SWEPT (also when the kill failed half-way: the host must never wait for a report
# that does not come). The command may have ended just now: its background jobs go all the same.
sweep() {
  read_state || return 0
  local tty=$S_TTY idle=$2
  [[ $idle == - ]] && idle=$S_TTY
  if [[ $1 =~ ^[0-9]+$ ]]; then
    kill_command "$S_PID" "$((10#$1))" "$idle" || log "sweep failed (status $?)"
  else
    log "a sweep request without a start time: nothing killed"
  fi
  report_swept "$tty"
}

# on_usr1 (the trap): only note the request and wake the main loop (a newline on the tick pipe). bash
# keeps one timer for `read -t`: a `read` run inside a trap that interrupted a timed read would leave the
# interrupted one without its timeout, so the sweep itself runs in the main loop, outside the trap.
on_usr1() {
  [[ -n $WANTED ]] && return 0  # at most one pending wake-up: the pipe can never fill up
  WANTED=1
  printf '\n' >&"$TICK_FD" 2>/dev/null
  return 0
}

# handle_request: a new shell and a sweep when the host asked for them (a new token in $SPAWN, $REQUEST)
handle_request() {
  local req= t0= idle=
  WANTED=
  IFS=' ' read -r req t0 idle 2>/dev/null <"$REQUEST"
  handle_spawn
  [[ -n $req && $req != "$LAST_REQUEST" ]] || return 0
  LAST_REQUEST=$req
  sweep "$t0" "${idle:--}"
}

# end_all: kill every process of the box but this one, until none is left (zombies are reaped by bash's
# SIGCHLD handler); false when some are left after 10 s. Only as PID 1 (kill -1 spares PID 1 alone).
end_all() {
  local i d p st
  for ((i = 0; i < 1000; i++)); do
    kill -KILL -1 2>/dev/null
    p=
    for d in /proc/[0-9]*; do
      [[ ${d#/proc/} == 1 ]] && continue
      IFS= read -r st 2>/dev/null <"$d/stat" || continue
      st=${st##*) }
      [[ ${st:0:1} == Z ]] && continue
      p=${d#/proc/}
      break
    done
    [[ -z $p ]] && return 0
    ((i < 50)) || nap 0.01  # (a nap is 10 ms at least: the killed ones usually end within a few scans)
  done
  return 1
}

# handle_spawn: start a new shell when the host asked for one (a new token in $SPAWN)
handle_spawn() {
  local tok= pts=
  local -a argv=()
  { IFS=' ' read -r tok pts && mapfile -d '' -t argv; } 2>/dev/null <"$SPAWN"
  [[ -n $tok && $tok != "$LAST_SPAWN" ]] || return 0
  LAST_SPAWN=$tok
  if [[ $$ != 1 || ! $pts =~ ^/dev/pts/[0-9]+$ || ${#argv[@]} == 0 ]]; then
    log "a spawn request it cannot follow (not PID 1, or no terminal or command): nothing started"
    return 0
  fi
  if ! end_all; then
    log "processes are left after the kill: no new shell"
    return 0
  fi
  # (an asynchronous list: bash opens the terminal in the child; setsid does not fork, the child not
  # being a process group leader, and makes the terminal its controlling one)
  (exec /usr/bin/setsid -c /usr/bin/env -i --default-signal "${ENV0[@]}" "${argv[@]}") <>"$pts" >&0 2>&0 &
  return 0
}

pids_usage() {  # into P_CUR P_MAX (P_MAX 0: no limit)
  local base raw
  for base in $PIDS_DIR /sys/fs/cgroup/pids /sys/fs/cgroup; do
    { IFS= read -r P_CUR <"$base/pids.current" && IFS= read -r raw <"$base/pids.max"; } 2>/dev/null || continue
    [[ $P_CUR =~ ^[0-9]+$ ]] || continue
    PIDS_DIR=$base
    [[ $raw =~ ^[0-9]+$ ]] && P_MAX=$raw || P_MAX=0
    return 0
  done
  ((NPROC_MAX > 0)) || return 1
  local -a all=(/proc/[0-9]*)  # this pid namespace's processes (no cgroup: the rlimit is the limit)
  P_CUR=${#all[@]}
  P_MAX=$NPROC_MAX
  return 0
}

break_fork_bomb() {  # kill everything but PID 1, the warden and the session shell
  local i
  local -a protect=(1 "$$" "$PPID")
  read_state && protect+=("$S_PID")
  for ((i = 0; i < 100; i++)); do
    if pids_usage && ((P_MAX > 0 && P_CUR * 2 < P_MAX)); then
      break  # the bomb is gone; leave the processes started since alone
    fi
    targets 0 "${protect[@]}"
    ((${#T[@]})) || break
    signal_all STOP "${T[@]}"
    signal_all KILL "${T[@]}"
    nap 0.01
  done
}

main() {
  local ttl=${1:-21600} deadline pressure=0 tick sig
  [[ $ttl =~ ^[0-9]+$ ]] || ttl=21600
  # every signal the agent could send is ignored (as PID 1 the kernel then drops it); SIGCHLD keeps
  # bash's own handler, which reaps the orphans re-parented to PID 1
  for sig in HUP INT QUIT ILL TRAP ABRT BUS FPE USR2 SEGV PIPE ALRM TERM STKFLT TSTP TTIN TTOU URG XCPU \
    XFSZ VTALRM PROF WINCH IO PWR SYS; do
    trap '' "$sig" 2>/dev/null
  done
  CLK_TCK=$(getconf CLK_TCK 2>/dev/null) || CLK_TCK=100
  [[ $CLK_TCK =~ ^[1-9][0-9]*$ ]] || CLK_TCK=100
  # a pipe nobody writes to, for nap (a fifo opened read-write, then unlinked)
  tick=/opt/fte/run/.warden-tick.$$
  mkfifo -m 600 "$tick" && exec {TICK_FD}<>"$tick"
  rm -f "$tick"
  if [[ -z $TICK_FD ]]; then  # no fifo (an unusual image): a pipe to a process that never writes
    exec {TICK_FD}< <(exec sleep infinity)
  fi
  mapfile -d '' -t ENV0 2>/dev/null </proc/self/environ  # (as started: bash's own variables are not in it)
  trap on_usr1 USR1
  NPROC_MAX=$(ulimit -u 2>/dev/null) || NPROC_MAX=0
  [[ $NPROC_MAX =~ ^[0-9]+$ ]] || NPROC_MAX=0
  uptime_cs
  deadline=$((UP + ttl * 100))
  while :; do
    uptime_cs
    ((UP >= deadline)) && exit 0
    nap 0.5
    [[ -n $WANTED ]] && handle_request
    if pids_usage && ((P_MAX > 0 && P_CUR * 10 >= P_MAX * 9)); then
      if ((++pressure >= 2)); then
        break_fork_bomb
        pressure=0
      fi
    else
      pressure=0
    fi
  done
}

[[ -n $FTE_WARDEN_LIB ]] || main "$@"
