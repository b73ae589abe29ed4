"""A compatible change travels the whole running pipeline: `ALTER TABLE public.orders ADD COLUMN currency text`
while orders flow into the table. Every order arrives exactly once in Kafka, Iceberg, the archive and the windows;
the orders written after the change carry their currency in Kafka, Iceberg and the archive; Spark summarises the
evolved table; Marquez holds a new version of the source, the topic and the archive with the new field, and column
lineage for it. The expectations come from what this test inserted, never from the pipeline's own code."""

from __future__ import annotations

import collections
import datetime as dt
import json
import threading
import time
import uuid
from decimal import Decimal

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext
from pyiceberg.expressions import EqualTo

from infra.settings import StackSettings
from lineage_assets.definitions import build_definitions
from lineage_assets.lineage.marquez_client import MarquezClient
from lineage_assets.source.schema_guard import FUNCTION_PREFIX
from tests.service.lineage_assets.conftest import after_everything_in_orders, read_topic, upstream_columns
from tests.support.order_stream import assert_windows_equal, counted, expected_windows, windows_complete

defs = build_definitions(StackSettings.from_env())

BEFORE, AFTER = 60, 60  # orders written before and after the change
TIMEOUT = 300.0


def has_currency(source_db) -> bool:
    with source_db.connect() as conn:
        return bool(
            conn.execute(
                "SELECT 1 FROM information_schema.columns WHERE table_schema = 'public' AND table_name = 'orders' "
                "AND column_name = 'currency'"
            ).fetchone()
        )


@pytest.fixture(scope="module")
def source_db(flink_jobs_run):
    """The running pipeline's source table as it was before the change (an earlier run of this test on the same
    stack added the column: it is dropped, past the guard, so the change happens again)."""
    db = defs.resources["source_db"]
    if has_currency(db):
        with db.connect(admin=True) as admin:
            admin.execute(f"ALTER EVENT TRIGGER {FUNCTION_PREFIX}_drop DISABLE")
            try:
                admin.execute("ALTER TABLE public.orders DROP COLUMN currency")
            finally:
                admin.execute(f"ALTER EVENT TRIGGER {FUNCTION_PREFIX}_drop ENABLE")
    return db


class FlowingOrders(threading.Thread):
    """Inserts orders of one supplier in small commits until stopped; once ``altered`` is set it fills currency."""

    def __init__(self, source_db, supplier: str, first_bid: dt.datetime) -> None:
        super().__init__(daemon=True)
        self.source_db, self.supplier, self.first_bid = source_db, supplier, first_bid
        self.altered, self.stopped = threading.Event(), threading.Event()
        self.written: dict[str, dict] = {}
        self.error: BaseException | None = None

    def count(self, with_currency: bool) -> int:
        return sum((o["currency"] is not None) == with_currency for o in list(self.written.values()))

    def run(self) -> None:
        try:
            with self.source_db.connect() as conn:
                n = 0
                while not self.stopped.is_set():
                    currency = "EUR" if self.altered.is_set() else None
                    batch = []
                    for _ in range(10):
                        bid = self.first_bid + dt.timedelta(milliseconds=100 * n)
                        price = f"{(n * 37) % 15000 / 100 + 1:.2f}"
                        batch.append((f"evo-{self.supplier}-{n}", self.supplier, "Lamp", price, bid, currency))
                        n += 1
                    columns = "order_id, supplier, item, price, bid_time" + (", currency" if currency else "")
                    values = ", ".join(["%s"] * (6 if currency else 5))
                    with conn.transaction(), conn.cursor() as cur:
                        cur.executemany(
                            f"INSERT INTO public.orders ({columns}) VALUES ({values})",
                            [row if currency else row[:5] for row in batch],
                        )
                    for order_id, _, _, price, bid, cur_ in batch:
                        self.written[order_id] = {"price": Decimal(price), "bid_time": bid, "currency": cur_}
                    time.sleep(0.3)
        except BaseException as exc:
            self.error = exc


def wait_for(what: str, read, done, timeout: float = TIMEOUT):
    deadline = time.monotonic() + timeout
    while True:
        value = read()
        if done(value) or time.monotonic() > deadline:
            return value
        time.sleep(3)


