"""A Flink job's account from the listener's START and the compiled plan its driver put in its configuration.
Every expected name is written by hand (no naming function of the product computes it)."""

from flink_jobs.deployment import LINEAGE, LINEAGE_ERROR, encode_json
from infra.settings import StackSettings
from lineage_assets.flink.job_lineage import flink_account, identifier_parts
from lineage_assets.lineage.account import DECLARED, OBSERVED, Account, Unknown, declared_account, differences
from lineage_assets.lineage.identity import Pipeline

PIPELINE = Pipeline.from_settings(StackSettings())
KAFKA = "kafka://127.0.0.1:9092"


def start(jid: str, inputs: list[tuple[str, str]], outputs: list[tuple[str, str]]) -> dict:
    """A START as the OpenLineage Flink 2 listener writes it (the shape read off the stack's listener file)."""
    return {
        "eventType": "START",
        "run": {"runId": "r", "facets": {"flink_job": {"jobId": jid}}},
        "job": {"namespace": "lineage-lab", "name": "x"},
        "inputs": [{"namespace": ns, "name": n, "facets": {}} for ns, n in inputs],
        "outputs": [{"namespace": ns, "name": n, "facets": {}} for ns, n in outputs],
    }


def test_the_listener_names_what_supplier_stats_writes_and_the_check_names_the_difference():
    shadow = start("j1", [(KAFKA, "orders")], [(KAFKA, "supplier-stats-shadow"), (KAFKA, "orders-dlq-supplier-stats")])
    account = flink_account(PIPELINE, "supplier-stats", "j1", [shadow], {}, "/l.jsonl", "http://flink")
    assert isinstance(account, Account)
    assert [(d.namespace, d.name) for d in account.outputs] == [
        ("kafka://127.0.0.1:9092", "orders-dlq-supplier-stats"),  # declared ones first, in declared order
        ("kafka://127.0.0.1:9092", "supplier-stats-shadow"),
    ]
    assert "its columns as declared" in account.reader
    assert differences(account, declared_account(PIPELINE, "supplier-stats")) == [
        "supplier-stats writes kafka://127.0.0.1:9092/supplier-stats-shadow; "
        "declared kafka://127.0.0.1:9092/supplier-stats"
    ]


def test_the_declared_job_agrees_with_itself_and_keeps_its_columns_marked_declared():
    normal = start("j1", [(KAFKA, "orders")], [(KAFKA, "orders-dlq-supplier-stats"), (KAFKA, "supplier-stats")])
    account = flink_account(PIPELINE, "supplier-stats", "j1", [normal], {}, "/l.jsonl", "http://flink")
    assert differences(account, declared_account(PIPELINE, "supplier-stats")) == []
    (windows,) = [cols for out, cols in account.columns.items() if out.name == "supplier-stats"]
    assert {c: a.origin for c, a in windows.items()} == dict.fromkeys(
        ["window_start", "window_end", "supplier", "total_price", "count"], DECLARED
    )


PLAN = {
    "sinks": [
        {
            "table": "`lakehouse`.`default`.`orders`",
            "options": {},
            "columns": {
                "order_id": [
                    {
                        "table": "`default_catalog`.`default_database`.`orders_raw`",
                        "options": {
                            "connector": "kafka",
                            "topic": "orders",
                            "properties.bootstrap.servers": "127.0.0.1:9092",
                        },
                        "column": "v",
                        "field": "order_id",
                        "type": "DIRECT",
                        "subtype": "TRANSFORMATION",
                        "description": "decode_order",
                    }
                ],
                "item": [
                    {
                        "table": "`default_catalog`.`default_database`.`orders_raw`",
                        "options": {
                            "connector": "kafka",
                            "topic": "orders",
                            "properties.bootstrap.servers": "127.0.0.1:9092",
                        },
                        "column": "v",
                        "field": "supplier",
                        "type": "DIRECT",
                        "subtype": "TRANSFORMATION",
                        "description": "decode_order",
                    }
                ],
            },
            "indirect": [],
        }
    ],
    "sources": [
        {
            "table": "`default_catalog`.`default_database`.`orders_raw`",
            "options": {"connector": "kafka", "topic": "orders", "properties.bootstrap.servers": "127.0.0.1:9092"},
        }
    ],
    "catalogs": {"lakehouse": {"type": "iceberg", "uri": "http://127.0.0.1:8181"}},
}


def test_a_catalog_table_of_the_listener_is_named_after_the_plans_catalog_and_columns_come_from_the_plan():
    event = start("j2", [(KAFKA, "orders")], [("", "lakehouse.default.orders"), (KAFKA, "orders-dlq-flink")])
    config = {LINEAGE: encode_json(PLAN)}
    account = flink_account(PIPELINE, "iceberg-ingestion", "j2", [event], config, "/l.jsonl", "http://flink")
    assert isinstance(account, Account)
    # the catalog's name for the table is its symlink: spelled as the identity module spells the table, by location
    assert [(d.namespace, d.name) for d in account.outputs] == [
        ("s3://warehouse", "default/orders"),
        ("kafka://127.0.0.1:9092", "orders-dlq-flink"),
    ]
    (table,) = [cols for out, cols in account.columns.items() if out.name == "default/orders"]
    assert table["order_id"].origin == OBSERVED and table["order_id"].sources[0].column == "order_id"
    assert table["price"].origin == DECLARED, "a column the plan did not give keeps its declaration, marked"
    assert differences(account, declared_account(PIPELINE, "iceberg-ingestion")) == [
        "iceberg-ingestion computes s3://warehouse/default/orders.item from kafka://127.0.0.1:9092/orders.supplier; "
        "declared kafka://127.0.0.1:9092/orders.item"
    ]


def test_without_the_listener_the_plans_tables_name_the_datasets():
    config = {LINEAGE: encode_json(PLAN)}
    account = flink_account(PIPELINE, "iceberg-ingestion", "j2", [], config, "/l.jsonl", "http://flink")
    assert [(d.namespace, d.name) for d in account.inputs] == [("kafka://127.0.0.1:9092", "orders")]
    assert [(d.namespace, d.name) for d in account.outputs] == [("s3://warehouse", "default/orders")]
    assert "compiled plan" in account.reader


def test_an_account_that_cannot_be_read_is_unknown_and_says_what_to_do():
    nothing = flink_account(PIPELINE, "supplier-stats", "j3", [], {}, "/l.jsonl", "http://flink")
    assert isinstance(nothing, Unknown)
    assert "/l.jsonl has no event for it" in nothing.reason and "Submit it with the project's" in nothing.reason
    broken = {LINEAGE_ERROR: encode_json("TableException: boom")}
    failed = flink_account(PIPELINE, "iceberg-ingestion", "j3", [], broken, "/l.jsonl", "http://flink")
    assert isinstance(failed, Unknown) and "could not read its plan: TableException: boom" in failed.reason
    stray = start("j4", [(KAFKA, "orders")], [("", "elsewhere.default.orders")])
    odd = flink_account(PIPELINE, "iceberg-ingestion", "j4", [stray], {}, "/l.jsonl", "http://flink")
    assert isinstance(odd, Unknown) and "catalog 'elsewhere', which the job's plan does not describe" in odd.reason


def test_identifiers_split_with_and_without_backquotes():
    assert identifier_parts("`lakehouse`.`default`.`orders`") == ["lakehouse", "default", "orders"]
    assert identifier_parts("lakehouse.default.orders") == ["lakehouse", "default", "orders"]
    assert identifier_parts("`a.b`.`c``d`.e") == ["a.b", "c`d", "e"]
