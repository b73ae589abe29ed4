"""Orders/s through each Flink job, both running together, next to a plain Kafka consume of the same records in
the same round; and the ingestion-to-queryable latency of Iceberg `default.orders`.

Per round: both jobs are stopped with a savepoint, N orders (bid_time = now, as the generator does) are produced
into `orders` as a backlog, a plain confluent-kafka consumer reads that backlog, then both jobs are redeployed
from their savepoints through their Dagster assets and each is timed from the first to the last of the N records
its Kafka source reads (Flink's numRecordsIn, at most 1 s old): the jobs' capacity, not the producer's speed. At
the end single marker orders time the delay from produce to visible in a pyiceberg scan (the jobs running).
Prints medians and ratios. Needs the stack up with the pipeline deployed (`scripts/run.sh`); the stack's
new-orders sensor is paused meanwhile, so that no Spark run shares the cores with the jobs being measured.

    .venv/bin/python benchmarks/flink_throughput.py --orders 1000000 --rounds 3
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import statistics
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
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
from lineage_assets.kafka.topics import end_offsets as kafka_end_offsets
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.resources import LineageResource, build_resources
from lineage_assets.spark.new_orders_pause import new_orders_sensor_paused

SUPPLIERS = ["Alice", "Bob", "Carol", "Alex", "Joe", "James", "Jane", "Jack"]


JOBS = (iceberg_ingestion.JOB, supplier_stats.JOB)
#: the deploying asset of each job, and its config to start from a savepoint
ASSET_OF = {iceberg_ingestion.JOB: "iceberg__default__orders", supplier_stats.JOB: "kafka__supplier_stats"}


def deploy(settings: StackSettings, outbox: Path, savepoints: dict[str, str] | None = None) -> dict[str, str]:
    """Both jobs through their assets (a no-op for a job already running this version), from ``savepoints``."""
    pipeline = Pipeline.from_settings(settings)
    resources = {
        **build_resources(settings),
        "lineage": LineageResource(outbox_path=str(outbox), backend_url=settings.marquez_url),
    }
    assets = [
        iceberg_ingestion.build_iceberg_ingestion_asset(pipeline, settings),
        supplier_stats.build_supplier_stats_stream_asset(pipeline, settings),
    ]
    ops = {ASSET_OF[job]: {"config": {"restore_from": sp}} for job, sp in (savepoints or {}).items()}
    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize(assets, resources=resources, instance=instance, run_config={"ops": ops})
    assert result.success
    client = FlinkClient(settings)
    return {name: client.active(name).jid for name in JOBS}


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
        while True:
            try:
                producer.produce("orders", key=key, value=value)
                break
            except BufferError:  # the local queue is full: let the broker catch up
                producer.poll(0.05)
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


def source_read(client: FlinkClient, name: str) -> int:
    """Records the job's Kafka source has read so far (0 while the job is not running yet)."""
    job = client.active(name)
    if job is None or job.state != "RUNNING":
        return 0
    try:
        return client.record_counts(job.jid)[0]
    except Exception:  # vertices not yet reported
        return 0


def backlog_rate(client: FlinkClient, n: int, timeout: float) -> dict[str, float]:
    """Per job: the records it read between the first and the last poll that saw its count change, over the time
    between those polls (every 50 ms; Flink's metrics are at most 250 ms old, the same lag at both ends)."""
    first: dict[str, tuple[float, int]] = {}
    last: dict[str, tuple[float, int]] = {}
    deadline = time.perf_counter() + timeout
    while len(last) < len(JOBS):
        if time.perf_counter() > deadline:
            raise TimeoutError(f"not done within {timeout:.0f} s: {sorted(set(JOBS) - set(last))}")
        for name in JOBS:
            if name in last:
                continue
            read = source_read(client, name)
            now = time.perf_counter()
            if read > 0 and name not in first:
                first[name] = (now, read)
            if read >= n:
                last[name] = (now, read)
        time.sleep(0.05)
    rates = {}
    for name in JOBS:
        (t0, read0), (t1, read1) = first[name], last[name]
        if read1 - read0 < n // 2:
            raise RuntimeError(f"{name} read {read0:,} of {n:,} before the first look: use more --orders")
        rates[name] = (read1 - read0) / (t1 - t0)
    return rates


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # a backlog that takes each job seconds to read: a redeployed job's first second (its code loaded and compiled
    # anew) weighs on a short one (docs/architecture.md has both)
    ap.add_argument("--orders", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--markers", type=int, default=5)
    args = ap.parse_args()
    settings = StackSettings.from_env()
    if not kafka_end_offsets(settings.kafka_bootstrap, "orders"):
        raise SystemExit(
            f"topic 'orders' does not exist at {settings.kafka_bootstrap}: run scripts/run.sh (or materialize "
            "kafka/orders in Dagster) first; this benchmark deploys only the two Flink jobs"
        )
    # the stack's daemon would run Spark over each round's orders on the same two cores: what is measured here is the
    # Flink jobs, so the new-orders sensor is off until the end (its cursor then past the benchmark's snapshots)
    with new_orders_sensor_paused(settings):
        measure(settings, args)


def measure(settings: StackSettings, args: argparse.Namespace) -> None:
    client = FlinkClient(settings)
    outbox = Path(tempfile.mkdtemp()) / "outbox.sqlite"
    jobs = deploy(settings, outbox)
    table = build_resources(settings)["iceberg"].catalog().load_table("default.orders")
    probe = Consumer({"bootstrap.servers": settings.kafka_bootstrap, "group.id": "bench-probe"})
    wait_until(lambda: all(client.job(j).state == "RUNNING" for j in jobs.values()), 120)

    rates: dict[str, list[float]] = {"plain consumer": [], **{name: [] for name in JOBS}, "producer": []}
    for round_no in range(args.rounds):
        time.sleep(15)  # whatever the jobs still read, read; a checkpoint behind them
        savepoints = {name: client.stop_with_savepoint(client.active(name).jid) for name in JOBS}
        start = end_offsets(probe)
        t0 = produce(settings, args.orders)
        rates["producer"].append(args.orders / (time.perf_counter() - t0))
        end = end_offsets(probe)
        n = sum(end[p] - start[p] for p in start)
        rates["plain consumer"].append(n / plain_consume_seconds(settings, start, end))
        with ThreadPoolExecutor(1) as pool:  # each job is timed from its own first record, while the other deploys
            deployed = pool.submit(deploy, settings, outbox, savepoints)
            for name, rate in backlog_rate(client, n, 900).items():
                rates[name].append(rate)
            deployed.result()
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
    print(f"\n{args.orders:,} orders x {args.rounds} rounds (medians), orders has {len(start)} partitions, both jobs")
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
