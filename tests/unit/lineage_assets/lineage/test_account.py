"""The engine's account against the declaration: every dataset and column where they part, in one sentence each.
Expected names and sentences are written by hand."""

import json

from infra.settings import StackSettings
from lineage_assets.lineage.account import (
    DECLARED,
    OBSERVED,
    Account,
    ColumnAccount,
    DatasetName,
    SourceField,
    Unknown,
    declared_account,
    differences,
    reportable,
    with_declared_columns,
)
from lineage_assets.lineage.events import EventBuilder, RunState
from lineage_assets.lineage.identity import Pipeline

PIPELINE = Pipeline.from_settings(StackSettings())
ORDERS = DatasetName("kafka://127.0.0.1:9092", "orders")
SECOND = DatasetName("kafka://127.0.0.1:9092", "orders-eu")
ARCHIVE = DatasetName("s3://orders-archive", "topics/orders")
ARCHIVE_EU = DatasetName("s3://orders-archive", "topics/orders-eu")
SINK_DLQ = DatasetName("kafka://127.0.0.1:9092", "orders-dlq")
ICEBERG = DatasetName("s3://warehouse", "default/orders")


def test_the_declaration_agrees_with_itself():
    for job in ("orders-source", "orders-s3-sink", "supplier-stats", "iceberg-ingestion"):
        assert differences(declared_account(PIPELINE, job), declared_account(PIPELINE, job)) == []


def test_a_connector_reading_a_second_topic_is_named():
    observed = Account("orders-s3-sink", "Connect", (ORDERS, SECOND), (ARCHIVE, ARCHIVE_EU, SINK_DLQ))
    assert differences(observed, declared_account(PIPELINE, "orders-s3-sink")) == [
        "orders-s3-sink reads kafka://127.0.0.1:9092/orders-eu; not declared",
        "orders-s3-sink writes s3://orders-archive/topics/orders-eu; not declared",
    ]


def test_a_missing_output_and_a_loopback_spelling():
    # localhost is the same broker as 127.0.0.1: no difference; the dead-letter topic it no longer writes is one
    observed = Account("orders-s3-sink", "Connect", (DatasetName("kafka://localhost:9092", "orders"),), (ARCHIVE,))
    assert differences(observed, declared_account(PIPELINE, "orders-s3-sink")) == [
        "orders-s3-sink does not write kafka://127.0.0.1:9092/orders-dlq; declared"
    ]


def test_observed_columns_are_compared_on_their_direct_sources_and_declared_ones_are_not():
    def column(source: str, origin=OBSERVED, kind="DIRECT") -> ColumnAccount:
        return ColumnAccount((SourceField(ORDERS, source, kind, "TRANSFORMATION"),), origin)

    iceberg_dlq = DatasetName("kafka://127.0.0.1:9092", "orders-dlq-flink")
    observed = Account(
        "iceberg-ingestion",
        "plan",
        (ORDERS,),
        (ICEBERG, iceberg_dlq),
        {
            ICEBERG: {
                "order_id": column("order_id"),
                "item": column("supplier"),  # computed from another column
                "price": column("price", kind="DIRECT"),
                "supplier": column("item", origin=DECLARED),  # declared-only: not compared
                "bid_time": ColumnAccount(
                    (SourceField(ORDERS, "bid_time"), SourceField(ORDERS, "currency", "INDIRECT", "FILTER")), OBSERVED
                ),
                "extra": column("item"),
            }
        },
    )
    assert differences(observed, declared_account(PIPELINE, "iceberg-ingestion")) == [
        "iceberg-ingestion does not write column s3://warehouse/default/orders.currency; declared from "
        "kafka://127.0.0.1:9092/orders.currency",
        "iceberg-ingestion writes column s3://warehouse/default/orders.extra from kafka://127.0.0.1:9092/orders.item; "
        "not declared",
        "iceberg-ingestion computes s3://warehouse/default/orders.item from kafka://127.0.0.1:9092/orders.supplier; "
        "declared kafka://127.0.0.1:9092/orders.item",
    ]