def archived(settings, supplier: str, since: dt.datetime) -> list[dict]:
    s3 = defs.resources["object_store"].client()
    records = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=settings.archive_bucket, Prefix="topics/orders/"):
        for obj in page.get("Contents", []):
            if obj["LastModified"] < since:
                continue
            try:
                body = s3.get_object(Bucket=settings.archive_bucket, Key=obj["Key"])["Body"].read().decode()
            except s3.exceptions.NoSuchKey:  # rewritten while listed; read next round
                continue
            records += [r for r in map(json.loads, filter(None, body.splitlines())) if r.get("supplier") == supplier]
    return records


@pytest.fixture(scope="module")
def changed(settings, source_db):
    """Orders flowing, the column added in the middle, then the windows flushed; returns what was written."""
    supplier = f"evolve-{uuid.uuid4().hex[:8]}"
    started = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=5)
    flow = FlowingOrders(source_db, supplier, after_everything_in_orders(settings))
    flow.start()
    wait_for("orders before", lambda: flow.count(False), lambda n: n >= BEFORE or flow.error, 60)
    with source_db.connect() as conn:
        conn.execute("ALTER TABLE public.orders ADD COLUMN currency text")
    flow.altered.set()
    wait_for("orders after", lambda: flow.count(True), lambda n: n >= AFTER or flow.error, 60)
    flow.stopped.set()
    flow.join(30)
    assert flow.error is None, f"inserting orders failed: {flow.error!r}"
    assert flow.count(False) >= BEFORE and flow.count(True) >= AFTER, "orders flowed on both sides of the change"
    # windows close when every partition's watermark passes them: later orders of another supplier, past the last
    # window by more than the 5 s out-of-orderness
    last = max(o["bid_time"] for o in flow.written.values())
    with source_db.connect() as conn, conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO public.orders (order_id, supplier, item, price, bid_time, currency) "
            "VALUES (%s, %s, '-', '0.00', %s, NULL)",
            [(f"flush-{supplier}-{i}", f"flush-{supplier}", last + dt.timedelta(seconds=11)) for i in range(30)],
        )
    return supplier, flow.written, started


def test_every_order_reaches_iceberg_once_with_its_currency(settings, pipeline, changed):
    supplier, written, _ = changed
    table = defs.resources["iceberg"].catalog().load_table(pipeline.dataset("iceberg_orders").symlinks[0].name)

    def rows():
        scan = table.refresh().scan(row_filter=EqualTo("supplier", supplier), selected_fields=("order_id", "currency"))
        return scan.to_arrow().to_pylist()

    found = wait_for("iceberg", rows, lambda r: len(r) >= len(written))
    counts = collections.Counter(r["order_id"] for r in found)
    assert set(counts) == set(written), f"{len(set(written) - set(counts))} orders missing from Iceberg"
    assert max(counts.values()) == 1, f"duplicated in Iceberg: {[k for k, v in counts.items() if v > 1][:5]}"
    assert {r["order_id"]: r["currency"] for r in found} == {k: o["currency"] for k, o in written.items()}
    assert "currency" in table.schema().column_names


def test_every_order_is_in_kafka_once_and_the_new_version_carries_currency(settings, changed):
    supplier, written, _ = changed
    deserialize = AvroDeserializer(SchemaRegistryClient({"url": settings.schema_registry_url}))
    ctx = SerializationContext("orders", MessageField.VALUE)

    def want(msg):
        try:
            order = deserialize(msg.value(), ctx)
        except Exception:  # the poison other tests left in the topic
            return None
        if not isinstance(order, dict) or order.get("supplier") != supplier:
            return None
        return order["order_id"], order.get("currency")

    found = wait_for("kafka", lambda: read_topic(settings, "orders", want), lambda f: len(f) >= len(written))
    counts = collections.Counter(order_id for order_id, _ in found)
    assert set(counts) == set(written) and max(counts.values()) == 1, "each order exactly once in Kafka"
    assert dict(found) == {k: o["currency"] for k, o in written.items()}
    registry = SchemaRegistryClient({"url": settings.schema_registry_url})
    assert registry.get_compatibility("orders-value") == "BACKWARD_TRANSITIVE", "the subject's own rule"
    latest = json.loads(registry.get_latest_version("orders-value").schema.schema_str)
    assert {"name": "currency", "type": ["null", "string"], "default": None} in latest["fields"]


