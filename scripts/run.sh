#!/usr/bin/env bash
# The main command: install what is missing, bring the embedded stack up (PostgreSQL, Marquez, object store, Kafka,
# schema registry, Iceberg catalog, Kafka Connect, Flink, Dagster), run the whole pipeline once (deploy the
# streaming assets, sensors on, generate orders, Iceberg, today's supplier_stats, asset checks, drift report and
# picture) and print where to look. Services keep running until `.venv/bin/lineage-lab stack down`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
.venv/bin/lineage-lab stack up
echo
.venv/bin/lineage-lab stack status || true
echo
status=0
.venv/bin/lineage-lab pipeline run --orders "${LINEAGE_LAB_ORDERS:-200}" || status=$?
# shellcheck disable=SC1091
eval "$(.venv/bin/python -m lineage_assets.cli --shell)"
cat <<TXT

lineage-lab is up.
  Dagster UI        $DAGSTER_URL
  Marquez UI        $MARQUEZ_UI_URL   (API $MARQUEZ_API_URL)
  Kafka             $KAFKA_BOOTSTRAP
  Schema registry   $SCHEMA_REGISTRY_URL
  Kafka Connect     $CONNECT_URL
  Flink UI/REST     $FLINK_URL
  Iceberg catalog   $ICEBERG_CATALOG_URL
  Object store      $S3_ENDPOINT
  Logs              $LOGS_DIR  (.venv/bin/lineage-lab stack logs SERVICE -f)
Stop everything with: .venv/bin/lineage-lab stack down

Lineage of Kafka orders in Marquez:
  $ORDERS_LINEAGE_URL
TXT
exit "$status"
