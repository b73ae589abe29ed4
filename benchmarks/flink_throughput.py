"""Sustained orders/s through each Flink job next to a plain Kafka consume of the same records, in one run; and
the ingestion-to-queryable latency of Iceberg `default.orders`.

Deploys both jobs through their Dagster assets (no-op when they already run), then per round: produces a burst of
N orders (bid_time = now, as the generator does) into `orders`, measures how fast each job's Kafka source reads
them (Flink's numRecordsIn of the source vertex) and how fast a plain confluent-kafka consumer reads the same N
records, and when iceberg-ingestion has committed all of them. Afterwards, single marker orders time the delay
from produce to visible in a pyiceberg scan. Prints medians and ratios. Needs the stack up.

    .venv/bin/python benchmarks/flink_throughput.py --orders 50000 --rounds 3
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import dagster as dg
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pyiceberg.expressions import EqualTo

from infra.settings import StackSettings
from lineage_assets.flink import iceberg_ingestion, supplier_stats
from lineage_assets.flink.client import FlinkClient
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.resources import LineageResource, build_resources

SUPPLIERS = ["Alice", "Bob", "Carol", "Alex", "Joe", "James", "Jane", "Jack"]


def deploy(settings: StackSettings, outbox: Path) -> dict[str, str]:
    pipeline = Pipeline.from_settings(settings)
    resources = {
        **build_resources(settings),
        "lineage": LineageResource(outbox_path=str(outbox), backend_url=settings.marquez_url),
    }
    assets = [
        iceberg_ingestion.build_iceberg_ingestion_asset(pipeline, settings),
        supplier_stats.build_supplier_stats_stream_asset(pipeline, settings),
    ]
    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize(assets, resources=resources, instance=instance)
    assert result.success
    client = FlinkClient(settings)
    return {name: client.active(name).jid for name in (iceberg_ingestion.JOB, supplier_stats.JOB)}


def end_offsets(consumer: Consumer) -> dict[int, int]:
    parts = consumer.list_topics("orders", timeout=10).topics["orders"].partitions
    return {p: consumer.get_watermark_offsets(TopicPartition("orders", p), timeout=10)[1] for p in parts}


def produce(settings: StackSettings, count: int, marker: str | None = None) -> float:
    """Serialize ``count`` orders first, then send them as fast as the producer can, so the jobs (not the
    Python serializer) are what the burst measures; returns when sending started."""
    registry = SchemaRegistryClient({"url": settings.schema_registry_url})
    schema = registry.get_latest_version("orders-value").schema.schema_str
    serialize = AvroSerializer(registry, schema, conf={"auto.register.schemas": False})
    ctx = SerializationContext("orders", MessageField.VALUE)
    rng = random.Random()
    now = dt.datetime.now(dt.UTC)
    records = []
    for _ in range(count):
        order_id = marker or f"bench-{uuid.uuid4()}"
        value = {
            "order_id": order_id,
            "supplier": rng.choice(SUPPLIERS),
            "item": "Lamp",
            "price": f"{rng.randint(100, 15000) / 100:.2f}",
            "bid_time": now,
        }
        records.append((order_id, serialize(value, ctx)))
    producer = Producer({"bootstrap.servers": settings.kafka_bootstrap, "linger.ms": 20})
    started = time.perf_counter()
    for i, (key, value) in enumerate(records):
        producer.produce("orders", key=key, value=value)
        if i % 10000 == 0:
            producer.poll(0)
    producer.flush(60)
    return started


def plain_consume_seconds(settings: StackSettings, start: dict[int, int], end: dict[int, int]) -> float:
    consumer = Consumer(
        {
            "bootstrap.servers": settings.kafka_bootstrap,
            "group.id": f"bench-{uuid.uuid4()}",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition("orders", p, o) for p, o in start.items()])
    want = sum(end[p] - start[p] for p in start)
    got = 0
    started = time.perf_counter()
    while got < want:
        got += sum(1 for m in consumer.consume(1000, timeout=5) if not m.error())
    elapsed = time.perf_counter() - started
    consumer.close()
    return elapsed


def wait_until(condition, timeout: float, every: float = 0.25) -> float:
    """The time ``condition()`` first held."""
    return finish_times({"it": condition}, timeout, every)["it"]


def finish_times(conditions: dict, timeout: float, every: float = 0.25) -> dict[str, float]:
    """When each condition first held, all polled together (so one slow job does not delay another's time)."""
    done: dict[str, float] = {}
    deadline = time.perf_counter() + timeout
    while len(done) < len(conditions):
        if time.perf_counter() > deadline:
            raise TimeoutError(f"not done within {timeout:.0f} s: {sorted(set(conditions) - set(done))}; RUNNING?")
        for name, condition in conditions.items():
            if name not in done and condition():
                done[name] = time.perf_counter()
        time.sleep(every)
    return done


def read_by(client: FlinkClient, jid: str, baseline: int, n: int):
    return lambda: client.record_counts(jid)[0] - baseline >= n


def committed_rows(table, baseline: int, n: int):
    return lambda: int(table.refresh().current_snapshot().summary["total-records"]) - baseline >= n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--orders", type=int, default=50000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--markers", type=int, default=5)
    args = ap.parse_args()
    settings = StackSettings.from_env()
    client = FlinkClient(settings)
    jobs = deploy(settings, Path(tempfile.mkdtemp()) / "outbox.sqlite")
    table = build_resources(settings)["iceberg"].catalog().load_table("default.orders")
    probe = Consumer({"bootstrap.servers": settings.kafka_bootstrap, "group.id": "bench-probe"})
    wait_until(lambda: all(client.job(j).state == "RUNNING" for j in jobs.values()), 120)
    time.sleep(20)  # Python workers up and the existing backlog read

    rates: dict[str, list[float]] = {"plain consumer": [], **{name: [] for name in jobs}, "iceberg committed": []}
    for round_no in range(args.rounds):
        before = {name: client.record_counts(jid)[0] for name, jid in jobs.items()}
        rows_before = int(table.refresh().current_snapshot().summary["total-records"])
        start = end_offsets(probe)
        t0 = produce(settings, args.orders)
        end = end_offsets(probe)
        n = sum(end[p] - start[p] for p in start)
        done = finish_times(
            {
                **{name: read_by(client, jid, before[name], n) for name, jid in jobs.items()},
                "iceberg committed": committed_rows(table, rows_before, n),
            },
            900,
        )
        for name, finished in done.items():
            rates[name].append(n / (finished - t0))
        rates["plain consumer"].append(n / plain_consume_seconds(settings, start, end))
        print(f"round {round_no + 1}: " + ", ".join(f"{k} {v[-1]:,.0f}/s" for k, v in rates.items()), flush=True)

    latencies = []
    for _ in range(args.markers):
        marker = f"bench-marker-{uuid.uuid4()}"
        t0 = produce(settings, 1, marker)
        visible = wait_until(
            lambda m=marker: len(table.refresh().scan(row_filter=EqualTo("order_id", m)).to_arrow()) > 0, 300, 0.5
        )
        latencies.append(visible - t0)
    probe.close()

    plain = statistics.median(rates["plain consumer"])
    print(f"\n{args.orders:,} orders x {args.rounds} rounds (medians), orders has {len(start)} partitions")
    for name, values in rates.items():
        median = statistics.median(values)
        print(f"  {name:<18} {median:>10,.0f} orders/s   ratio to plain consume {median / plain:.3f}")
    print(
        f"  ingestion-to-queryable in Iceberg: median {statistics.median(latencies):.1f} s "
        f"(min {min(latencies):.1f}, max {max(latencies):.1f}; checkpoint interval "
        f"{iceberg_ingestion.IcebergIngestionConfig().checkpoint_interval})"
    )


if __name__ == "__main__":
    main()
