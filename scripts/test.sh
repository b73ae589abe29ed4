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
.venv/bin/pytest -q -m "not service" tests

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
if ! .venv/bin/pytest -q tests; then
  .venv/bin/lineage-lab stack status || true
  echo "service logs: .venv/bin/lineage-lab stack logs SERVICE" >&2
  exit 1
fi
