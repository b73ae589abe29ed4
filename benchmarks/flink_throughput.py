"""What each Flink job delivers per second, both running together, next to a plain Kafka consume of the same records
in the same round; and the ingestion-to-queryable latency of Iceberg `default.orders`.

Per round: both jobs are stopped with a savepoint, N orders are produced into `orders` as a backlog, a plain
confluent-kafka consumer reads that backlog (records/s), then both jobs are redeployed from their savepoints through
their Dagster assets and read it. Measured for each job, next to the plain consume:

- iceberg-ingestion: rows committed to Iceberg per second, from the table's snapshots (summary `added-records`,
  `timestamp-ms`): the rows of the commits after the first, up to the last full one, over the time between the first
  and that commit (the first and the last commit of a backlog hold part of a checkpoint interval only);
- supplier-stats: orders in its emitted windows per second, from its output topic `supplier-stats`: the backlog's
  bid_times span --span-s seconds of event time, so its 5 s windows close one after another while the job reads;
  the counts of the windows after the first, over the time between the first and the last window's output record
  (Kafka CreateTime, set when the window fires); windows the backlog's end closes by processing time are left out;
- both: the records their Kafka source read per second (Flink's numRecordsIn, first to last change), for reference.

The backlog's bid_times lie in the --span-s seconds before the round (an order newer than that, produced by
someone else meanwhile, can make a few of them late for supplier-stats: the benchmark prints how many of its orders
the windows counted). At the end single marker orders time the delay from produce to visible in a pyiceberg scan.
Failures (metric reads, scans) are counted and printed, never swallowed silently. Prints per-round figures, medians
and ratios. Needs the stack up with the pipeline deployed (`scripts/run.sh`); the stack's new-orders sensor is paused
meanwhile, so that no Spark run shares the cores with the jobs being measured. `--sensors off` stops the monitoring
sensors too, to set what watching costs against the same rounds with them on (the default).

    .venv/bin/python benchmarks/flink_throughput.py --orders 3000000 --rounds 3 [--sensors off]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import datetime as dt
import json
import random
import statistics
import struct
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import dagster as dg
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pyiceberg.expressions import EqualTo

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repo root, for tests.support

from infra.settings import StackSettings
from lineage_assets.flink import iceberg_ingestion_asset, supplier_stats_stream_asset
from lineage_assets.flink.client import FlinkClient
from lineage_assets.kafka.topics import end_offsets as kafka_end_offsets
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.lineage.resource import LineageResource
from lineage_assets.resources import build_resources, opened_resources
from lineage_assets.tunables import PipelineTunables
from tests.support.new_orders_pause import new_orders_sensor_paused
from tests.support.stack_dagster import start_sensor, stop_sensor

SUPPLIERS = ["Alice", "Bob", "Carol", "Alex", "Joe", "James", "Jane", "Jack"]
WINDOW_MS = 5_000  # flink_jobs/supplier_stats_job.py
OUT_OF_ORDERNESS_MS = 5_000
STATS_TOPIC = "supplier-stats"

JOBS = (iceberg_ingestion_asset.JOB, supplier_stats_stream_asset.JOB)
#: the deploying asset of each job, and its config to start from a savepoint
ASSET_OF = {
    iceberg_ingestion_asset.JOB: "iceberg__default__orders",
    supplier_stats_stream_asset.JOB: "kafka__supplier_stats",
}

#: failures met while measuring, by kind (printed at the end)
FAILURES: collections.Counter[str] = collections.Counter()


def failed(kind: str, exc: BaseException) -> None:
    if FAILURES[kind] == 0:
        print(f"  (failure, {kind}: {type(exc).__name__}: {str(exc)[:200]})", flush=True)
    FAILURES[kind] += 1


def deploy(settings: StackSettings, outbox: Path, savepoints: dict[str, str] | None = None) -> dict[str, str]:
    """Both jobs through their assets (a no-op for a job already running this version), from ``savepoints``."""
    pipeline = Pipeline.from_settings(settings)
    resources = {
        **build_resources(settings),
        "lineage": LineageResource(outbox_path=str(outbox), backend_url=settings.marquez_url),
    }
    assets = [
        iceberg_ingestion_asset.build_iceberg_ingestion_asset(pipeline, PipelineTunables.from_settings(settings)),
        supplier_stats_stream_asset.build_supplier_stats_stream_asset(
            pipeline, PipelineTunables.from_settings(settings)
        ),
    ]
    ops = {ASSET_OF[job]: {"config": {"restore_from": sp}} for job, sp in (savepoints or {}).items()}
    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize(assets, resources=resources, instance=instance, run_config={"ops": ops})
    assert result.success
    client = FlinkClient(settings)
    return {name: client.active(name).jid for name in JOBS}


def end_offsets(consumer: Consumer, topic: str = "orders") -> dict[int, int]:
    parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
    return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in parts}


def _zigzag(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n & ~0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _avro_string(s: str) -> bytes:
    b = s.encode()
    return _zigzag(len(b)) + b


class OrderEncoder:
    """Confluent-wire Avro of the registered `orders-value` schema (supplier, item, price, bid_time, order_id,
    currency), encoded directly so that millions of orders take seconds, not minutes; checked against the registry
    serializer's bytes before use."""

    FIELDS = ("supplier", "item", "price", "bid_time", "order_id", "currency")

    def __init__(self, settings: StackSettings) -> None:
        registry = SchemaRegistryClient({"url": settings.schema_registry_url})
        latest = registry.get_latest_version("orders-value")
        fields = tuple(f["name"] for f in json.loads(latest.schema.schema_str)["fields"])
        if fields not in (self.FIELDS, self.FIELDS[:-1]):  # currency: once the source team added it
            raise SystemExit(f"orders-value has fields {fields}, this benchmark encodes {self.FIELDS}")
        self.tail = b"\0" if fields == self.FIELDS else b""  # currency null (union index 0), when the schema has it
        self.fields = fields
        self.header = b"\x00" + struct.pack(">I", latest.schema_id)
        self.reference = AvroSerializer(registry, latest.schema.schema_str, conf={"auto.register.schemas": False})
        self.suppliers = [_avro_string(s) for s in SUPPLIERS]
        self.item = _avro_string("Lamp")

    def encode(self, order_id: str, supplier: int, cents: int, bid_ms: int) -> bytes:
        price = _avro_string(f"{cents // 100}.{cents % 100:02d}")
        return b"".join(
            (
                self.header,
                self.suppliers[supplier],
                self.item,
                price,
                _zigzag(bid_ms),
                _avro_string(order_id),
                self.tail,
            )
        )

    def check(self) -> None:
        value = {
            "supplier": SUPPLIERS[3],
            "item": "Lamp",
            "price": "12.05",
            "bid_time": dt.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=dt.UTC),
            "order_id": "bench-check",
        }
        if "currency" in self.fields:
            value["currency"] = None
        want = self.reference(value, SerializationContext("orders", MessageField.VALUE))
        got = self.encode("bench-check", 3, 1205, int(value["bid_time"].timestamp() * 1000))
        if got != want:
            raise SystemExit(f"the benchmark's Avro encoding differs from the registry serializer's: {got!r} {want!r}")


