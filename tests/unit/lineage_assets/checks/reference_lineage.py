"""The reference lab's lineage as OpenLineage events, written out by hand for the embedded stack (not built by the
code under test): the tests of the checks feed these events to the checks and mutate them to make each kind of
drift. Every identity, field and column edge below is literal; the helpers only wrap them in the OpenLineage JSON
shape (run, job, datasets with schema, symlinks and columnLineage facets)."""

from __future__ import annotations

import copy

JOBS_NAMESPACE = "lineage-lab"
KAFKA = "kafka://127.0.0.1:9092"
CATALOG = "http://127.0.0.1:8181"

SOURCE = ("postgres://127.0.0.1:15432", "orders_source.public.orders")
ORDERS = (KAFKA, "orders")
ARCHIVE = ("s3://orders-archive", "topics/orders")
STATS = (KAFKA, "supplier-stats")
ICEBERG_ORDERS = ("s3://warehouse", "default/orders")
ICEBERG_STATS = ("s3://warehouse", "default/supplier_stats")
DLQ_SINK = (KAFKA, "orders-dlq")
DLQ_INGESTION = (KAFKA, "orders-dlq-flink")
DLQ_STATS = (KAFKA, "orders-dlq-supplier-stats")

SPARK_JOB = "dagster.supplier_stats"

#: each dataset's fields (name, type) as its producer reports them once the source has the currency column
SCHEMAS: dict[tuple[str, str], list[tuple[str, str]]] = {
    SOURCE: [
        ("supplier", "text"),
        ("item", "text"),
        ("price", "text"),
        ("bid_time", "timestamp"),
        ("order_id", "text"),
        ("currency", "text"),
    ],
    ORDERS: [
        ("supplier", "string"),
        ("item", "string"),
        ("price", "string"),
        ("bid_time", "timestamp-millis"),
        ("order_id", "string"),
        ("currency", "string"),
    ],
    ARCHIVE: [
        ("supplier", "string"),
        ("item", "string"),
        ("price", "string"),
        ("bid_time", "string"),
        ("order_id", "string"),
        ("currency", "string"),
    ],
    STATS: [
        ("window_start", "string"),
        ("window_end", "string"),
        ("supplier", "string"),
        ("total_price", "double"),
        ("count", "long"),
    ],
    ICEBERG_ORDERS: [
        ("order_id", "string"),
        ("item", "string"),
        ("price", "decimal(10,2)"),
        ("supplier", "string"),
        ("bid_time", "timestamp_ntz"),
        ("currency", "string"),
    ],
    ICEBERG_STATS: [
        ("supplier", "string"),
        ("bid_date", "date"),
        ("bid_hour", "int"),
        ("total_price", "decimal(10,2)"),
        ("total_count", "bigint"),
    ],
    DLQ_SINK: [("key", "bytes"), ("value", "bytes")],
    DLQ_INGESTION: [
        ("src_topic", "string"),
        ("src_partition", "int"),
        ("src_offset", "bigint"),
        ("src_timestamp", "timestamp_ltz(3)"),
        ("record_key", "string"),
        ("raw_value", "bytes"),
        ("reason", "string"),
    ],
    DLQ_STATS: [("src_topic", "string"), ("raw_value", "bytes"), ("reason", "string")],
}
SYMLINKS = {ICEBERG_ORDERS: (CATALOG, "default.orders"), ICEBERG_STATS: (CATALOG, "default.supplier_stats")}

