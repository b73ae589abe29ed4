#!/usr/bin/env bash
# The Compose deployment's part of scripts/test.sh that runs in the background (started there at nice 19, idle I/O):
# Docker up (infra/compose/ensure-docker.sh), the image built (infra/compose/build-images.sh), then the deployment up
# with its main job (infra/compose/test.sh up). Its tests (test.sh check) run in the foreground after the suite.
#
# Usage: scripts/compose_background.sh GO_FILE WEIGHT_FILE
# - Docker's containers (the deployment's and DockerRunLauncher's run containers) live in Docker's cgroup, which the
#   kernel weighs against the tests' processes as one entity whatever their nice value: beside the side-by-side groups
#   under a daemon at nice 19, the batch group ran 2.7 times slower (b5e4d76). So this lowers that cgroup's CPU weight
#   to next to nothing (cgroup v1 cpu.shares 2 of 1024, v2 cpu.weight 1 of 100), writing the weight it replaced to
#   WEIGHT_FILE for scripts/test.sh to restore; the deployment then takes only the CPU the tests leave idle, and comes
#   up at once, beside the service tests.
# - Where that weight cannot be set (no such cgroup file, not root), the deployment comes up once GO_FILE exists:
#   after the suite, the embedded stack stopped, as before.
set -euo pipefail
cd "$(dirname "$0")/.."
go=$1 saved=$2

bash infra/compose/ensure-docker.sh

# Docker's cgroup with the cgroupfs driver: v1 cpu/docker, v2 docker (the systemd driver puts each container in a
# scope of its own: not handled, the deployment then waits for the suite)
if [[ -d /sys/fs/cgroup/cpu ]]; then
  group=/sys/fs/cgroup/cpu/docker file=cpu.shares low=2
else
  group=/sys/fs/cgroup/docker file=cpu.weight low=1
fi
lowered=0
if mkdir -p "$group" 2>/dev/null && [[ -w $group/$file ]]; then
  cat "$group/$file" >"$saved.tmp" && echo "$group/$file" >>"$saved.tmp" && mv "$saved.tmp" "$saved"
  if echo "$low" >"$group/$file"; then
    lowered=1
    echo "== Docker's containers at CPU weight $low ($group/$file, was $(head -n1 "$saved"))"
  fi
fi

bash infra/compose/build-images.sh
if ((lowered)); then
  echo "== the image is built; the deployment comes up now, beside the service tests, on the CPU they leave idle"
else
  echo "== the image is built; Docker's CPU weight could not be lowered ($group/$file), so the deployment comes up" \
    "after the suite"
  until [[ -e $go ]]; do sleep 2; done
fi
bash infra/compose/test.sh up
