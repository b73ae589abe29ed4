"""Print the stack's endpoints (``--shell`` for ``eval`` in scripts), so scripts never repeat an address."""

from __future__ import annotations

import shlex
import sys

from infra.settings import StackSettings


def endpoints(s: StackSettings) -> dict[str, str]:
    from lineage_assets.lineage.identity import Pipeline
    from lineage_assets.lineage.marquez import lineage_page

    orders = Pipeline.from_settings(s).dataset("kafka_orders")
    return {
        "DAGSTER_URL": s.dagster_url,
        "MARQUEZ_UI_URL": s.marquez_web_url,
        "MARQUEZ_API_URL": s.marquez_url,
        "ORDERS_LINEAGE_URL": lineage_page(s.marquez_web_url, orders.namespace, orders.name),
        "KAFKA_BOOTSTRAP": s.kafka_bootstrap,
        "SCHEMA_REGISTRY_URL": s.schema_registry_url,
        "CONNECT_URL": s.connect_url,
        "FLINK_URL": s.flink_rest_url,
        "ICEBERG_CATALOG_URL": s.iceberg_catalog_url,
        "S3_ENDPOINT": s.s3_endpoint,
        "LOGS_DIR": str(s.logs_dir),
    }


def main(argv: list[str]) -> None:
    values = endpoints(StackSettings.from_env())
    for key, value in values.items():
        print(f"{key}={shlex.quote(value)}" if "--shell" in argv else f"{key:<20} {value}")


if __name__ == "__main__":
    main(sys.argv[1:])
