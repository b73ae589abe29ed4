"""Print the stack's endpoints (``--shell`` for ``eval`` in scripts), so scripts never repeat an address.

Only the stack's own addresses: a page named by the pipeline (the orders' lineage in Marquez) needs the app's naming,
so the app adds it (``python -m lineage_assets.cli --shell``, which scripts/run.sh evaluates) and infra stays below it.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable

from infra.settings import StackSettings


def endpoints(s: StackSettings) -> dict[str, str]:
    return {
        "DAGSTER_URL": s.dagster_url,
        "MARQUEZ_UI_URL": s.marquez_web_url,
        "MARQUEZ_API_URL": s.marquez_url,
        "KAFKA_BOOTSTRAP": s.kafka_bootstrap,
        "SCHEMA_REGISTRY_URL": s.schema_registry_url,
        "CONNECT_URL": s.connect_url,
        "FLINK_URL": s.flink_rest_url,
        "ICEBERG_CATALOG_URL": s.iceberg_catalog_url,
        "S3_ENDPOINT": s.s3_endpoint,
        "LOGS_DIR": str(s.logs_dir),
    }


def lines(values: dict[str, str], shell: bool) -> list[str]:
    """``KEY=value`` quoted for ``eval`` (shell), else aligned for a reader."""
    return [f"{key}={shlex.quote(value)}" if shell else f"{key:<20} {value}" for key, value in values.items()]


def main(argv: list[str], collect: Callable[[StackSettings], dict[str, str]] = endpoints) -> None:
    """Print what ``collect`` gives for the environment's settings (the app passes its own list, a superset)."""
    for line in lines(collect(StackSettings.from_env()), "--shell" in argv):
        print(line)


if __name__ == "__main__":
    main(sys.argv[1:])
