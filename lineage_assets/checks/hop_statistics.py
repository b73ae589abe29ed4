"""What a hop moved, told to its job's open OpenLineage run by the ``conservation`` check that reconciled it.

The run is the one named by the latest materialization of the hop's output (``openlineage/run_id``, recorded by the
sensor that follows the job). A run this project has ended already (its end is in the outbox) is left alone: a
RUNNING event would open it again in Marquez. The figures are the reconciliation's, which looks twice before
calling records lost or doubled, so the event carries its assertions too.
"""

from __future__ import annotations

import dagster as dg

from lineage_assets.checks.engine_lineage import readers
from lineage_assets.connect.runs import ENGINE as CONNECT_ENGINE
from lineage_assets.conservation.balance import HopBalance
from lineage_assets.conservation.count_store import CountStore
from lineage_assets.conservation.hops import Hop
from lineage_assets.conservation.statistics import statistics_event
from lineage_assets.flink.client import FlinkClient, FlinkError
from lineage_assets.flink.runs import ENGINE as FLINK_ENGINE
from lineage_assets.flink.runs import flink_run_id
from lineage_assets.kafka.observed import observed_event_builder
from lineage_assets.lineage.account import reportable
from lineage_assets.lineage.identity import Job, Pipeline

#: the materialization metadata entry that names the producing job's open OpenLineage run
RUN_ID = "openlineage/run_id"
ENGINES = {"FLINK": FLINK_ENGINE, "KAFKA_CONNECT": CONNECT_ENGINE}


def open_run_of(instance: dg.DagsterInstance, key: dg.AssetKey) -> str | None:
    """The OpenLineage run the latest materialization of ``key`` names (None: none, or "none ...")."""
    latest = instance.get_latest_materialization_event(key)
    materialization = latest.asset_materialization if latest else None
    value = materialization.metadata.get(RUN_ID) if materialization else None
    text = getattr(value, "value", value)
    return text if isinstance(text, str) and text and not text.startswith("none") else None


def running_flink_run(client: FlinkClient, job: Job) -> str | None:
    """The OpenLineage run of the deployment of ``job`` Flink runs now (None: none runs, or Flink did not answer)."""
    try:
        active = client.active(job.name)
    except FlinkError:
        return None
    return flink_run_id(job, active.jid, active.start_time_ms) if active is not None else None


def tell_open_run(
    instance: dg.DagsterInstance,
    pipeline: Pipeline,
    hop: Hop,
    key: dg.AssetKey,
    balance: HopBalance,
    counts: CountStore,
    resources,
) -> str:
    """Emit the RUNNING event with what ``hop`` moved since the last look that told its run; says what was done.
    ``resources``: ``lineage``, ``kafka``, ``flink``, ``connect`` (the engine's account of the job's datasets goes
    with the event, so it never puts the declaration back over what the engine says)."""
    if hop.job.processing_type != "STREAMING":
        return "no open run to tell: the job does not run forever"
    run_id = open_run_of(instance, key)
    if run_id is None:
        return "no open run to tell: the latest materialization names none"
    lineage = resources.lineage
    if lineage.outbox().ended(run_id):
        return f"run {run_id} has ended: not told"
    if hop.job.integration == "FLINK":
        now_running = running_flink_run(resources.flink.client(), hop.job)
        if now_running != run_id:
            # the engine is the truth: a deployment replaced since the materialization (its run ends on the sensor's
            # next tick) is never told again, or its RUNNING event would land after the new run began
            return f"run {run_id} is not the running deployment's ({now_running or 'none runs'}): not told"
    kafka = resources.kafka
    builder, _ = observed_event_builder(pipeline, kafka.registry())
    found = readers(pipeline, resources.flink.client(), resources.connect.client(), kafka.connection(), None)(hop.job)
    engine = ENGINES.get(hop.job.integration)
    event = statistics_event(builder, counts, hop, run_id, balance, engine, account=reportable(pipeline, found))
    if event is None:
        return f"run {run_id}: its period starts now (or the figures are unknown)"
    lineage.emitter().emit(event)
    return f"run {run_id} told what the hop moved"
