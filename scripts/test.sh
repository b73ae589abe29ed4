#!/usr/bin/env bash
# The test command: install what is missing, lint, run the fast unit tests, bring the embedded stack up and run
# every test against it. A stack this script started is stopped again at the end; one already running is left.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh

echo "== lint"
.venv/bin/ruff check .
.venv/bin/ruff format --check .

echo "== unit tests (no services)"
.venv/bin/pytest -q -m "not service and not after_suite" tests

started_here=0
if ! .venv/bin/lineage-lab stack status >/dev/null 2>&1; then
  started_here=1
  trap '.venv/bin/lineage-lab stack down || true' EXIT
fi
# a short freshness window, so the test that cancels a Flink job sees its output turn late in test time
export LINEAGE_LAB_STREAMING_FRESH_MINUTES="${LINEAGE_LAB_STREAMING_FRESH_MINUTES:-2}"
echo "== embedded stack"
.venv/bin/lineage-lab stack up

echo "== all tests (unit + service)"
if ! .venv/bin/pytest -q -m "not after_suite" tests; then
  .venv/bin/lineage-lab stack status || true
  echo "service logs: .venv/bin/lineage-lab stack logs SERVICE" >&2
  exit 1
fi
echo "== after the suite: what it left in the stack"
.venv/bin/pytest -q -m after_suite tests/after_suite

# The Compose deployment (issue 13), where Docker is or can be installed (root): the embedded stack's lineage graph
# is kept to compare with, and a stack started here is stopped first to free the machine. LINEAGE_LAB_COMPOSE=skip
# leaves it out.
if [[ ${LINEAGE_LAB_COMPOSE:-auto} != skip ]] && { command -v docker >/dev/null 2>&1 || [[ $(id -u) -eq 0 ]]; }; then
  echo "== Compose deployment (infra/compose/test.sh)"
  .venv/bin/lineage-lab lineage graph >.lab/embedded-graph.json
  if ((started_here)); then .venv/bin/lineage-lab stack down; fi
  # its published ports apart from the embedded stack's, which may still be running
  LINEAGE_LAB_COMPOSE_DAGSTER_PORT=13000 LINEAGE_LAB_COMPOSE_MARQUEZ_WEB_PORT=13001 LINEAGE_LAB_COMPOSE_MARQUEZ_PORT=15000 \
    LINEAGE_LAB_COMPOSE_FLINK_PORT=18081 LINEAGE_LAB_EMBEDDED_GRAPH="$PWD/.lab/embedded-graph.json" bash infra/compose/test.sh
fi
