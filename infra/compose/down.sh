#!/usr/bin/env bash
# Tear the Compose deployment down with its volumes (every service's data, Dagster's run history included) and the
# run containers DockerRunLauncher left behind.
set -euo pipefail
cd "$(dirname "$0")"
# docker-compose reads the env file even to tear down
[[ -f lineage-lab.env ]] || bash ./env-file.sh
docker ps -aq --filter label=lineage-lab/deployment=compose | xargs -r docker rm -f >/dev/null
docker-compose --profile tools down --volumes --remove-orphans
