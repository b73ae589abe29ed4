"""Resolving what a person names, and walking Marquez-shaped graphs downstream (the graphs are small literal
excerpts in the shape Marquez's lineage and column-lineage APIs return)."""

import pytest

from infra.settings import StackSettings
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.lineage.impact import UnknownTarget, downstream_columns, downstream_nodes, resolve

PIPELINE = Pipeline.from_settings(StackSettings())


def test_a_name_a_key_an_asset_key_or_a_catalog_name_resolve_to_one_dataset():
    kafka, iceberg = PIPELINE.dataset("kafka_orders"), PIPELINE.dataset("iceberg_orders")
    assert resolve(PIPELINE, "orders").dataset == kafka
    assert resolve(PIPELINE, "kafka_orders").dataset == kafka
    assert resolve(PIPELINE, "/".join(kafka.asset_key)).dataset == kafka
    assert resolve(PIPELINE, "default.orders").dataset == iceberg
    target = resolve(PIPELINE, "orders.price")
    assert (target.dataset, target.column) == (kafka, "price")
    assert resolve(PIPELINE, "default.orders.price").column == "price"


def test_an_unknown_column_or_dataset_says_what_exists():
    with pytest.raises(UnknownTarget, match=r"has no column 'nope'; its columns: .*price"):
        resolve(PIPELINE, "orders.nope")
    with pytest.raises(UnknownTarget, match=r"no dataset is called 'nothing'.*kafka_orders"):
        resolve(PIPELINE, "nothing")


def field(ns, ds, name, *inputs):
    return {
        "id": f"datasetField:{ns}:{ds}:{name}",
        "type": "DATASET_FIELD",
        "data": {
            "namespace": ns,
            "dataset": ds,
            "field": name,
            "inputFields": [{"namespace": i[0], "dataset": i[1], "field": i[2]} for i in inputs],
        },
    }


def test_downstream_columns_follow_input_fields_transitively_and_only_from_the_start():
    k = "kafka://b:9092"
    graph = [
        field(k, "orders", "price"),
        field(k, "orders", "item"),
        field("s3://w", "default/orders", "price", (k, "orders", "price")),
        field("s3://w", "default/orders", "item", (k, "orders", "item")),
        field("s3://w", "default/supplier_stats", "total_price", ("s3://w", "default/orders", "price")),
        field(k, "supplier-stats", "total_price", (k, "orders", "price")),
        field(k, "supplier-stats", "supplier", (k, "orders", "supplier")),
    ]
    found = downstream_columns(graph, (k, "orders", "price"))
    assert set(found) == {
        ("s3://w", "default/orders", "price"),
        ("s3://w", "default/supplier_stats", "total_price"),
        (k, "supplier-stats", "total_price"),
    }
    assert found.index(("s3://w", "default/orders", "price")) < found.index(
        ("s3://w", "default/supplier_stats", "total_price")
    ), "nearest first"


def test_downstream_nodes_follow_out_edges_and_survive_cycles():
    def node(node_id, *to):
        return {"id": node_id, "outEdges": [{"origin": node_id, "destination": d} for d in to]}

    graph = [
        node("dataset:a", "job:x"),
        node("job:x", "dataset:b", "dataset:a"),
        node("dataset:b", "job:y"),
        node("job:y", "dataset:c"),
        node("dataset:upstream", "dataset:a"),
    ]
    assert downstream_nodes(graph, "dataset:a") == ["job:x", "dataset:b", "job:y", "dataset:c"]
    assert downstream_nodes(graph, "dataset:c") == []


# --- exact values (issue 28: each pins a mutant of the walk; see docs/mutation.md) ---------------------------------
def test_a_node_reached_twice_is_listed_once_nearest_first():
    graph = [
        {"id": "a", "outEdges": [{"destination": "b"}, {"destination": "c"}]},
        {"id": "b", "outEdges": [{"destination": "d"}]},
        {"id": "c", "outEdges": [{"destination": "d"}]},
        {"id": "d", "outEdges": [{"destination": "b"}]},
    ]
    assert downstream_nodes(graph, "a") == ["b", "c", "d"]


def field_node(name: str, *inputs: str, kind: str = "DATASET_FIELD") -> dict:
    refs = [{"namespace": "ns", "dataset": i.split(".")[0], "field": i.split(".")[1]} for i in inputs]
    return {
        "type": kind,
        "data": {"namespace": "ns", "dataset": name.split(".")[0], "field": name.split(".")[1], "inputFields": refs},
    }


def test_only_field_nodes_carry_column_lineage_wherever_they_are_listed():
    graph = [
        field_node("t.ghost", "s.x", kind="DATASET"),  # not a field: its inputFields are no lineage
        {"type": "DATASET_FIELD", "data": {}},  # a field node without data
        field_node("t.y", "s.x"),
        field_node("u.z", "t.y"),
    ]
    assert downstream_columns(graph, ("ns", "s", "x")) == [("ns", "t", "y"), ("ns", "u", "z")]
