"""Watching the dead-letter topics: what arrived since the last look, by reason, and how large a share of the
source topic's new records that is.

The ``dead_letter_sensor`` reads each dead-letter topic from where it stopped (read-committed: the Flink jobs write
theirs in transactions) and, when new dead letters or new source records arrived, records an observation on that
dead-letter asset with the counts by kind of reason and the share of the source topic's records produced
meanwhile. The asset check ``dead_letter_share`` on the source topic fails (severity WARN: the letters are kept)
when a dead-letter topic's latest share passes ``LINEAGE_LAB_DEAD_LETTER_MAX_SHARE``, and passes again once clean
records have flowed since (a share of 0 is observed too), so an alarm ends when the incident does.
"""

import json
import re
import time
from collections import Counter

import dagster as dg
from confluent_kafka import Consumer, TopicPartition

from lineage_assets.kafka.connection import KafkaConnection
from lineage_assets.kafka.resource import KafkaResource
from lineage_assets.kafka.topics import Kafka, KafkaUnavailable, end_offsets
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.metadata import asset_key
from lineage_assets.tunables import PipelineTunables

#: Kafka Connect writes the reason of a dead letter into these headers
CONNECT_ERROR_CLASS = "__connect.errors.exception.class.name"
CONNECT_ERROR_MESSAGE = "__connect.errors.exception.message"
_VALUES = re.compile(r"'[^']*'|\"[^\"]*\"|\b\d[\w.:+-]*")


def reason_kind(reason: str) -> str:
    """A reason without its particulars (values, ids, lengths), so that reasons count together by kind:
    "unparsable price 'abc'" and "unparsable price 'x1'" are one kind."""
    head = re.split(r": | \(", reason.strip(), maxsplit=1)[0]
    return _VALUES.sub("…", head).strip() or "unknown"


def record_reason(value: bytes | None, headers: list[tuple[str, bytes]] | None) -> str:
    """The reason of one dead letter: the ``reason`` field of a Flink job's JSON letter, or Connect's error
    headers."""
    found = dict(headers or [])
    if CONNECT_ERROR_CLASS in found:
        error = found[CONNECT_ERROR_CLASS].decode("utf-8", "replace").rsplit(".", 1)[-1]
        return f"{error}: {found.get(CONNECT_ERROR_MESSAGE, b'').decode('utf-8', 'replace')}"
    try:
        return str(json.loads(value or b"{}").get("reason") or "no reason given")
    except (ValueError, AttributeError):
        return "no reason given (not a JSON letter)"


def read_since(bootstrap: Kafka, topic: str, start: dict[int, int], timeout: float = 20.0) -> tuple[Counter, dict]:
    """Reasons (by kind) of the committed records of ``topic`` after ``start`` (partition -> offset), and where to
    start next time (partition -> offset)."""
    ends = end_offsets(bootstrap, topic)
    position = {p: min(start.get(p, 0), end) for p, end in ends.items()}
    kinds: Counter = Counter()
    if all(position[p] >= end for p, end in ends.items()):
        return kinds, position
    consumer = Consumer(
        KafkaConnection.of(bootstrap).client_config(
            **{
                "group.id": "lineage-lab-dead-letter-observer",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            }
        )
    )
    try:
        consumer.assign([TopicPartition(topic, p, o) for p, o in position.items() if o < ends[p]])
        deadline, quiet = time.monotonic() + timeout, 0
        while time.monotonic() < deadline and quiet < 2:
            batch = [m for m in consumer.consume(500, timeout=0.5) if not m.error()]
            quiet = 0 if batch else quiet + 1
            for msg in batch:
                kinds[reason_kind(record_reason(msg.value(), msg.headers()))] += 1
                position[msg.partition()] = msg.offset() + 1
            # the consumer's position also steps over transaction markers and aborted records
            for tp in consumer.position([TopicPartition(topic, p) for p in position]):
                if tp.offset >= 0:
                    position[tp.partition] = max(position[tp.partition], tp.offset)
            if all(position[p] >= end for p, end in ends.items()):
                break
    finally:
        consumer.close()
    return kinds, position


