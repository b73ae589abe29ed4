"""The Compose deployment's tests run inside it (infra/compose/test.sh: a one-off container of the `pipeline`
service with the Docker socket), after up.sh has run the main job there; anywhere else they are skipped."""

from __future__ import annotations

import os

collect_ignore_glob = [] if os.environ.get("LINEAGE_LAB_COMPOSE_TEST") else ["test_*.py"]
