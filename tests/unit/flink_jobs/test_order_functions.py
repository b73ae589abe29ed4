"""The JVM order functions (flink_jobs/order-functions, unit tested by Maven with JUnit when the bundle is built)
against the Python side that configures them: the columns they decode are the ones the identity module declares."""

import re

from infra.settings import REPO_ROOT, StackSettings
from lineage_assets.lineage.identity import Pipeline

DECODER = REPO_ROOT / "flink_jobs/order-functions/src/main/java/lab/lineage/orders/OrderDecoder.java"
FUNCTION = REPO_ROOT / "flink_jobs/order-functions/src/main/java/lab/lineage/orders/flink/DecodeOrderFunction.java"


def declared(name: str) -> list[str]:
    found = re.search(rf"{name} = List\.of\(([^)]*)\)", DECODER.read_text())
    assert found, f"{name} is no longer a List.of(...) in {DECODER.name}: update this test"
    return re.findall(r'"([^"]+)"', found.group(1))


def test_the_decoder_carries_exactly_the_optional_columns_the_identity_module_declares():
    topic = Pipeline.from_settings(StackSettings()).dataset("kafka_orders")
    assert set(declared("OPTIONAL_STRINGS")) == {c.name for c in topic.columns if c.optional}
    assert set(declared("REQUIRED_STRINGS")) | {"bid_time"} == {c.name for c in topic.columns if not c.optional}


def test_the_table_function_row_holds_every_column_of_the_topic_and_the_error():
    topic = Pipeline.from_settings(StackSettings()).dataset("kafka_orders")
    hint = re.search(r"ROW<([^>]*)>", FUNCTION.read_text().replace('"\n        + "', ""))
    assert hint, "DecodeOrderFunction lost its ROW<...> output hint"
    names = [part.strip().split()[0] for part in hint.group(1).split(",") if part.strip()[:1].isalpha()]
    assert set(names) == {c.name for c in topic.columns} | {"error"}
