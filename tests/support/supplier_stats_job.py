"""The deployed supplier-stats job's figures and its topics read from their end: what the quiet-stream test and
benchmarks/quiet_stream_latency.py both need (its windowing constants read from its script, its arguments from the
running job's parameters, an independent read-committed reader of a topic)."""

from __future__ import annotations

import ast
import itertools
import time
import uuid

from confluent_kafka import Consumer, TopicPartition

from flink_jobs import deployment
from lineage_assets.flink import supplier_stats_stream_asset
from lineage_assets.flink.client import FlinkClient


def script_constants() -> dict[str, int]:
    """The job's windowing constants, read from its script (the driver imports PyFlink, not installed here)."""
    tree = ast.parse(supplier_stats_stream_asset.SPEC.script.read_text())
    return {
        target.id: ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name) and target.id.endswith("_MS")
    }


def job_arguments(settings, jid: str) -> dict[str, str]:
    """The deployed job's program arguments (``--name value``), as it records them in its job parameters."""
    args = deployment.decode_args(FlinkClient(settings).user_config(jid).get(deployment.ARGS, "")) or []
    return {name: value for name, value in itertools.pairwise(args) if name.startswith("--")}


def job_figures(settings, jid: str) -> dict:
    """The script's constants with the job's quiet advance and checkpoint interval, as deployed."""
    args = job_arguments(settings, jid)
    return {
        **script_constants(),
        "jid": jid,
        "QUIET_ADVANCE_MS": int(args["--quiet-advance-ms"]),
        "CHECKPOINT_INTERVAL_MS": int(args["--checkpoint-interval-ms"]),
    }


def counting_bound_ms(figures: dict) -> int:
    """How long after the last order of a quiet stream its window must be committed: the window, the
    out-of-orderness, the quiet advance and one checkpoint (the job's settings)."""
    return (
        figures["WINDOW_MS"]
        + figures["OUT_OF_ORDERNESS_MS"]
        + figures["QUIET_ADVANCE_MS"]
        + figures["CHECKPOINT_INTERVAL_MS"]
    )


class Topic:
    """An independent reader of a topic's committed records from its end at creation on."""

    def __init__(self, settings, topic: str):
        self.consumer = Consumer(
            {
                "bootstrap.servers": settings.kafka_bootstrap,
                "group.id": f"t-{uuid.uuid4()}",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
            }
        )
        partitions = self.consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {p: self.consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions}
        self.consumer.assign([TopicPartition(topic, p, end) for p, end in ends.items()])

    def read(self, want, done, deadline: float) -> list:
        found: list = []
        while not done(found) and time.monotonic() < deadline:
            msg = self.consumer.poll(0.5)
            if msg is not None and not msg.error():
                item = want(msg)
                if item is not None:
                    found.append(item)
        return found

    def close(self) -> None:
        self.consumer.close()