def build_dead_letter_sensor(
    pipeline: Pipeline, name: str = "dead_letter_sensor", interval_s: int = PipelineTunables.sensor_interval_s
) -> dg.SensorDefinition:
    watched = {job: pipeline.dead_letter_dataset(job) for job in pipeline.dead_letter_jobs()}

    @dg.sensor(
        name=name,
        minimum_interval_seconds=interval_s,
        description="New records of the dead-letter topics, counted by kind of reason, and their share of the source "
        "topic's new records, as observations of the dead-letter assets.",
        default_status=dg.DefaultSensorStatus.RUNNING,
    )
    def dead_letter_sensor(context: dg.SensorEvaluationContext, kafka: KafkaResource):
        try:
            return _look(context, kafka)
        except KafkaUnavailable as exc:  # nothing read, nothing recorded: the next tick starts from the same place
            return dg.SkipReason(str(exc))

    def _look(context: dg.SensorEvaluationContext, kafka: KafkaResource):
        cursor = json.loads(context.cursor) if context.cursor else {}
        observations = []
        for job, ds in watched.items():
            (source_key,) = pipeline.job(job).inputs
            source = pipeline.dataset(source_key).name
            seen = cursor.get(job)
            source_now = sum(end_offsets(kafka.connection(), source).values())
            if seen is None:  # first look: count from here on
                _, start = read_since(kafka.connection(), ds.name, {})
                cursor[job] = {"offsets": {str(p): o for p, o in start.items()}, "source": source_now}
                continue
            start = {int(p): o for p, o in seen["offsets"].items()}
            kinds, nxt = read_since(kafka.connection(), ds.name, start)
            cursor[job] = {"offsets": {str(p): o for p, o in nxt.items()}, "source": source_now}
            new = sum(kinds.values())
            source_new = max(source_now - seen["source"], 0)
            if not new and not source_new:
                continue
            observations.append(
                dg.AssetObservation(
                    asset_key=asset_key(ds),
                    metadata={
                        "new_dead_letters": new,
                        "by_reason": dg.MetadataValue.json(dict(kinds.most_common())),
                        "source_records": source_new,
                        "dead_letter_share": round(new / source_new, 6) if source_new else 1.0,
                        "source_topic": source,
                    },
                )
            )
        if not observations:
            return dg.SensorResult(skip_reason="no new dead letters or source records", cursor=json.dumps(cursor))
        return dg.SensorResult(asset_events=observations, cursor=json.dumps(cursor))

    return dead_letter_sensor


def build_dead_letter_share_check(pipeline: Pipeline, max_share: float) -> dg.AssetChecksDefinition:
    """On the source topic: every dead-letter topic fed from it stays under ``max_share`` of its new records."""
    source = pipeline.dataset("kafka_orders")
    fed = [job for job in pipeline.dead_letter_jobs() if source.key in pipeline.job(job).inputs]
    letters = [pipeline.dead_letter_dataset(job) for job in fed]
    limit = max_share

    @dg.asset_check(
        asset=asset_key(source),
        name="dead_letter_share",
        description=f"No dead-letter topic fed from `{source.name}` got more than {limit:.1%} of its new records "
        "(the dead_letter_sensor's latest observations; LINEAGE_LAB_DEAD_LETTER_MAX_SHARE)",
    )
    def dead_letter_share(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        shares, over = {}, {}
        for ds in letters:
            records = context.instance.fetch_observations(asset_key(ds), limit=1).records
            meta = records[0].asset_observation.metadata if records and records[0].asset_observation else {}
            if "dead_letter_share" not in meta:
                continue
            share = float(meta["dead_letter_share"].value)
            shares[ds.name] = share
            if share > limit:
                over[ds.name] = {"share": share, "by_reason": meta["by_reason"].value}
        passed = not over
        message = (
            f"{len(shares)} dead-letter topic(s) observed, all under {limit:.1%}"
            if passed
            else f"dead letters above {limit:.1%} of {source.name}'s new records: "
            + "; ".join(f"{t} {v['share']:.1%} ({v['by_reason']})" for t, v in over.items())
            + ". Look at the reasons: bad producers upstream, or a job rejecting good records"
        )
        return dg.AssetCheckResult(
            passed=passed,
            # a data-quality alarm, not a broken pipeline: the records are kept in the dead-letter topic
            severity=dg.AssetCheckSeverity.WARN,
            description=message,
            metadata={"shares": dg.MetadataValue.json(shares), "limit": limit},
        )

    return dead_letter_share
