"""How soon supplier-stats counts the orders of a quiet stream, against the bound its settings give.

Each round produces N orders for a new supplier (bid_times after everything in `orders`, keyed by order id like the
source connector), then silence; the figure is the time from the producer's flush to the last of them counted in a
committed window record (a read-committed consumer of its own), set against the bound the running job's settings
give: window + out-of-orderness + quiet advance + one checkpoint (its script's constants and its arguments).
test_supplier_stats_quiet_stream waits for the same counting without a bound (issue 38: latency is a benchmark's
figure, not a test's assertion).

Needs the stack up and the main job run (`scripts/run.sh`). Prints every round, the median and median / bound.

    .venv/bin/python benchmarks/quiet_stream_latency.py --rounds 5 --orders 30
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import sys
import time
import uuid
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repo root, for tests.support

from infra.settings import StackSettings
from lineage_assets.connect.assets import ORDERS_TOPIC
from lineage_assets.flink import supplier_stats_stream_asset
from lineage_assets.lineage.identity import Pipeline
from tests.service.lineage_assets.conftest import after_everything_in_orders
from tests.support.engine_waits import running_flink_job
from tests.support.supplier_stats_job import Topic, counting_bound_ms, job_figures

#: a round that has not counted every order by then failed (reported, never timed)
ROUND_DEADLINE_S = 600


def one_round(settings: StackSettings, orders: int) -> float | None:
    """Seconds from the flush to the last order counted, None when not every order was counted in time."""
    registry = SchemaRegistryClient({"url": settings.schema_registry_url})
    serialize = AvroSerializer(
        registry, registry.get_latest_version("orders-value").schema.schema_str, conf={"auto.register.schemas": False}
    )
    output = Pipeline.from_settings(settings).dataset("kafka_supplier_stats").name
    deserialize, stats_ctx = AvroDeserializer(registry), SerializationContext(output, MessageField.VALUE)
    orders_ctx = SerializationContext(ORDERS_TOPIC.name, MessageField.VALUE)
    supplier = f"Bench-{uuid.uuid4().hex[:10]}"
    stats = Topic(settings, output)
    producer = Producer({"bootstrap.servers": settings.kafka_bootstrap, "linger.ms": 5})
    start = after_everything_in_orders(settings)
    for n in range(orders):
        order = {
            "order_id": f"bench-{supplier}-{n}",
            "supplier": supplier,
            "item": "Lamp",
            "price": f"{n + 1}.25",
            "bid_time": start + dt.timedelta(milliseconds=150 * n),
        }
        producer.produce(ORDERS_TOPIC.name, key=order["order_id"], value=serialize(order, orders_ctx))
    assert producer.flush(30) == 0
    flushed = time.monotonic()

    def window(msg):
        value = deserialize(msg.value(), stats_ctx)
        return (value["window_start"], value["count"]) if value["supplier"] == supplier else None

    def counted(found: list) -> int:  # a window fires again for an order within the allowed lateness: last counts
        return sum(dict(found).values())

    found = stats.read(window, lambda seen: counted(seen) >= orders, flushed + ROUND_DEADLINE_S)
    done = time.monotonic()
    stats.close()
    return done - flushed if counted(found) == orders else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--orders", type=int, default=30)
    args = parser.parse_args()
    settings = StackSettings.from_env()
    figures = job_figures(settings, running_flink_job(settings, supplier_stats_stream_asset.JOB))
    bound_s = counting_bound_ms(figures) / 1000
    print(
        f"supplier-stats {figures['jid']}: window {figures['WINDOW_MS']} ms, out-of-orderness "
        f"{figures['OUT_OF_ORDERNESS_MS']} ms, quiet advance {figures['QUIET_ADVANCE_MS']} ms, checkpoint "
        f"{figures['CHECKPOINT_INTERVAL_MS']} ms: bound {bound_s:.1f} s"
    )
    seconds, failed = [], 0
    for r in range(args.rounds):
        took = one_round(settings, args.orders)
        if took is None:
            failed += 1
            print(f"round {r + 1}: not every order counted within {ROUND_DEADLINE_S} s")
            continue
        seconds.append(took)
        print(f"round {r + 1}: {args.orders} orders counted {took:.1f} s after the flush")
    if seconds:
        median = statistics.median(seconds)
        print(
            f"median {median:.1f} s (min {min(seconds):.1f}, max {max(seconds):.1f}) over {len(seconds)} rounds; "
            f"median / bound {median / bound_s:.2f}x; failed rounds {failed}"
        )
    else:
        print(f"no round counted every order; failed rounds {failed}")


if __name__ == "__main__":
    main()