#: output dataset -> output column -> the (dataset, column) pairs it is computed from
COLUMN_LINEAGE: dict[tuple[str, str], dict[str, list[tuple[tuple[str, str], str]]]] = {
    ORDERS: {
        "supplier": [(SOURCE, "supplier")],
        "item": [(SOURCE, "item")],
        "price": [(SOURCE, "price")],
        "bid_time": [(SOURCE, "bid_time")],
        "order_id": [(SOURCE, "order_id")],
        "currency": [(SOURCE, "currency")],
    },
    ARCHIVE: {
        "supplier": [(ORDERS, "supplier")],
        "item": [(ORDERS, "item")],
        "price": [(ORDERS, "price")],
        "bid_time": [(ORDERS, "bid_time")],
        "order_id": [(ORDERS, "order_id")],
        "currency": [(ORDERS, "currency")],
    },
    STATS: {
        "window_start": [(ORDERS, "bid_time")],
        "window_end": [(ORDERS, "bid_time")],
        "supplier": [(ORDERS, "supplier")],
        "total_price": [(ORDERS, "price")],
        "count": [(ORDERS, "order_id")],
    },
    ICEBERG_ORDERS: {
        "order_id": [(ORDERS, "order_id")],
        "item": [(ORDERS, "item")],
        "price": [(ORDERS, "price")],
        "supplier": [(ORDERS, "supplier")],
        "bid_time": [(ORDERS, "bid_time")],
        "currency": [(ORDERS, "currency")],
    },
    ICEBERG_STATS: {
        "supplier": [(ICEBERG_ORDERS, "supplier")],
        "bid_date": [(ICEBERG_ORDERS, "bid_time")],
        "bid_hour": [(ICEBERG_ORDERS, "bid_time")],
        "total_price": [(ICEBERG_ORDERS, "price")],
        "total_count": [],
    },
}
#: the number of (input column, output column) edges above, counted by hand
COLUMN_EDGES = 6 + 6 + 5 + 6 + 4

#: job -> (processing type, inputs, outputs): the reference lab's data flow plus the dead-letter topics
JOBS: dict[str, tuple[str, list[tuple[str, str]], list[tuple[str, str]]]] = {
    "orders-source": ("STREAMING", [SOURCE], [ORDERS]),
    "orders-s3-sink": ("STREAMING", [ORDERS], [ARCHIVE, DLQ_SINK]),
    "supplier-stats": ("STREAMING", [ORDERS], [STATS, DLQ_STATS]),
    "iceberg-ingestion": ("STREAMING", [ORDERS], [ICEBERG_ORDERS, DLQ_INGESTION]),
    "dagster": ("BATCH", [], []),
    SPARK_JOB: ("BATCH", [ICEBERG_ORDERS], [ICEBERG_STATS]),
}
#: the datasets whose schemas lack ``currency`` before the source team adds it (the Iceberg table has it from its
#: deploy, and its ``currency`` column still names Kafka orders' ``currency`` as its source)
WITHOUT_CURRENCY_BEFORE = (SOURCE, ORDERS, ARCHIVE)


def run_id(run: int | str) -> str:
    return f"0195c1c0-0000-7000-8000-{run!s:0>12}"


def dataset(identity: tuple[str, str], output: bool, currency: bool = True) -> dict:
    fields = [
        {"name": name, "type": kind}
        for name, kind in SCHEMAS[identity]
        if currency or name != "currency" or identity not in WITHOUT_CURRENCY_BEFORE
    ]
    facets: dict = {"schema": {"fields": fields}}
    if identity in SYMLINKS:
        ns, name = SYMLINKS[identity]
        facets["symlinks"] = {"identifiers": [{"namespace": ns, "name": name, "type": "TABLE"}]}
    if output and identity in COLUMN_LINEAGE:
        present = {f["name"] for f in fields}
        facets["columnLineage"] = {
            "fields": {
                column: {
                    "inputFields": [{"namespace": src[0], "name": src[1], "field": src_col} for src, src_col in sources]
                }
                for column, sources in COLUMN_LINEAGE[identity].items()
                if column in present
            }
        }
    return {"namespace": identity[0], "name": identity[1], "facets": facets}


def event(job: str, event_type: str = "RUNNING", run: int | str = 1, minute: int = 0, currency: bool = True) -> dict:
    """The job's run event as its emitter sends it, with its datasets (no datasets for the Dagster run job)."""
    processing, inputs, outputs = JOBS[job]
    run_facets: dict = {}
    return copy.deepcopy(
        {
            "eventType": event_type,
            "eventTime": f"2025-05-01T00:{minute:02d}:00.000Z",
            "run": {"runId": run_id(run), "facets": run_facets},
            "job": {
                "namespace": JOBS_NAMESPACE,
                "name": job,
                "facets": {"jobType": {"processingType": processing, "jobType": "JOB"}},
            },
            "inputs": [dataset(i, output=False, currency=currency) for i in inputs],
            "outputs": [dataset(o, output=True, currency=currency) for o in outputs],
            "producer": "tests/unit/lineage_assets/checks/reference_lineage.py",
            "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        }
    )


def whole_pipeline_events(currency: bool = True) -> list[dict]:
    """One RUNNING event of every job, each its own run (1..6)."""
    return [event(job, run=i, currency=currency) for i, job in enumerate(JOBS, start=1)]
