#!/usr/bin/env bash
# Create the sandbox's base image (default debian:bookworm-slim) WITHOUT a container registry:
# debootstrap a minimal Debian into a temporary directory and `docker import` it.
# For air-gapped hosts and CI. Needs root, debootstrap (installed when missing), a reachable Debian mirror.
#
#   sandbox/bootstrap-base.sh [IMAGE_TAG] [MIRROR]     the image (skipped when it exists; FORCE=1 rebuilds)
#   sandbox/bootstrap-base.sh --tree DIR [MIRROR]      only the tree, in DIR (new or empty), no engine: the
#                                                      start of the bwrap root file system made without one
set -euo pipefail
TREE=""
if [ "${1:-}" = --tree ]; then TREE="${2:?--tree needs a directory}"; shift 2; TAG=""; else TAG="${1:-debian:bookworm-slim}"; shift || true; fi
MIRROR="${1:-${DEBIAN_MIRROR:-http://deb.debian.org/debian}}"
SUITE="${SUITE:-bookworm}"

if [ -z "$TREE" ] && [ "${FORCE:-0}" != 1 ] && docker image inspect "$TAG" >/dev/null 2>&1; then
  echo "base image $TAG exists; nothing to do"
  exit 0
fi
if ! command -v debootstrap >/dev/null 2>&1; then
  echo "installing debootstrap"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi
if [ -n "$TREE" ]; then
  DIR="$TREE"; mkdir -p "$DIR"
else
  DIR="$(mktemp -d /tmp/fte-base.XXXXXX)"
  trap 'rm -rf "$DIR"' EXIT
fi
echo "debootstrap $SUITE (minbase) from $MIRROR into $DIR ..."
LOG="$(mktemp /tmp/fte-debootstrap.XXXXXX.log)"
debootstrap --variant=minbase --include=ca-certificates "$SUITE" "$DIR" "$MIRROR" >"$LOG" 2>&1 || {
  echo "debootstrap failed; last lines of $LOG:" >&2; tail -n 30 "$LOG" >&2; exit 1; }
rm -f "$LOG"
# keep the image small and apt usable in a later `docker build`
rm -rf "$DIR"/var/cache/apt/archives/*.deb "$DIR"/var/lib/apt/lists/*
echo "deb $MIRROR $SUITE main" > "$DIR/etc/apt/sources.list"
# the tree's root is the image's `/`: mktemp made it 0700, which the vfs storage driver keeps (every
# box, run as uid 1000, then fails: `exec: "bash": executable file not found`)
chmod 755 "$DIR"
[ -n "$TREE" ] && { echo "base tree in $DIR"; exit 0; }
echo "importing as $TAG"
tar -C "$DIR" -c . | docker import -c 'CMD ["bash"]' - "$TAG" >/dev/null
echo "base image $TAG created"
