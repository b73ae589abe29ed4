#!/usr/bin/env bash
# A Debian bookworm base image built locally with debootstrap, for machines that reach Debian's archive but no image
# registry (the Compose images take it as their FROM build argument; with a registry, use the usual public images).
# Usage: infra/compose/build-base-image.sh [IMAGE]   (default lineage-lab/debian:bookworm; root, debootstrap, docker)
set -euo pipefail
image="${1:-lineage-lab/debian:bookworm}"
if docker image inspect "$image" >/dev/null 2>&1; then
  echo "$image is already built"
  exit 0
fi
# Debian's archive (DEBIAN_MIRROR: a mirror or proxy of it)
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
rootfs="$(mktemp -d)"
trap 'rm -rf "$rootfs"' EXIT
echo "debootstrap bookworm from $mirror"
debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >/dev/null
tar -C "$rootfs" -c . | docker import - "$image" >/dev/null
echo "built $image ($(docker image inspect -f '{{.Size}}' "$image" | numfmt --to=iec))"
