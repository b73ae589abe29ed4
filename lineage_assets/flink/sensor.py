"""The Flink job sensor: observes iceberg-ingestion (state, last checkpoint, Iceberg snapshot and row count),
records a materialization per new Iceberg snapshot (so freshness works), and closes the job's OpenLineage run the
moment the job stops running."""

import datetime as dt
import json

import dagster as dg

from infra.settings import StackSettings
from lineage_assets.flink.assets import JOB
from lineage_assets.flink.client import FlinkClient, FlinkError
from lineage_assets.flink.runs import close_run
from lineage_assets.lineage.events import EventBuilder
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.metadata import asset_key
from lineage_assets.resources import IcebergResource, LineageResource


def build_flink_job_sensor(pipeline: Pipeline, settings: StackSettings) -> dg.SensorDefinition:
    target = pipeline.dataset("iceberg_orders")
    key = asset_key(target)

    @dg.sensor(
        name="flink_job_sensor",
        minimum_interval_seconds=30,
        description=f"State, checkpoints and Iceberg snapshots of the Flink job {JOB}; closes its OpenLineage run "
        "(ABORT, FAIL or COMPLETE) when the job stops, is lost, or the cluster goes away.",
        default_status=dg.DefaultSensorStatus.STOPPED,
    )
    def flink_job_sensor(
        context: dg.SensorEvaluationContext, iceberg: IcebergResource, lineage: LineageResource
    ) -> dg.SensorResult | dg.SkipReason:
        latest = context.instance.get_latest_materialization_event(key)
        meta = latest.asset_materialization.metadata if latest and latest.asset_materialization else {}
        if "flink_job_id" not in meta or "openlineage/run_id" not in meta:
            return dg.SkipReason(f"{JOB} has not been deployed from Dagster yet (materialize {key.to_user_string()})")
        jid, run_id = meta["flink_job_id"].value, meta["openlineage/run_id"].value
        cursor = json.loads(context.cursor) if context.cursor else {"closed": [], "snapshot": None}

        client = FlinkClient(settings)
        try:
            job = client.job(jid)
            state = job.state if job else "GONE"
        except FlinkError as exc:
            context.log.warning(f"Flink unreachable, treating job {jid} as gone: {exc}")
            state = "GONE"
        if run_id not in cursor["closed"]:
            cause = client.failure_cause(jid) if state == "FAILED" else None
            event = close_run(JOB, run_id, state, EventBuilder(pipeline), dt.datetime.now(dt.UTC), cause)
            if event is not None:
                lineage.emitter().emit(event)
                cursor["closed"] = [*cursor["closed"][-50:], run_id]
                context.log.info(f"{JOB} job {jid} is {state}: run {run_id} closed with {event.eventType.value}")

        table = iceberg.catalog().load_table(target.symlinks[0].name)
        snapshot = table.current_snapshot()
        rows = int(snapshot.summary.get("total-records", 0)) if snapshot and snapshot.summary else 0
        checkpoint = client.last_checkpoint(jid) if state not in ("GONE",) else None
        facts = {
            "flink_job_id": jid,
            "state": state,
            "last_checkpoint": f"{checkpoint['id']} at {checkpoint['latest_ack_timestamp']}" if checkpoint else "none",
            "iceberg/snapshot_id": str(snapshot.snapshot_id) if snapshot else "none",
            "dagster/row_count": rows,
        }
        events: list = [dg.AssetObservation(asset_key=key, metadata=facts)]
        if snapshot and str(snapshot.snapshot_id) != cursor.get("snapshot"):
            # a new Iceberg commit is new data: a materialization, so freshness policies see it
            events.append(dg.AssetMaterialization(asset_key=key, metadata={**facts, "openlineage/run_id": run_id}))
            cursor["snapshot"] = str(snapshot.snapshot_id)
        return dg.SensorResult(asset_events=events, cursor=json.dumps(cursor))

    return flink_job_sensor