def test_every_order_is_archived_once_with_its_currency(settings, changed):
    supplier, written, started = changed
    found = wait_for("archive", lambda: archived(settings, supplier, started), lambda r: len(r) >= len(written))
    counts = collections.Counter(r["order_id"] for r in found)
    assert set(counts) == set(written) and max(counts.values()) == 1, "each order exactly once in the archive"
    assert {r["order_id"]: r.get("currency") for r in found} == {k: o["currency"] for k, o in written.items()}
    assert any("currency" in r for r in found) and any("currency" not in r for r in found), "old and new records"


def test_the_windows_count_every_order_once(settings, changed):
    supplier, written, _ = changed
    expected = expected_windows({k: {**o, "supplier": supplier} for k, o in written.items()})
    deserialize = AvroDeserializer(SchemaRegistryClient({"url": settings.schema_registry_url}))
    ctx = SerializationContext("supplier-stats", MessageField.VALUE)

    def want(msg):
        v = deserialize(msg.value(), ctx)
        return ((v["window_start"], supplier), (v["total_price"], v["count"])) if v["supplier"] == supplier else None

    found = read_topic(settings, "supplier-stats", want, lambda f: windows_complete(f, expected), TIMEOUT)
    assert_windows_equal(found, expected)
    assert counted(found) == len(written)


def test_spark_summarises_the_evolved_table(settings, pipeline, changed):
    supplier, written, _ = changed
    stats = defs.resources["iceberg"].catalog().load_table(pipeline.dataset("iceberg_supplier_stats").symlinks[0].name)

    def total():
        rows = stats.refresh().scan(row_filter=EqualTo("supplier", supplier), selected_fields=("total_count",))
        return sum(r["total_count"] for r in rows.to_arrow().to_pylist())

    assert wait_for("spark", total, lambda n: n >= len(written)) == len(written), (
        "the supplier_stats run the new-orders sensor requested counts every order of the evolved table"
    )


def test_marquez_holds_new_versions_with_currency_and_its_column_lineage(settings, pipeline, changed):
    """The topic and the archive (written by the connectors) get a new version with currency. Marquez versions a
    dataset only when a job writes it: the source table, written by the application, keeps its one version, and
    its current fields follow the reader's (orders-source's) events."""
    marquez = MarquezClient(settings.marquez_url)

    def fields(version: dict | None) -> set[str]:
        return {f["name"] for f in (version or {}).get("fields", [])}

    def versions() -> dict[str, list[dict]]:
        return {
            key: marquez.dataset_versions(ds.namespace, ds.name)
            for key, ds in ((k, pipeline.dataset(k)) for k in ("kafka_orders", "archive_orders"))
        }

    found = wait_for(
        "marquez",
        versions,
        lambda v: all(vs and "currency" in fields(vs[0]) for vs in v.values()),
        timeout=180,
    )
    for key, history in found.items():
        assert history and "currency" in fields(history[0]), f"{key}: the current version has currency"
        assert any("currency" not in fields(v) for v in history[1:]), f"{key}: an earlier version without it"
    for key in ("source_orders", "iceberg_orders"):
        ds = pipeline.dataset(key)
        assert "currency" in fields(marquez.dataset(ds.namespace, ds.name)), f"{key}: current fields have currency"

    source, topic, archive, table = (
        pipeline.dataset(k) for k in ("source_orders", "kafka_orders", "archive_orders", "iceberg_orders")
    )
    from_source = {(source.namespace, source.name, "currency"), (topic.namespace, topic.name, "currency")}
    assert from_source <= upstream_columns(marquez, archive.node_id, "currency")
    assert from_source <= upstream_columns(marquez, table.node_id, "currency")


def test_the_registry_refuses_a_version_that_breaks_earlier_records(settings, changed):
    """What gets past the schema guard (a database without it) is stopped at the registry by the subject's rule: a
    new field without a default cannot read the records written before it; an optional one can."""
    registry = SchemaRegistryClient({"url": settings.schema_registry_url})
    latest = json.loads(registry.get_latest_version("orders-value").schema.schema_str)

    def with_field(field: dict) -> Schema:
        return Schema(json.dumps({**latest, "fields": [*latest["fields"], field]}), "AVRO")

    assert not registry.test_compatibility("orders-value", with_field({"name": "channel", "type": "string"}))
    assert registry.test_compatibility(
        "orders-value", with_field({"name": "channel", "type": ["null", "string"], "default": None})
    )
    with pytest.raises(SchemaRegistryError) as refused:
        registry.register_schema("orders-value", with_field({"name": "channel", "type": "string"}))
    assert refused.value.http_status_code == 409, refused.value
