#!/usr/bin/env bash
# Docker Engine and docker-compose from Debian, and a running daemon: installed and started when we are root and
# they are missing; otherwise a clear message of what to do.
set -euo pipefail
say() { printf '\033[1m[compose]\033[0m %s\n' "$*"; }
if ! command -v dockerd >/dev/null 2>&1 || ! command -v docker-compose >/dev/null 2>&1; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "Docker Engine or docker-compose is missing: sudo apt-get install -y docker.io docker-compose" >&2
    exit 1
  fi
  say "installing Debian's docker.io and docker-compose"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io docker-compose debootstrap >/dev/null
fi
if ! docker info >/dev/null 2>&1; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "the Docker daemon is not running (or this user may not use it): sudo systemctl start docker" >&2
    exit 1
  fi
  say "starting dockerd (log /var/log/dockerd.log)"
  # its own session: a build started in a process group of its own (scripts/test.sh) can be stopped without it
  setsid nohup dockerd >/var/log/dockerd.log 2>&1 &
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { echo "dockerd did not come up; see /var/log/dockerd.log" >&2; exit 1; }
fi
