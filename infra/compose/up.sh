#!/usr/bin/env bash
# The Compose deployment in one command: Docker (installed and started when root), the image, every service in
# health order, then the main job through Dagster (each of its runs in a container of its own). Tear down with
# infra/compose/down.sh. Ports (127.0.0.1 only): LINEAGE_LAB_COMPOSE_{DAGSTER,MARQUEZ,MARQUEZ_WEB,FLINK}_PORT.
set -euo pipefail
cd "$(dirname "$0")"
say() { printf '\033[1m[compose]\033[0m %s\n' "$*"; }

bash ./ensure-docker.sh
bash ./build-images.sh

bash ./env-file.sh

started=$(date +%s)
say "starting the services (each waits for what it needs to be healthy)"
docker-compose up -d
services=$(docker-compose config --services | grep -vx pipeline)
for _ in $(seq 180); do
  unhealthy=""
  for svc in $services; do
    id=$(docker-compose ps -q "$svc")
    state=$(docker inspect -f '{{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}' "$id")
    [[ $state == healthy || $state == running ]] || unhealthy+=" $svc($state)"
  done
  [[ -z $unhealthy ]] && break
  sleep 5
done
if [[ -n $unhealthy ]]; then
  echo "not healthy after 15 min:$unhealthy; see docker-compose -f infra/compose/docker-compose.yml logs SERVICE" >&2
  exit 1
fi
say "all services healthy in $(( $(date +%s) - started )) s"

say "running the main job through Dagster (docker-compose run --rm pipeline)"
status=0
docker-compose run --rm pipeline lineage-lab pipeline run --orders "${LINEAGE_LAB_ORDERS:-200}" || status=$?
cat <<TXT

lineage-lab (Compose) is up.
  Dagster UI     http://127.0.0.1:${LINEAGE_LAB_COMPOSE_DAGSTER_PORT:-3000}
  Marquez UI     http://127.0.0.1:${LINEAGE_LAB_COMPOSE_MARQUEZ_WEB_PORT:-3001}  (API http://127.0.0.1:${LINEAGE_LAB_COMPOSE_MARQUEZ_PORT:-5000})
  Flink UI       http://127.0.0.1:${LINEAGE_LAB_COMPOSE_FLINK_PORT:-8081}
  Logs           docker-compose -f infra/compose/docker-compose.yml logs -f SERVICE
Tear down with:  infra/compose/down.sh
TXT
exit "$status"
