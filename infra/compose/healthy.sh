#!/bin/sh
# Compose's healthcheck of a service container: healthy while the last probe of `lineage-lab service run NAME` (in the
# container's main process, infra/container.py) found it healthy and still counts. Only reads the time the probe
# wrote, so that the check costs no Python start: see PROBE_INTERVAL_S there.
until=$(cat "${LINEAGE_LAB_HOME:-/lab}/run/$1.ready" 2>/dev/null) || exit 1
[ "$(date +%s)" -lt "${until:-0}" ]
