#!/usr/bin/env bash
# Create the sandbox's base image (default debian:bookworm-slim) WITHOUT a container registry:
# debootstrap a minimal Debian into a temporary directory and `docker import` it.
# For air-gapped hosts and CI. Needs root, debootstrap, and a reachable Debian mirror.
#
#   sandbox/bootstrap-base.sh [IMAGE_TAG] [MIRROR]
#
# Skips all work when the image already exists (set FORCE=1 to rebuild).
set -euo pipefail
TAG="${1:-debian:bookworm-slim}"
MIRROR="${2:-${DEBIAN_MIRROR:-http://deb.debian.org/debian}}"
SUITE="${SUITE:-bookworm}"

if [ "${FORCE:-0}" != 1 ] && docker image inspect "$TAG" >/dev/null 2>&1; then
  echo "base image $TAG exists; nothing to do"
  exit 0
fi
if ! command -v debootstrap >/dev/null 2>&1; then
  echo "installing debootstrap"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi
DIR="$(mktemp -d /tmp/fte-base.XXXXXX)"
trap 'rm -rf "$DIR"' EXIT
echo "debootstrap $SUITE (minbase) from $MIRROR into $DIR ..."
debootstrap --variant=minbase --include=ca-certificates "$SUITE" "$DIR" "$MIRROR" >"$DIR.log" 2>&1 || {
  echo "debootstrap failed; last lines of $DIR.log:" >&2; tail -n 30 "$DIR.log" >&2; exit 1; }
rm -f "$DIR.log"
# keep the image small and apt usable in a later `docker build`
rm -rf "$DIR"/var/cache/apt/archives/*.deb "$DIR"/var/lib/apt/lists/*
echo "deb $MIRROR $SUITE main" > "$DIR/etc/apt/sources.list"
echo "importing as $TAG"
tar -C "$DIR" -c . | docker import -c 'CMD ["bash"]' - "$TAG" >/dev/null
echo "base image $TAG created"