def test_declared_columns_fill_in_only_on_declared_outputs_and_say_so():
    observed = Account("supplier-stats", "listener", (ORDERS,), (DatasetName("kafka://127.0.0.1:9092", "shadow"),))
    assert with_declared_columns(observed, PIPELINE).columns == {}
    normal = Account(
        "supplier-stats", "listener", (ORDERS,), (DatasetName("kafka://127.0.0.1:9092", "supplier-stats"),)
    )
    filled = with_declared_columns(normal, PIPELINE)
    (columns,) = filled.columns.values()
    assert sorted(columns) == ["count", "supplier", "total_price", "window_end", "window_start"]
    assert {c.origin for c in columns.values()} == {DECLARED}


def test_an_unknown_account_stands_in_with_the_last_one_else_the_declaration_saying_so():
    last = Account("supplier-stats", "listener", (ORDERS,), (SECOND,))
    assert reportable(PIPELINE, Unknown("supplier-stats", "Flink down"), last) is last
    stand_in = reportable(PIPELINE, Unknown("supplier-stats", "Flink down"))
    assert stand_in.reader == "the declaration, standing in: the engine's account is unknown (Flink down)"
    assert Account.from_dict(json.loads(json.dumps(stand_in.to_dict()))) == stand_in


def test_events_carry_the_account_and_say_per_column_where_the_lineage_comes_from():
    account = with_declared_columns(
        Account(
            "supplier-stats",
            "Flink job j1: the listener",
            (ORDERS,),
            (DatasetName("kafka://127.0.0.1:9092", "supplier-stats"), DatasetName("kafka://127.0.0.1:9092", "x")),
        ),
        PIPELINE,
    )
    event = EventBuilder(PIPELINE).event(
        "supplier-stats", RunState.RUNNING, "0195c1c0-0000-7000-8000-000000000001", account=account
    )
    outputs = {(d.namespace, d.name): d.facets for d in event.outputs}
    assert list(outputs) == [("kafka://127.0.0.1:9092", "supplier-stats"), ("kafka://127.0.0.1:9092", "x")]
    stats = outputs[("kafka://127.0.0.1:9092", "supplier-stats")]
    assert stats["lineageOrigin"].reader == "Flink job j1: the listener"
    assert stats["lineageOrigin"].columns["total_price"] == "declared"
    assert stats["columnLineage"].fields["total_price"].inputFields[0].field == "price"
    assert "schema" not in outputs[("kafka://127.0.0.1:9092", "x")], "nothing is known of an undeclared topic"


def test_a_column_computed_from_no_column_has_nothing_for_an_engine_to_report():
    stats = DatasetName("s3://warehouse", "default/supplier_stats")
    observed = Account(
        "dagster.supplier_stats",
        "Spark",
        (ICEBERG,),
        (stats,),
        {stats: {"supplier": ColumnAccount((SourceField(ICEBERG, "supplier"),), OBSERVED)}},
    )
    assert differences(observed, declared_account(PIPELINE, "dagster.supplier_stats")) == [
        "dagster.supplier_stats does not write column s3://warehouse/default/supplier_stats.bid_date; declared from "
        "s3://warehouse/default/orders.bid_time",
        "dagster.supplier_stats does not write column s3://warehouse/default/supplier_stats.bid_hour; declared from "
        "s3://warehouse/default/orders.bid_time",
        "dagster.supplier_stats does not write column s3://warehouse/default/supplier_stats.total_price; declared from "
        "s3://warehouse/default/orders.price",
    ], "total_count (count of rows) is not among them"


def test_the_accounts_location_is_the_jobs_source_code_location_so_marquez_versions_each_change():
    """Marquez links a streaming job to a version only when it creates it: a job put back to lineage it had before
    would stay on the version in between unless each change is a version of its own (its location is part of it)."""
    account = Account("supplier-stats", "listener", (ORDERS,), (SECOND,), location="http://127.0.0.1:8081/jobs/j9")
    event = EventBuilder(PIPELINE).event(
        "supplier-stats", RunState.RUNNING, "0195c1c0-0000-7000-8000-000000000001", account=account
    )
    location = event.job.facets["sourceCodeLocation"]
    assert (location.type, location.url) == ("flink", "http://127.0.0.1:8081/jobs/j9")
    assert Account.from_dict(account.to_dict()).location == "http://127.0.0.1:8081/jobs/j9"
    declared = EventBuilder(PIPELINE).event("supplier-stats", RunState.RUNNING, "0195c1c0-0000-7000-8000-000000000001")
    assert "sourceCodeLocation" not in declared.job.facets
