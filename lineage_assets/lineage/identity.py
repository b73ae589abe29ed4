"""The one place that names every dataset and job of the pipeline.

For each dataset: its OpenLineage namespace and name, its Dagster asset key, its Marquez node id, its columns, and
the job that produces it. For each job: its OpenLineage name and type, its inputs and outputs, and its column
lineage. Everything is derived from ``StackSettings`` (broker address, buckets, warehouse, catalog URI), so a
deployment that moves a service changes every producer's identities at once. Emitters, sensors and checks ask
``Pipeline``; nothing else spells an identity.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from infra.settings import StackSettings
from lineage_assets.lineage import naming


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    description: str = ""
    #: a column the source team adds after launch (a compatible change): jobs carry it when their input has it and
    #: write null otherwise, checks accept its absence upstream, and emitters report it only once the source has it
    optional: bool = False


@dataclass(frozen=True)
class Symlink:
    """Another name of the same dataset (e.g. an Iceberg table's catalog name)."""

    namespace: str
    name: str
    type: str = "TABLE"


#: the kind of store a dataset lives in, which says how its records are counted (conservation's counters)
StoreKind = Literal["kafka_topic", "iceberg_table", "object_prefix", "postgres_table"]
#: what a job does to its input's records, which says how its hop balances (conservation's rules): a 1:1 copy with
#: dead letters, a change-data-capture source, a windowed aggregation (with windows still open), a batch aggregation
#: per partition
JobKind = Literal["copy", "cdc_source", "windowed_aggregation", "batch_aggregation"]


@dataclass(frozen=True)
class Dataset:
    key: str
    namespace: str
    name: str
    asset_key: tuple[str, ...]
    columns: tuple[Column, ...]
    producer: str
    description: str
    symlinks: tuple[Symlink, ...] = ()

    def __post_init__(self) -> None:
        # Marquez parses node ids "dataset:<namespace>:<name>"; a name with ':' or a leading digit breaks it
        if ":" in self.name or self.name[:1].isdigit():
            raise naming.NamingError(f"dataset name {self.name!r} cannot be part of a Marquez node id")

    @property
    def node_id(self) -> str:
        """The dataset's id in Marquez's lineage graph."""
        return f"dataset:{self.namespace}:{self.name}"

    @property
    def store_kind(self) -> StoreKind:
        """Where the records are, from the namespace's scheme: a table in an object store is an Iceberg table when
        it has a catalog name (a symlink), else a prefix of objects."""
        scheme = self.namespace.split("://", 1)[0]
        if scheme == "kafka":
            return "kafka_topic"
        if scheme == "postgres":
            return "postgres_table"
        return "iceberg_table" if self.symlinks else "object_prefix"

    @property
    def table_name(self) -> str:
        """An Iceberg table's name in its catalog (its first symlink), what pyiceberg and Spark load it by."""
        if self.store_kind != "iceberg_table":
            raise ValueError(f"dataset {self.key!r} is a {self.store_kind}, not an Iceberg table (no catalog name)")
        return self.symlinks[0].name

    @property
    def qualified_name(self) -> str:
        """``namespace/name``: how reports (e.g. ``lineage-lab reconcile --json``) name the dataset in one string."""
        return f"{self.namespace}/{self.name}"

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(f"{self.key} has no column {name!r}; it has {self.column_names}")


@dataclass(frozen=True)
class ColumnSource:
    """One input column an output column is computed from (OpenLineage columnLineage 1-0-x ``inputFields``)."""

    dataset: str  # Dataset.key
    column: str
    type: Literal["DIRECT", "INDIRECT"] = "DIRECT"
    subtype: str = "IDENTITY"  # IDENTITY, TRANSFORMATION, AGGREGATION, FILTER, GROUP_BY, WINDOW, ...
    description: str = ""
    #: the output column is the sum of this input column over the records it summarises (an AGGREGATION that is a
    #: sum, not a count): conservation balances the two columns' values as well as the counts
    sums: bool = False


@dataclass(frozen=True)
class Job:
    """One OpenLineage job, named exactly as Marquez shows it.

    ``parent`` names the job whose runs parent this job's runs (the Dagster job for work a Dagster run launches).
    Marquez files a job whose events carry a parent facet under ``<parent>.<name>`` unless the name already starts
    with ``<parent>.``, so a job with a parent must be named that way: then every event keeps one Marquez job.
    """

    name: str
    namespace: str
    processing_type: Literal["STREAMING", "BATCH"]
    integration: str  # KAFKA_CONNECT, FLINK, SPARK, DAGSTER
    job_type: str  # JOB, TASK, QUERY ...
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    #: output dataset key -> output column -> its sources
    column_lineage: dict[str, dict[str, tuple[ColumnSource, ...]]] = field(default_factory=dict)
    description: str = ""
    parent: str | None = None
    #: how the job's hop is reconciled (conservation): None for a job that moves no records of its own
    kind: JobKind | None = None
    #: the key of the output where the job puts the records it could not process (its dead-letter topic), if any
    dead_letters: str | None = None

    def __post_init__(self) -> None:
        if self.dead_letters is not None and self.dead_letters not in self.outputs:
            raise ValueError(
                f"job {self.name!r} declares dead letters {self.dead_letters!r}, which is not one of its outputs "
                f"{self.outputs}: add that dataset to the job's outputs"
            )
        if self.kind and len(self.inputs) != 1:
            raise ValueError(
                f"job {self.name!r} is declared kind={self.kind!r} but reads {len(self.inputs)} datasets: a "
                "conservation rule balances one input against its outputs; declare one input or no kind"
            )
        if self.parent and not self.name.startswith(self.parent + "."):
            raise naming.NamingError(
                f"job {self.name!r} has parent {self.parent!r}: Marquez would file it as "
                f"{self.parent}.{self.name}; name it {self.parent}.<name>"
            )

    @property
    def node_id(self) -> str:
        return f"job:{self.namespace}:{self.name}"

    def summed_columns(self, output: str) -> dict[str, str]:
        """Output column -> the input column it sums, for ``output`` (a dataset key): what value conservation
        balances on this job's hop."""
        return {
            column: sources[0].column
            for column, sources in self.column_lineage.get(output, {}).items()
            if len(sources) == 1 and sources[0].sums
        }

    @property
    def simple_name(self) -> str:
        """The name without its parent's prefix: what the engine itself calls the job (a Spark app name)."""
        return self.name.removeprefix(f"{self.parent}.") if self.parent else self.name


#: the Marquez job of Dagster runs: a run of it is one Dagster run (same run id), parent of the batch work it launches.
#: One stable name, whatever Dagster job (an asset job, a backfill, the UI's ad-hoc one) the run belongs to.
DAGSTER_JOB = "dagster"
#: the Spark application that computes Iceberg supplier_stats, a child of the Dagster run that materializes it
SPARK_SUPPLIER_STATS_JOB = f"{DAGSTER_JOB}.supplier_stats"

#: the dead-letter topic of each job that has one: records it could not process, with the reason
DEAD_LETTER_TOPICS = {
    "orders-s3-sink": "orders-dlq",
    "iceberg-ingestion": "orders-dlq-flink",
    "supplier-stats": "orders-dlq-supplier-stats",
}
#: the Kafka consumer group each Flink job commits its offsets under (on each checkpoint)
CONSUMER_GROUPS = {"iceberg-ingestion": "iceberg-ingestion", "supplier-stats": "supplier-stats"}


#: a sink connector's config key that names its consumer group instead of Connect's default
GROUP_OVERRIDE = "consumer.override.group.id"


def sink_group(connector: str, config: Mapping[str, str] | None = None) -> str:
    """The consumer group of a sink connector's tasks: its config's ``consumer.override.group.id``, else the one
    Kafka Connect gives them (``connect-<name>``)."""
    return (config or {}).get(GROUP_OVERRIDE) or f"connect-{connector}"


#: the retention of the pipeline's topics (orders, supplier-stats), in milliseconds as Kafka's retention.ms
WEEK_MS = 7 * 24 * 3600 * 1000
#: how long a dead-letter topic keeps a record: four weeks, time for someone to look at it before it goes
DEAD_LETTER_RETENTION_MS = 4 * WEEK_MS
_FLINK_DEAD_LETTER_COLUMNS = (
    Column("src_topic", "string"),
    Column("raw_value", "bytes", "the record as read, base64 in the JSON value"),
    Column("reason", "string", "why it could not be processed"),
)

ORDER_COLUMNS_AVRO = (
    Column("supplier", "string", "one of 8 suppliers"),
    Column("item", "string", "product name"),
    Column("price", "string", "decimal text with 2 places"),
    Column("bid_time", "timestamp-millis", "when the order was placed (event time)"),
    Column("order_id", "string", "UUID; also the record key"),
    Column("currency", "string", "ISO 4217 code; null in records written before the source had it", optional=True),
)


def _identity_map(dataset: str, columns: Iterable[str]) -> dict[str, tuple[ColumnSource, ...]]:
    return {c: (ColumnSource(dataset, c),) for c in columns}


@dataclass(frozen=True)
class Pipeline:
    """Every dataset and job of the pipeline, for one deployment (one ``StackSettings``)."""

    datasets: dict[str, Dataset]
    jobs: dict[str, Job]

    @classmethod
    def from_settings(cls, settings: StackSettings) -> Pipeline:
        ns = settings.openlineage_namespace
        kafka_orders = naming.kafka(settings.kafka_bootstrap, "orders")
        kafka_stats = naming.kafka(settings.kafka_bootstrap, "supplier-stats")
        archive = naming.s3(f"s3://{settings.archive_bucket}/topics/orders")
        ice_orders = naming.iceberg_table(f"{settings.warehouse_uri}default/orders")
        ice_stats = naming.iceberg_table(f"{settings.warehouse_uri}default/supplier_stats")
        source = naming.postgres(*settings.postgres_address, "orders_source", "public", "orders")
        catalog = settings.iceberg_catalog_url

        datasets = [
            Dataset(
                "source_orders",
                *source,
                ("postgres", "orders_source", "orders"),
                (
                    Column("supplier", "text"),
                    Column("item", "text"),
                    Column("price", "text"),
                    Column("bid_time", "timestamp", "UTC"),
                    Column("order_id", "text", "UUID, primary key"),
                    Column("currency", "text", "ISO 4217 code, added by the source team", optional=True),
                ),
                producer="orders-generator",
                description="Orders table the generator inserts into; Debezium captures its changes",
            ),
            Dataset(
                "kafka_orders",
                *kafka_orders,
                ("kafka", "orders"),
                ORDER_COLUMNS_AVRO,
                producer="orders-source",
                description="Kafka topic `orders`, Avro value (subject orders-value), key = order_id",
            ),
            Dataset(
                "archive_orders",
                *archive,
                ("s3", "orders_archive"),
                tuple(Column(c.name, "string", optional=c.optional) for c in ORDER_COLUMNS_AVRO),
                producer="orders-s3-sink",
                description="Raw orders archived as JSON lines, one object per 100 records or 60 s",
            ),
            Dataset(
                "kafka_supplier_stats",
                *kafka_stats,
                ("kafka", "supplier_stats"),
                (
                    Column("window_start", "string"),
                    Column("window_end", "string"),
                    Column("supplier", "string"),
                    Column("total_price", "double"),
                    Column("count", "long"),
                ),
                producer="supplier-stats",
                description="Per-supplier 5 s tumbling-window sums and counts",
            ),
            Dataset(
                "iceberg_orders",
                *ice_orders,
                ("iceberg", "default", "orders"),
                (
                    Column("order_id", "string"),
                    Column("item", "string"),
                    Column("price", "decimal(10,2)"),
                    Column("supplier", "string"),
                    Column("bid_time", "timestamp_ntz", "UTC; Iceberg timestamp without zone"),
                    Column("currency", "string", "null for orders written before the source had it"),
                ),
                producer="iceberg-ingestion",
                description="Iceberg table default.orders, partitioned by day(bid_time)",
                symlinks=(Symlink(catalog, "default.orders"),),
            ),
            Dataset(
                "iceberg_supplier_stats",
                *ice_stats,
                ("iceberg", "default", "supplier_stats"),
                (
                    Column("supplier", "string"),
                    Column("bid_date", "date"),
                    Column("bid_hour", "int"),
                    Column("total_price", "decimal(10,2)"),
                    Column("total_count", "bigint"),
                ),
                producer=SPARK_SUPPLIER_STATS_JOB,
                description="Per supplier and hour: total price and count, partitioned by bid_date, bid_hour",
                symlinks=(Symlink(catalog, "default.supplier_stats"),),
            ),
            Dataset(
                "dlq_orders_s3_sink",
                *naming.kafka(settings.kafka_bootstrap, DEAD_LETTER_TOPICS["orders-s3-sink"]),
                ("kafka", "dead_letters", "orders_dlq"),
                (Column("key", "bytes"), Column("value", "bytes", "the record as consumed; the reason in headers")),
                producer="orders-s3-sink",
                description="Records the S3 sink could not convert or write (Connect's dead-letter queue)",
            ),
            Dataset(
                "dlq_iceberg_ingestion",
                *naming.kafka(settings.kafka_bootstrap, DEAD_LETTER_TOPICS["iceberg-ingestion"]),
                ("kafka", "dead_letters", "orders_dlq_flink"),
                (
                    Column("src_topic", "string"),
                    Column("src_partition", "int"),
                    Column("src_offset", "bigint"),
                    Column("src_timestamp", "timestamp_ltz(3)"),
                    Column("record_key", "string"),
                    *_FLINK_DEAD_LETTER_COLUMNS[1:],
                ),
                producer="iceberg-ingestion",
                description="Orders iceberg-ingestion could not decode or convert, with the reason",
            ),
            Dataset(
                "dlq_supplier_stats",
                *naming.kafka(settings.kafka_bootstrap, DEAD_LETTER_TOPICS["supplier-stats"]),
                ("kafka", "dead_letters", "orders_dlq_supplier_stats"),
                _FLINK_DEAD_LETTER_COLUMNS,
                producer="supplier-stats",
                description="Orders supplier-stats could not decode, or that came after their window closed",
            ),
        ]
        order_fields = [c.name for c in ORDER_COLUMNS_AVRO]
        jobs = [
            Job(
                "orders-source",
                ns,
                "STREAMING",
                "KAFKA_CONNECT",
                "JOB",
                ("source_orders",),
                ("kafka_orders",),
                {"kafka_orders": _identity_map("source_orders", order_fields)},
                "Debezium CDC of the orders table, envelope flattened",
                kind="cdc_source",
            ),
            Job(
                "orders-s3-sink",
                ns,
                "STREAMING",
                "KAFKA_CONNECT",
                "JOB",
                ("kafka_orders",),
                ("archive_orders", "dlq_orders_s3_sink"),
                {"archive_orders": _identity_map("kafka_orders", order_fields)},
                "Connect S3 sink: JSON lines",
                kind="copy",
                dead_letters="dlq_orders_s3_sink",
            ),
            Job(
                "supplier-stats",
                ns,
                "STREAMING",
                "FLINK",
                "JOB",
                ("kafka_orders",),
                ("kafka_supplier_stats", "dlq_supplier_stats"),
                {
                    "kafka_supplier_stats": {
                        "window_start": (ColumnSource("kafka_orders", "bid_time", "DIRECT", "TRANSFORMATION"),),
                        "window_end": (ColumnSource("kafka_orders", "bid_time", "DIRECT", "TRANSFORMATION"),),
                        "supplier": (ColumnSource("kafka_orders", "supplier"),),
                        "total_price": (ColumnSource("kafka_orders", "price", "DIRECT", "AGGREGATION", sums=True),),
                        "count": (ColumnSource("kafka_orders", "order_id", "DIRECT", "AGGREGATION"),),
                    }
                },
                "Flink DataStream: per-supplier 5 s tumbling windows on event time",
                kind="windowed_aggregation",
                dead_letters="dlq_supplier_stats",
            ),
            Job(
                "iceberg-ingestion",
                ns,
                "STREAMING",
                "FLINK",
                "JOB",
                ("kafka_orders",),
                ("iceberg_orders", "dlq_iceberg_ingestion"),
                {
                    "iceberg_orders": {
                        **_identity_map("kafka_orders", ["order_id", "item", "supplier", "currency"]),
                        "price": (ColumnSource("kafka_orders", "price", "DIRECT", "TRANSFORMATION", "CAST"),),
                        "bid_time": (ColumnSource("kafka_orders", "bid_time"),),
                    }
                },
                "Flink Table API: Kafka orders (Avro) into Iceberg default.orders",
                kind="copy",
                dead_letters="dlq_iceberg_ingestion",
            ),
            Job(
                DAGSTER_JOB,
                ns,
                "BATCH",
                "DAGSTER",
                "JOB",
                (),
                (),
                description="Dagster runs (run id = Dagster run id) that launch batch jobs; streaming jobs outlive the "
                "run that deployed them and carry it in their dagster_run facet instead",
            ),
            Job(
                SPARK_SUPPLIER_STATS_JOB,
                ns,
                "BATCH",
                "SPARK",
                "JOB",
                ("iceberg_orders",),
                ("iceberg_supplier_stats",),
                {
                    "iceberg_supplier_stats": {
                        "supplier": (ColumnSource("iceberg_orders", "supplier"),),
                        "bid_date": (ColumnSource("iceberg_orders", "bid_time", "DIRECT", "TRANSFORMATION"),),
                        "bid_hour": (ColumnSource("iceberg_orders", "bid_time", "DIRECT", "TRANSFORMATION"),),
                        "total_price": (ColumnSource("iceberg_orders", "price", "DIRECT", "AGGREGATION", sums=True),),
                        "total_count": (),  # count(*): computed from no column
                    }
                },
                "PySpark: hourly totals per supplier for one day",
                parent=DAGSTER_JOB,
                kind="batch_aggregation",
            ),
        ]
        return cls({d.key: d for d in datasets}, {j.name: j for j in jobs})

    def observed_columns(self, orders_value: tuple[Column, ...] | None) -> dict[str, tuple[Column, ...]]:
        """The columns a dataset holds now, where that can differ from its declaration: ``orders_value`` is the
        orders topic's latest registered value schema (None when unknown). The topic is described as registered;
        a dataset with optional columns lists one only once the topic has it (before that no record has it, and
        a lineage graph that shows it would be wrong)."""
        present = {c.name for c in orders_value or ()}
        observed = {
            ds.key: tuple(c for c in ds.columns if not c.optional or c.name in present)
            for ds in self.datasets.values()
            if any(c.optional for c in ds.columns)
        }
        if orders_value:
            observed["kafka_orders"] = orders_value
        return observed

    def dataset(self, key: str) -> Dataset:
        try:
            return self.datasets[key]
        except KeyError:
            raise KeyError(f"unknown dataset {key!r}; known: {sorted(self.datasets)}") from None

    def job(self, name: str) -> Job:
        try:
            return self.jobs[name]
        except KeyError:
            raise KeyError(f"unknown job {name!r}; known: {sorted(self.jobs)}") from None

    def by_identity(self, namespace: str, name: str) -> Dataset | None:
        """The pipeline dataset an (OpenLineage namespace, name) pair denotes, after normalisation."""
        for ds in self.datasets.values():
            if (ds.namespace, ds.name) == (namespace, name) or any(
                (s.namespace, s.name) == (namespace, name) for s in ds.symlinks
            ):
                return ds
        return None

    def by_asset_key(self, path: Iterable[str]) -> Dataset:
        wanted = tuple(path)
        for ds in self.datasets.values():
            if ds.asset_key == wanted:
                return ds
        raise KeyError(f"no dataset has asset key {wanted}")

    def flink_jobs(self) -> tuple[Job, ...]:
        """The Flink jobs, by name: each has a deploy asset and is followed by the Flink job sensor."""
        return tuple(sorted((j for j in self.jobs.values() if j.integration == "FLINK"), key=lambda j: j.name))

    def output(self, job: str) -> Dataset:
        """The dataset ``job`` produces: its one output that is not its dead letters."""
        declared = self.job(job)
        (ds,) = [self.dataset(k) for k in declared.outputs if k != declared.dead_letters]
        return ds

    def streaming_deployment(self) -> tuple[str, ...]:
        """The dataset keys whose assets deploy the streaming side: the output of each streaming job, and the
        tables those jobs read that no job of the pipeline produces (the source table, which the generator fills).
        In declaration order."""
        streaming = [j for j in self.jobs.values() if j.processing_type == "STREAMING"]
        keys = {self.output(j.name).key for j in streaming}
        keys |= {k for j in streaming for k in j.inputs if self.dataset(k).producer not in self.jobs}
        return tuple(k for k in self.datasets if k in keys)

    def dead_letter_dataset(self, job: str) -> Dataset:
        """The dataset of the topic where ``job`` puts what it could not process (one of its outputs)."""
        key = self.job(job).dead_letters
        if key is None:
            raise KeyError(f"job {job!r} declares no dead letters")
        return self.dataset(key)

    def dead_letter_jobs(self) -> tuple[str, ...]:
        """The jobs that declare a dead-letter output, in declaration order."""
        return tuple(name for name, job in self.jobs.items() if job.dead_letters is not None)

    def upstream(self, key: str) -> tuple[str, ...]:
        """Dataset keys the producer of ``key`` reads: the dataset's upstream edges."""
        producer = self.jobs.get(self.dataset(key).producer)
        return producer.inputs if producer else ()
