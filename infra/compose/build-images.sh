#!/usr/bin/env bash
# Builds the lineage-lab runtime image, lineage-lab/runtime:<tag>, from infra/compose/Dockerfile (build context: the
# repository). Usage: infra/compose/build-images.sh [more `docker build` options, e.g. --no-cache]
#
#   LINEAGE_LAB_IMAGE_TAG       the tag (default local); LINEAGE_LAB_IMAGE names the whole image instead
#   LINEAGE_LAB_BASE_IMAGE      the FROM image; default debian:bookworm-slim when present or pullable, else the local
#                               debootstrap image lineage-lab/debian:bookworm (built by build-base-image.sh if missing)
#   LINEAGE_LAB_EXTRA_CA_CERTS  a PEM bundle (one or many certificates) that the build and the image must trust, e.g.
#                               a TLS-intercepting proxy's CA: pip, Python and Java (Maven) all trust it. Default: the
#                               host's own bundle (/etc/ssl/certs/ca-certificates.crt) when it exists, so the build
#                               trusts what the host trusts; set it empty for none
#   LINEAGE_LAB_VENDOR_DIR      the vendor root (Marquez where Maven Central lacks it); default ../shared/vendor
#                               beside the repository, when it exists
#   DOCKER_BUILDKIT             default 0: the classic builder, which every docker client can drive against Docker
#                               20.10 (a docker >= 23 client without buildx refuses BuildKit); 1 works with buildx
#
# The files the Dockerfile needs from outside the repository are staged in infra/compose/.build/ (not committed).
set -euo pipefail
cd "$(dirname "$0")/../.."
say() { printf '\033[1m[build-images]\033[0m %s\n' "$*"; }
# one build at a time: concurrent runs would empty each other's staging folder
exec 9<infra/compose/Dockerfile
flock 9
started=$(date +%s)

# --- staging: extra CA certificates and the vendor folder --------------------------------------------------------
stage=infra/compose/.build
rm -rf "$stage"
mkdir -p "$stage/vendor"
echo '*' >"$stage/.gitignore"
host_bundle=/etc/ssl/certs/ca-certificates.crt
[[ -r $host_bundle ]] || host_bundle=""
ca=${LINEAGE_LAB_EXTRA_CA_CERTS-$host_bundle}
if [[ -n $ca ]]; then
  [[ -r $ca ]] || { echo "LINEAGE_LAB_EXTRA_CA_CERTS=$ca: no readable file" >&2; exit 1; }
  grep -q -- '-----BEGIN CERTIFICATE-----' "$ca" \
    || { echo "LINEAGE_LAB_EXTRA_CA_CERTS=$ca: no PEM certificate in it" >&2; exit 1; }
  cp "$ca" "$stage/extra-ca.pem"
  say "extra CA certificates: $ca ($(grep -c -- '-----BEGIN CERTIFICATE-----' "$ca") certificate(s))"
else
  : >"$stage/extra-ca.pem"
fi
vendor=${LINEAGE_LAB_VENDOR_DIR:-$(pwd)/../shared/vendor}
if [[ -d $vendor ]]; then
  cp -R "$vendor/." "$stage/vendor/"
  chmod -R u+w "$stage/vendor"  # vendored files may be read-only; the next run removes this copy
  say "vendor folder: $vendor"
fi

# --- the base image ----------------------------------------------------------------------------------------------
base=${LINEAGE_LAB_BASE_IMAGE:-}
if [[ -z $base ]]; then
  if docker image inspect debian:bookworm-slim >/dev/null 2>&1 \
    || timeout 60 docker pull -q debian:bookworm-slim >/dev/null 2>&1; then
    base=debian:bookworm-slim
  else
    base=lineage-lab/debian:bookworm
    say "no image registry reachable: using the local Debian base image $base"
    docker image inspect "$base" >/dev/null 2>&1 || bash infra/compose/build-base-image.sh "$base"
  fi
fi

# --- the build ---------------------------------------------------------------------------------------------------
image=${LINEAGE_LAB_IMAGE:-lineage-lab/runtime:${LINEAGE_LAB_IMAGE_TAG:-local}}
say "building $image from $base"
if ! DOCKER_BUILDKIT=${DOCKER_BUILDKIT:-0} docker build --build-arg "BASE_IMAGE=$base" \
  -f infra/compose/Dockerfile -t "$image" "$@" .; then
  echo "[build-images] the build failed after $(( $(date +%s) - started )) s. CERTIFICATE_VERIFY_FAILED or PKIX" \
    "errors: a TLS proxy intercepts the traffic; set LINEAGE_LAB_EXTRA_CA_CERTS to its CA bundle" \
    "(e.g. the host's /etc/ssl/certs/ca-certificates.crt)" >&2
  exit 1
fi
size=$(docker image inspect -f '{{.Size}}' "$image" | numfmt --to=iec)
say "built $image ($size) in $(( $(date +%s) - started )) s"
