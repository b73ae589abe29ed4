"""The connector sensor: watches Kafka Connect, the topics and the archive, reports asset observations, and keeps
each connector's OpenLineage run in step with what Connect runs now, whoever created the connector: its state, its
incarnation (a connector deleted and created again is a new one, see incarnations.py), its tasks, and its lineage as
its live configuration says (connector_lineage.py), read each tick. Any other run Marquez holds open for the
connector's job is closed, so one job name never has two open runs."""

import datetime as dt
import json
import time
from dataclasses import replace

import dagster as dg
from botocore.exceptions import BotoCoreError, ClientError

from lineage_assets.connect import connector_lineage
from lineage_assets.connect.assets import DLQ_TOPIC, ORDERS_TOPIC, SINK_CONNECTOR, SOURCE_CONNECTOR
from lineage_assets.connect.client import ConnectError
from lineage_assets.connect.incarnations import Incarnation, incarnations
from lineage_assets.connect.resource import ConnectResource
from lineage_assets.connect.runs import ENGINE, Track, connector_facets, reported_account, run_id_of, step
from lineage_assets.freshness import CAUGHT_UP, NEW_DATA, REASON, caught_up_materialization_due
from lineage_assets.kafka.observed import observed_event_builder
from lineage_assets.kafka.resource import KafkaResource
from lineage_assets.kafka.topics import KafkaUnavailable, consumer_lag, end_offsets
from lineage_assets.latest_checks import LatestChecks
from lineage_assets.lineage.account import Account, Unknown
from lineage_assets.lineage.events import RunState, run_id_for
from lineage_assets.lineage.identity import Pipeline, sink_group
from lineage_assets.lineage.marquez_client import MarquezError
from lineage_assets.lineage.open_runs import open_runs, run_closed
from lineage_assets.lineage.resource import LineageResource
from lineage_assets.metadata import asset_key
from lineage_assets.source.resource import SourceDatabaseResource
from lineage_assets.storage import ObjectStoreResource
from lineage_assets.tunables import PipelineTunables

#: cursor entry holding how many archive objects the last tick saw
ARCHIVE_CURSOR = "_archive_objects"
#: per partition folder, the last object key listed, and the objects and bytes found so far
ARCHIVE_LISTING = "_archive_listing"
# connector name -> its OpenLineage job (identity module); the pipeline's connectors carry their job's name
CONNECTORS = {SOURCE_CONNECTOR: SOURCE_CONNECTOR, SINK_CONNECTOR: SINK_CONNECTOR}


