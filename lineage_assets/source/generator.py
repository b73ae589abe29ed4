"""The orders generator as a Dagster job: inserts mock orders into the source table at a configurable rate."""

import dagster as dg

from lineage_assets.source.orders import ensure_table, insert_orders
from lineage_assets.source.resource import SourceDatabaseResource


class GenerateOrdersConfig(dg.Config):
    count: int = 100
    rate_per_second: float = 10.0
    #: fills the currency column; only once the table has it (ALTER TABLE public.orders ADD COLUMN currency text)
    currency: str | None = None


@dg.op(description="Insert `count` mock orders into public.orders at about `rate_per_second`.")
def generate_orders(
    context: dg.OpExecutionContext, config: GenerateOrdersConfig, source_db: SourceDatabaseResource
) -> int:
    if config.count < 0 or config.rate_per_second < 0:
        raise dg.Failure(
            f"count and rate_per_second must not be negative (got {config.count}, {config.rate_per_second})"
        )
    with source_db.connect() as conn:
        ensure_table(conn)
        try:
            inserted = insert_orders(conn, config.count, config.rate_per_second, currency=config.currency)
        except ValueError as exc:
            raise dg.Failure(str(exc)) from exc
    context.log.info(f"inserted {len(inserted)} orders into public.orders")
    context.add_output_metadata({"orders": len(inserted)})
    return len(inserted)


@dg.job(description="Generate mock orders into the CDC source table (orders-source streams them to Kafka).")
def generate_orders_job() -> None:
    generate_orders()
