#!/usr/bin/env bash
# The Compose deployment's test, from cold (its volumes removed first): up.sh builds the image, starts every service
# in health order and runs the main job through Dagster; then tests/compose runs inside the deployment (a one-off
# `pipeline` container with the Docker socket, to see the run containers). Torn down at the end, volumes included,
# unless LINEAGE_LAB_COMPOSE_KEEP=1. LINEAGE_LAB_EMBEDDED_GRAPH: the embedded stack's `lineage-lab lineage graph`,
# to compare the lineage with. tests/compose writes its JUnit XML report to LINEAGE_LAB_TEST_REPORTS/compose.xml
# (by default the repository's .lab/test-reports), mounted into the container.
#
# Steps: `test.sh` runs both; `test.sh up` only brings the deployment up from cold (torn down if that fails), and
# `test.sh check` runs tests/compose in a deployment already up, then tears it down. scripts/test.sh runs `up` from
# its background process once the service tests are over (the embedded stack going down beside it), and `check` after
# that, against the embedded stack's final lineage graph.
set -euo pipefail
step=${1:-all}
case $step in all | up | check) ;; *)
  echo "usage: infra/compose/test.sh [up|check] (no argument: both)" >&2
  exit 2
  ;;
esac
reports=${LINEAGE_LAB_TEST_REPORTS:-$(dirname "$0")/../../.lab/test-reports}
mkdir -p "$reports" && reports=$(realpath "$reports")
# a relative LINEAGE_LAB_EMBEDDED_GRAPH is relative to where the script was called from, not to infra/compose
embedded_graph=""
if [[ $step != up && -n ${LINEAGE_LAB_EMBEDDED_GRAPH:-} ]]; then
  embedded_graph=$(realpath -e "$LINEAGE_LAB_EMBEDDED_GRAPH") || {
    echo "LINEAGE_LAB_EMBEDDED_GRAPH=$LINEAGE_LAB_EMBEDDED_GRAPH: no such file; write it with \`lineage-lab lineage graph > FILE\` on the embedded stack, or unset it" >&2
    exit 2
  }
fi
cd "$(dirname "$0")"
say() { printf '\033[1m[compose test]\033[0m %s\n' "$*"; }
# every docker-compose call below (up.sh's and down.sh's too) adds the test's override: Dagster's containers under the
# sensor pace and freshness budget this shell sets (scripts/test.sh: its test settings), the defaults where unset
export COMPOSE_FILE=docker-compose.yml:test-settings.yml

# up: the deployment stays for `check` when it came up; check: it goes in any case
teardown() {
  local status=$?
  [[ $step == up && $status == 0 ]] && return
  if ((status != 0)); then # the deployment goes with its logs: the daemon's (sensors, run queue) say the most
    say "failed (exit $status); the Dagster daemon's last log lines before tearing down:"
    docker-compose logs --no-color --tail 80 dagster-daemon 2>&1 | grep -v -i heartbeat || true
  fi
  say "tearing down"
  bash ./down.sh >/dev/null 2>&1 || true
}
[[ ${LINEAGE_LAB_COMPOSE_KEEP:-0} == 1 ]] || trap teardown EXIT

if [[ $step != check ]]; then
  bash ./ensure-docker.sh
  say "removing an earlier deployment and its volumes (a cold start)"
  bash ./down.sh >/dev/null 2>&1 || true
  bash ./up.sh
fi
[[ $step != up ]] || exit 0

extra=()
if [[ -n $embedded_graph ]]; then
  extra=(-v "$embedded_graph:/tmp/embedded-graph.json:ro"
    -e LINEAGE_LAB_EMBEDDED_GRAPH=/tmp/embedded-graph.json)
fi
say "tests/compose inside the deployment"
# --strict-markers given explicitly: the -o addopts here replaces pyproject's, which has it
docker-compose run --rm -v /var/run/docker.sock:/var/run/docker.sock -v "$reports:/tmp/test-reports" \
  -e LINEAGE_LAB_COMPOSE_TEST=1 "${extra[@]}" pipeline python -m pytest -q -p no:cacheprovider -o addopts="-ra" \
  --strict-markers --junitxml=/tmp/test-reports/compose.xml tests/compose