def build_connector_sensor(
    pipeline: Pipeline,
    archive_prefix: str = "topics/orders/",
    connectors: dict[str, str] | None = None,
    name: str = "connector_sensor",
    fresh_minutes: int = PipelineTunables.streaming_fresh_minutes,
    latest_checks: LatestChecks | None = None,
    interval_s: int = PipelineTunables.sensor_interval_s,
) -> dg.SensorDefinition:
    """``fresh_minutes``: the streaming outputs' freshness window (a caught-up connector's archive is materialized
    every quarter of it); ``latest_checks``: the run of the archive's checks, asked for by the tick that materializes
    it; ``interval_s``: seconds between two ticks."""
    watched = connectors or CONNECTORS
    topic_key = asset_key(pipeline.dataset("kafka_orders"))
    archive_key = asset_key(pipeline.dataset("archive_orders"))

    @dg.sensor(
        name=name,
        minimum_interval_seconds=interval_s,
        description="Connect connector/task states, topic offsets, archive objects and dead letters as asset "
        "observations; OpenLineage START/RUNNING/FAIL/ABORT for orders-source and orders-s3-sink.",
        default_status=dg.DefaultSensorStatus.RUNNING,
        job_name=latest_checks.job_name if latest_checks else None,
    )
    def connector_sensor(
        context: dg.SensorEvaluationContext,
        connect: ConnectResource,
        kafka: KafkaResource,
        object_store: ObjectStoreResource,
        lineage: LineageResource,
        source_db: SourceDatabaseResource,
    ) -> dg.SensorResult | dg.SkipReason:
        client = connect.client()
        try:
            statuses = {connector: client.status(connector) for connector in watched}
        except ConnectError as exc:
            return dg.SkipReason(str(exc))
        builder, registered = observed_event_builder(pipeline, kafka.registry())
        schema_version = registered.label if registered else None
        cursor = json.loads(context.cursor) if context.cursor else {}
        now = dt.datetime.now(dt.UTC)
        emitter = lineage.emitter()
        try:
            created: dict[str, Incarnation] = incarnations(kafka.connection(), connect.config_topic)
        except KafkaUnavailable as exc:
            context.log.warning(f"connector incarnations unknown this tick ({connect.config_topic}): {exc}")
            created = {}
        # listed (read) only for a connector that subscribes by regex (captures tables by regex)
        topics = connector_lineage.cluster_topics(kafka.connection())
        publication_tables = connector_lineage.source_publication_tables(source_db)
        accounts: dict[str, Account | Unknown] = {}
        configs: dict[str, dict[str, str] | None] = {}  # each connector's config as Connect holds it now
        for connector, status in statuses.items():
            job = pipeline.job(watched[connector])
            incarnation = created.get(connector)
            before = Track.load(cursor.get(connector))
            try:
                configs[connector] = client.config(connector)  # None: Connect has no such connector
                account = connector_lineage.connector_account(
                    pipeline,
                    job.name,
                    configs[connector],
                    bootstrap=kafka.bootstrap_servers,
                    list_topics=topics,
                    reader=connector_lineage.connector_reader(client.url, connector),
                    publication_tables=publication_tables,
                )
            except ConnectError as exc:  # its state was read: the tick goes on, with the last account read
                account = Unknown(job.name, f"reading {connector}'s config from Kafka Connect {client.url}: {exc}")
            if isinstance(account, Account) and incarnation is not None:
                # each config record is a version of the connector (see Account.location)
                config = incarnation.config_ref or incarnation.ref
                account = replace(account, location=f"{client.url}/connectors/{connector}/config#{config}")
            accounts[connector] = account
            carried = reported_account(pipeline, job.name, account, before.account)
            if isinstance(account, Unknown):
                context.log.warning(
                    f"{connector}: lineage unknown this tick ({account.reason}); events carry "
                    f"{'the last account read' if before.account else 'the declaration'}"
                )

            def new_run_id(job=job, incarnation=incarnation) -> str:
                if incarnation is None:  # the config topic cannot be read: a run of this sensor's own
                    return run_id_for(job.name, now, f"{job.name}@{now.isoformat()}")
                return run_id_of(job, incarnation, lambda candidate: run_closed(candidate, lineage))

            track, events = step(
                job.name, before, status, schema_version, builder, now, incarnation, new_run_id, account
            )
            if before.account is not None and track.account != before.account:
                context.log.info(
                    f"{connector}: its lineage changed in Connect: {connector_lineage.describe(carried)} (was: "
                    f"{connector_lineage.describe(Account.from_dict(before.account))})"
                )
            if before.incarnation not in (None, track.incarnation) and track.incarnation is not None:
                context.log.warning(
                    f"{connector} was deleted and created again ({before.incarnation} -> {track.incarnation})"
                )
            closed = [*cursor.get(f"_closed/{connector}", [])][-50:]
            closed += [e.run.runId for e in events if e.eventType in (RunState.ABORT, RunState.FAIL, RunState.COMPLETE)]
            try:
                stale = [r for r in open_runs(lineage.marquez(), job) if r["id"] not in (track.run_id, *closed)]
            except MarquezError as exc:
                context.log.warning(f"cannot read {job.name}'s open runs from Marquez: {exc}")
                stale = []
            # other runs Marquez holds open (opened elsewhere, or a close that was lost) end before this tick's
            # events: Marquez 0.51 makes a run's end the job's current version, so no end may follow the opening
            # of the run that runs now (the outbox delivers a job's events in the order they were emitted)
            for run in stale:
                facets = connector_facets(job.name, status, None)
                emitter.emit(
                    builder.event(
                        job.name, RunState.ABORT, run["id"], engine=ENGINE, run_facets=facets, account=carried
                    )
                )
                context.log.info(f"{connector}: run {run['id']} was open beside the current one: closed")
                closed.append(run["id"])
            for event in events:
                emitter.emit(event)
                context.log.info(f"{connector}: {event.eventType.value} run {event.run.runId}")
            cursor[f"_closed/{connector}"] = closed[-50:]
            cursor[connector] = track.dump()

        def started_by(connector: str, key: dg.AssetKey) -> str:
            """Dagster run X when this instance's newest materialization of the connector's asset created this
            incarnation, else found running."""
            incarnation = created.get(connector)
            latest = context.instance.get_latest_materialization_event(key)
            meta = latest.asset_materialization.metadata if latest and latest.asset_materialization else {}
            if (
                incarnation
                and "connector_incarnation" in meta
                and meta["connector_incarnation"].value == incarnation.ref
            ):
                return f"Dagster run {latest.run_id}"
            return "found running (created outside this Dagster instance)" if incarnation else "unknown"

        def run_facts(connector: str, key: dg.AssetKey) -> dict[str, object]:
            track = Track.load(cursor.get(connector))
            incarnation = created.get(connector)
            return {
                "connector_incarnation": incarnation.ref if incarnation else "none",
                "started_by": started_by(connector, key),
                "openlineage/run_id": track.run_id or "none (no open run)",
            }

        def describe(connector: str) -> str:
            st = statuses.get(connector)
            return "not deployed" if st is None else f"{st.state}; tasks " + ",".join(t.state for t in st.tasks)

        def observed_lineage(connector: str) -> dict[str, str]:
            """What Connect says the connector reads and writes (a watched connector only)."""
            account = accounts.get(connector)
            return {"lineage/observed": connector_lineage.describe(account)} if account else {}

        def engine_state(connector: str) -> str:
            """One word for the asset checks: the connector's state, FAILED if a task failed, DELETED if gone."""
            st = statuses.get(connector)
            if st is None:
                return "DELETED"
            return "FAILED" if any(t.state == "FAILED" for t in st.tasks) else st.state

        try:
            offsets = end_offsets(kafka.connection(), ORDERS_TOPIC.name)
            dlq = sum(end_offsets(kafka.connection(), DLQ_TOPIC.name).values())
            lag = consumer_lag(
                kafka.connection(), ORDERS_TOPIC.name, sink_group(SINK_CONNECTOR, configs.get(SINK_CONNECTOR))
            )
        except KafkaUnavailable as exc:  # connector states (and their runs, already emitted) still count
            context.log.warning(str(exc))
            offsets, dlq, lag = {}, -1, None
        listed, unlisted = archive_listing(
            object_store.client(), pipeline_bucket(pipeline), archive_prefix, offsets, cursor.get(ARCHIVE_LISTING)
        )
        if unlisted:  # the connectors' states (and their runs, already emitted) still count
            context.log.warning(f"object store {object_store.endpoint}: {unlisted}")
        objects, size = listed["objects"], listed["bytes"]
        observations = [
            dg.AssetObservation(
                asset_key=topic_key,
                metadata={
                    # offsets, not records: each transaction Debezium commits (exactly-once source) ends with a
                    # marker that takes an offset; the conservation check on this asset counts the records
                    "offsets": sum(offsets.values()),
                    "last_offsets": json.dumps(offsets),
                    "connector": describe(SOURCE_CONNECTOR),
                    "state": engine_state(SOURCE_CONNECTOR),
                    "schema": schema_version or "not registered",
                    **run_facts(SOURCE_CONNECTOR, topic_key),
                    **observed_lineage(SOURCE_CONNECTOR),
                },
            ),
            dg.AssetObservation(
                asset_key=archive_key,
                metadata={
                    "objects": objects,
                    "bytes": size,
                    "sink_lag": lag if lag is not None else -1,
                    "dead_letters": dlq,
                    "connector": describe(SINK_CONNECTOR),
                    "state": engine_state(SINK_CONNECTOR),
                    **run_facts(SINK_CONNECTOR, archive_key),
                    **observed_lineage(SINK_CONNECTOR),
                },
            ),
        ]
        # a materialization when new objects are in the archive, or when the sink runs and has consumed all of
        # the topic: its freshness policy sees the archive current, and late once the sink stops or falls behind
        reason = None
        if objects > cursor.get(ARCHIVE_CURSOR, 0):
            reason = NEW_DATA
        elif engine_state(SINK_CONNECTOR) == "RUNNING" and lag == 0:
            latest = context.instance.get_latest_materialization_event(archive_key)
            if caught_up_materialization_due(latest.timestamp if latest else None, time.time(), fresh_minutes):
                reason = CAUGHT_UP
        if reason:
            facts = next(o.metadata for o in observations if o.asset_key == archive_key)
            materialization = dg.AssetMaterialization(asset_key=archive_key, metadata={**facts, REASON: reason})
            observations.append(materialization)
        materialized = [archive_key] if reason else []
        request = (
            latest_checks.request(context.instance, name, materialized, cursor, time.time()) if latest_checks else None
        )
        cursor[ARCHIVE_CURSOR] = objects
        cursor[ARCHIVE_LISTING] = listed
        return dg.SensorResult(
            asset_events=observations, run_requests=[request] if request else [], cursor=json.dumps(cursor)
        )

    return connector_sensor