def produce(settings: StackSettings, encoder: OrderEncoder, count: int, span_s: float) -> tuple[float, int, int]:
    """``count`` orders, random suppliers and prices, sent at an even pace over at least ``span_s`` seconds with
    bid_time = the moment each is encoded (as the generator does), so a job reading them closes window after window
    while it reads, and no order is ever later than one someone else sends meanwhile. Returns (seconds, first and
    last bid_time in ms)."""
    producer = Producer(
        {
            "bootstrap.servers": settings.kafka_bootstrap,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    rng = random.Random()
    prefix = f"bench-{uuid.uuid4().hex[:12]}-"
    errors: list = []
    report = _on_delivery(errors)
    chunk = 5_000
    started = time.perf_counter()
    first_bid = last_bid = int(time.time() * 1000)
    for done in range(0, count, chunk):
        ahead = started + span_s * done / count - time.perf_counter()
        if ahead > 0:
            time.sleep(ahead)
        last_bid = int(time.time() * 1000)
        for i in range(done, min(done + chunk, count)):
            key = f"{prefix}{i}"
            value = encoder.encode(key, rng.randrange(8), rng.randint(100, 15000), last_bid)
            while True:
                try:
                    producer.produce("orders", key=key.encode(), value=value, on_delivery=report)
                    break
                except BufferError:  # the local queue is full: let the broker catch up
                    producer.poll(0.05)
        producer.poll(0)
    left = producer.flush(120)
    if left or errors:
        raise RuntimeError(f"{left} orders not delivered, {len(errors)} delivery errors: {errors[:1]}")
    return time.perf_counter() - started, first_bid, last_bid


def _on_delivery(errors: list):
    def report(err, _msg) -> None:
        if err is not None:
            errors.append(err)

    return report


def plain_consume_rate(settings: StackSettings, start: dict[int, int], end: dict[int, int]) -> float:
    """Records/s of a plain confluent-kafka consumer reading [start, end) of every partition (values as bytes)."""
    consumer = Consumer(
        {
            "bootstrap.servers": settings.kafka_bootstrap,
            "group.id": f"bench-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",  # as both jobs read
        }
    )
    consumer.assign([TopicPartition("orders", p, o) for p, o in start.items()])
    want = sum(end[p] - start[p] for p in start)
    got = 0
    started = time.perf_counter()
    while got < want:
        for m in consumer.consume(1000, timeout=5):
            if m.error():
                failed("plain consume", RuntimeError(str(m.error())))
            else:
                got += 1
    elapsed = time.perf_counter() - started
    consumer.close()
    return want / elapsed


def wait_until(condition, timeout: float, every: float = 0.25, kind: str = "poll") -> float:
    """The time ``condition()`` first held (an exception in it counts as a failure of ``kind``, and not yet)."""
    deadline = time.perf_counter() + timeout
    while True:
        try:
            if condition():
                return time.perf_counter()
        except Exception as exc:  # counted, and polled again
            failed(kind, exc)
        if time.perf_counter() > deadline:
            raise TimeoutError(f"not done within {timeout:.0f} s ({kind})")
        time.sleep(every)


def source_read(client: FlinkClient, name: str) -> int:
    """Records the job's Kafka source has read so far (0 while the job is not running yet)."""
    job = client.active(name)
    if job is None or job.state != "RUNNING":
        return 0
    try:
        return client.record_counts(job.jid)[0]
    except Exception as exc:  # e.g. vertices not yet reported: counted, read as 0
        failed(f"{name} source metrics", exc)
        return 0


def source_rates(client: FlinkClient, n: int, timeout: float) -> dict[str, float]:
    """Per job: the records its source read between the first and the last poll that saw its count change, over the
    time between those polls (every 50 ms; Flink's metrics are at most 250 ms old, the same lag at both ends)."""
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


def commits_after(table, snapshot_id: int | None) -> list[tuple[int, int]]:
    """(timestamp-ms, added-records) of the appends committed after ``snapshot_id``, oldest first."""
    table = table.refresh()
    snaps = table.snapshots()
    ids = [s.snapshot_id for s in snaps]
    later = snaps[ids.index(snapshot_id) + 1 :] if snapshot_id in ids else snaps
    return [
        (s.timestamp_ms, int(s.summary.additional_properties.get("added-records", 0)))
        for s in sorted(later, key=lambda s: s.timestamp_ms)
    ]


def committed_rate(commits: list[tuple[int, int]]) -> float:
    """Rows/s of the commits after the first non-empty one up to the last full one (the last holds a backlog's tail,
    the first the part of an interval after the job started): needs three non-empty commits."""
    rows = [(ts, n) for ts, n in commits if n > 0]
    if len(rows) < 3:
        raise RuntimeError(f"{len(rows)} non-empty commits: too few for a rate (use more --orders)")
    inner = rows[1:-1]
    return sum(n for _, n in inner) / ((inner[-1][0] - rows[0][0]) / 1000)


def windows_after(settings: StackSettings, start: dict[int, int], first_bid_ms: int, last_bid_ms: int):
    """Reads supplier-stats' output from ``start`` until the windows the backlog's own bid_times close are all out
    (up to 180 s): ({window end ms: [orders counted, latest CreateTime ms of its records]}, first end, last end).
    Left out: the window of the first bid_time (it holds orders from before the backlog too) and those the backlog's
    end leaves open (closed later by processing time)."""
    registry = SchemaRegistryClient({"url": settings.schema_registry_url})
    decode = AvroDeserializer(registry)
    ctx = SerializationContext(STATS_TOPIC, MessageField.VALUE)
    consumer = Consumer(
        {
            "bootstrap.servers": settings.kafka_bootstrap,
            "group.id": f"bench-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    consumer.assign([TopicPartition(STATS_TOPIC, p, o) for p, o in start.items()])
    first_end = (first_bid_ms // WINDOW_MS + 1) * WINDOW_MS
    last_end = ((last_bid_ms - OUT_OF_ORDERNESS_MS) // WINDOW_MS) * WINDOW_MS
    windows: dict[int, list[int]] = {}
    last_suppliers: set[str] = set()
    deadline = time.perf_counter() + 180
    while len(last_suppliers) < len(SUPPLIERS):
        if time.perf_counter() > deadline:
            raise TimeoutError(f"window ending {last_end} not out for every supplier within 180 s")
        for m in consumer.consume(1000, timeout=1):
            if m.error():
                failed("supplier-stats read", RuntimeError(str(m.error())))
                continue
            try:
                row = decode(m.value(), ctx)
                end = int(dt.datetime.fromisoformat(row["window_end"].replace("Z", "+00:00")).timestamp() * 1000)
            except Exception as exc:  # counted
                failed("supplier-stats decode", exc)
                continue
            if first_end < end <= last_end:
                counted, at = windows.get(end, [0, 0])
                windows[end] = [counted + row["count"], max(at, m.timestamp()[1])]
                if end == last_end and row["supplier"] in SUPPLIERS:
                    last_suppliers.add(row["supplier"])
    consumer.close()
    return windows, first_end, last_end


def window_rate(windows: dict[int, list[int]]) -> float:
    """Orders/s in the windows after the first, over the time from the first window's output to the last one's."""
    ends = sorted(windows)
    if len(ends) < 3:
        raise RuntimeError(f"{len(ends)} windows closed by the backlog: too few for a rate (use more --span-s)")
    counted = sum(windows[e][0] for e in ends[1:])
    return counted / ((windows[ends[-1]][1] - windows[ends[0]][1]) / 1000)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # a backlog that takes ingestion several checkpoint intervals: its rate comes from the commits in between
    ap.add_argument("--orders", type=int, default=3_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--span-s", type=float, default=30, help="least seconds the backlog is produced over (its bid_times)"
    )
    ap.add_argument("--markers", type=int, default=5)
    ap.add_argument(
        "--sensors",
        choices=("on", "off"),
        default="on",
        help="off: the monitoring sensors (Flink jobs, connectors, dead letters) are stopped while the rounds run, "
        "to compare with what watching costs",
    )
    args = ap.parse_args()
    settings = StackSettings.from_env()
    if not kafka_end_offsets(settings.kafka_bootstrap, "orders"):
        raise SystemExit(
            f"topic 'orders' does not exist at {settings.kafka_bootstrap}: run scripts/run.sh (or materialize "
            "kafka/orders in Dagster) first; this benchmark deploys only the two Flink jobs"
        )
    # the stack's daemon would run Spark over each round's orders on the same two cores: what is measured here is the
    # Flink jobs, so the new-orders sensor is off until the end (its cursor then past the benchmark's snapshots)
    watching = monitoring_stopped(settings) if args.sensors == "off" else contextlib.nullcontext()
    with new_orders_sensor_paused(settings), watching:
        measure(settings, args)


#: the sensors that watch the streaming side (the new-orders sensor is paused for every run of this benchmark)
MONITORING_SENSORS = ("flink_job_sensor", "connector_sensor", "dead_letter_sensor")


@contextlib.contextmanager
def monitoring_stopped(settings: StackSettings) -> Iterator[None]:
    """The monitoring sensors off inside the block (no tick, so no check run either), on again after it: the
    new-orders sensor's pause needs the Flink job sensor to report the last snapshot."""
    for name in MONITORING_SENSORS:
        stop_sensor(settings, name)
    print(f"  sensors stopped: {', '.join(MONITORING_SENSORS)}", flush=True)
    try:
        yield
    finally:
        for name in MONITORING_SENSORS:
            start_sensor(settings, name)


def measure(settings: StackSettings, args: argparse.Namespace) -> None:
    client = FlinkClient(settings)
    outbox = Path(tempfile.mkdtemp()) / "outbox.sqlite"
    jobs = deploy(settings, outbox)
    table = opened_resources(settings, ["iceberg"]).iceberg.catalog().load_table("default.orders")
    probe = Consumer({"bootstrap.servers": settings.kafka_bootstrap, "group.id": "bench-probe"})
    encoder = OrderEncoder(settings)
    encoder.check()
    wait_until(lambda: all(client.job(j).state == "RUNNING" for j in jobs.values()), 120)

    columns = ("plain consume", "ingestion source", "stats source", "ingestion committed", "stats windows")
    rates: dict[str, list[float]] = {c: [] for c in columns}
    counted_share: list[float] = []
    for round_no in range(args.rounds):
        time.sleep(15)  # whatever the jobs still read, read; a checkpoint behind them
        savepoints = {name: client.stop_with_savepoint(client.active(name).jid) for name in JOBS}
        before = table.refresh().current_snapshot()
        stats_start = end_offsets(probe, STATS_TOPIC)
        start = end_offsets(probe)
        produce_s, first_bid, last_bid = produce(settings, encoder, args.orders, args.span_s)
        end = end_offsets(probe)
        n = sum(end[p] - start[p] for p in start)
        rates["plain consume"].append(plain_consume_rate(settings, start, end))
        with ThreadPoolExecutor(1) as pool:  # each job is timed from its own first record, while the other deploys
            deployed = pool.submit(deploy, settings, outbox, savepoints)
            source = source_rates(client, n, 900)
            rates["ingestion source"].append(source[iceberg_ingestion_asset.JOB])
            rates["stats source"].append(source[supplier_stats_stream_asset.JOB])
            deployed.result()
        since = before and before.snapshot_id
        wait_until(
            lambda since=since, n=n: sum(r for _, r in commits_after(table, since)) >= n,
            120,
            0.5,
            "iceberg snapshots",
        )
        try:
            rates["ingestion committed"].append(committed_rate(commits_after(table, since)))
        except RuntimeError as exc:  # the backlog fit in too few commits: the round measures nothing, it is dropped
            failed("round dropped", exc)
            for column in ("plain consume", "ingestion source", "stats source"):
                rates[column].pop()
            continue
        windows, first_end, last_end = windows_after(settings, stats_start, first_bid, last_bid)
        rates["stats windows"].append(window_rate(windows))
        expected = n * (last_end - first_end) / (last_bid - first_bid)
        counted_share.append(sum(c for c, _ in windows.values()) / expected)
        print(
            f"round {round_no + 1}: {n:,} orders produced in {produce_s:.1f} s; "
            + ", ".join(f"{k} {v[-1]:,.0f}/s" for k, v in rates.items())
            + f"; windows counted {counted_share[-1]:.1%} of the backlog's orders in them",
            flush=True,
        )

    latencies = []
    for _ in range(args.markers):
        marker = f"bench-marker-{uuid.uuid4()}"
        t0 = time.perf_counter()
        producer = Producer({"bootstrap.servers": settings.kafka_bootstrap})
        producer.produce("orders", key=marker.encode(), value=encoder.encode(marker, 0, 100, int(time.time() * 1000)))
        if producer.flush(30):
            raise RuntimeError("a marker order was not delivered")
        visible = wait_until(
            lambda m=marker: len(table.refresh().scan(row_filter=EqualTo("order_id", m)).to_arrow()) > 0,
            300,
            0.5,
            "marker scan",
        )
        latencies.append(visible - t0)
    probe.close()

    med = {k: statistics.median(v) for k, v in rates.items()}
    plain = med["plain consume"]
    print(
        f"\n{args.orders:,} orders x {len(rates['plain consume'])} rounds measured (of {args.rounds}), bid_times over "
        f"{args.span_s} s, orders has {len(start)} "
        "partitions, both jobs running (medians; 'vs plain': median over the median plain consume; 'per round': "
        "median of each round's ratio to its own plain consume)"
    )
    print(f"  {'reader / measure':<48} {'per second':>12} {'vs plain':>9} {'per round':>10}   rounds")
    labels = {
        "plain consume": "plain consume (confluent-kafka), records",
        "ingestion committed": "iceberg-ingestion: rows committed to Iceberg",
        "stats windows": "supplier-stats: orders in emitted windows",
        "ingestion source": "iceberg-ingestion: source reads (numRecordsIn)",
        "stats source": "supplier-stats: source reads (numRecordsIn)",
    }
    for key, label in labels.items():
        rounds = " / ".join(f"{v:,.0f}" for v in rates[key])
        # each round's figure over the same round's plain consume (the load of the shared machine moves both)
        paired = statistics.median(v / p for v, p in zip(rates[key], rates["plain consume"], strict=True))
        print(f"  {label:<48} {med[key]:>12,.0f} {med[key] / plain:>8.3f}x {paired:>9.3f}x   {rounds}")
    print(f"  supplier-stats windows counted {statistics.median(counted_share):.1%} of the orders in them (median)")
    print(
        f"  ingestion-to-queryable in Iceberg: median {statistics.median(latencies):.1f} s "
        f"(min {min(latencies):.1f}, max {max(latencies):.1f}; checkpoint interval "
        f"{iceberg_ingestion_asset.IcebergIngestionConfig().checkpoint_interval})"
    )
    print(f"  failures: {dict(FAILURES) if FAILURES else 'none'}")


if __name__ == "__main__":
    main()
