"""Which reader balances a hop: chosen by the job's kind and its output's store kind, both declared in the identity
module, so a new job of a known kind writing a known kind of store is reconciled from its declaration alone.

Each reader is imported here by name, so the import contracts see every one of them.
"""

from __future__ import annotations

from collections.abc import Callable

from lineage_assets.conservation import archive, iceberg_ingestion_hop, orders_source, spark_days, supplier_windows
from lineage_assets.conservation.balance import HopBalance
from lineage_assets.conservation.hops import Hop, hops
from lineage_assets.conservation.stores import Stores
from lineage_assets.lineage.identity import JobKind, Pipeline, StoreKind

Reader = Callable[[Hop, Stores], HopBalance]

#: (job kind, store kind of the hop's output) -> the reader that balances such a hop
READERS: dict[tuple[JobKind, StoreKind], Reader] = {
    ("cdc_source", "kafka_topic"): orders_source.balance,
    ("copy", "object_prefix"): archive.balance,
    ("copy", "iceberg_table"): iceberg_ingestion_hop.balance,
    ("windowed_aggregation", "kafka_topic"): supplier_windows.balance,
    ("batch_aggregation", "iceberg_table"): spark_days.balance,
}


def rule_key(hop: Hop) -> tuple[str | None, str]:
    return hop.job.kind, hop.output.store_kind


def reader_of(hop: Hop) -> Reader:
    """The reader of ``hop``; a kind no reader balances raises, naming the kinds that have one."""
    try:
        return READERS[rule_key(hop)]  # type: ignore[index]
    except KeyError:
        raise KeyError(
            f"no conservation reader for job {hop.job.name!r} of kind {hop.job.kind!r} writing a "
            f"{hop.output.store_kind}; the kinds that have one: {sorted(READERS)}"
        ) from None


def reconciled_hops(pipeline: Pipeline) -> dict[str, Hop]:
    """job name -> its hop, for the hops a reader balances, in the data flow's order."""
    return {name: hop for name, hop in hops(pipeline).items() if rule_key(hop) in READERS}