def archive_listed(s3, bucket: str, prefix: str, partitions: dict[int, int], before: dict | None) -> dict:
    """The archive's objects and bytes, listed from where the previous tick stopped: keys grow with the offsets
    they start at, so each partition folder is listed after its last key only (a full listing costs pages x keys on
    s3proxy and grew past a tick at ~29k objects). An object deleted or replaced is not seen here: the
    ``conservation`` check reconciles the archive in full. Kafka not answering this tick (no partitions): the
    figures of the previous tick."""
    listed = {"after": {}, "objects": 0, "bytes": 0, **(before or {})}
    after = dict(listed["after"])
    for partition in sorted(partitions):
        folder = f"{prefix}partition={partition}/"
        start = after.get(str(partition), "")
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=folder, StartAfter=start):
            for obj in page.get("Contents", []):
                listed["objects"] += 1
                listed["bytes"] += obj["Size"]
                after[str(partition)] = obj["Key"]
    listed["after"] = after
    return listed


def archive_listing(
    s3, bucket: str, prefix: str, partitions: dict[int, int], before: dict | None
) -> tuple[dict, str | None]:
    """``archive_listed``, or, when the object store does not answer, the previous tick's figures and why: a tick
    that raised would lose the connectors' states and runs it reports too (the cursor is saved with the result)."""
    try:
        return archive_listed(s3, bucket, prefix, partitions, before), None
    except (BotoCoreError, ClientError) as exc:
        kept = {"after": {}, "objects": 0, "bytes": 0, **(before or {})}
        return kept, (
            f"the archive s3://{bucket}/{prefix} cannot be listed this tick ({exc.__class__.__name__}: {exc}); its "
            "figures are the previous tick's. Is the object store up (`lineage-lab stack status`)?"
        )


def pipeline_bucket(pipeline: Pipeline) -> str:
    """The archive bucket, from the archive dataset's identity (s3://<bucket>)."""
    return pipeline.dataset("archive_orders").namespace.removeprefix("s3://")
