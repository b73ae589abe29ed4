"""Freshness as the stack's own Dagster daemon evaluates it: the supplier-stats Flink job deployed through the
stack's instance keeps kafka/supplier_stats fresh; cancelled, its output turns late within the declared window
(LINEAGE_LAB_STREAMING_FRESH_MINUTES, 2 in scripts/test.sh), its OpenLineage run ends ABORTED in Marquez, and a
redeployment makes it fresh again."""

from __future__ import annotations

import time

import dagster as dg
import pytest
from dagster._core.definitions.freshness import FreshnessState  # not exported by dagster yet

from lineage_assets.definitions import defs
from lineage_assets.flink.client import FlinkClient
from lineage_assets.lineage.marquez import MarquezClient
from lineage_assets.metadata import asset_key

#: the flink sensor's and the freshness daemon's intervals (30 s each), and slack for a loaded machine
DAEMON_DELAY = 90.0


@pytest.fixture(scope="module")
def window(settings) -> float:
    if settings.streaming_fresh_minutes > 5:
        pytest.skip(
            f"the stack's freshness window is {settings.streaming_fresh_minutes} min: start the stack with "
            "LINEAGE_LAB_STREAMING_FRESH_MINUTES=2 (scripts/test.sh does) to see it turn late in test time"
        )
    return settings.streaming_fresh_minutes * 60.0


def deploy(instance, pipeline) -> dg.AssetMaterialization:
    keys = [asset_key(pipeline.dataset(k)) for k in ("source_orders", "kafka_orders", "kafka_supplier_stats")]
    result = dg.materialize(
        [*defs.assets],
        selection=dg.AssetSelection.assets(*keys),
        resources=defs.resources,
        instance=instance,
        tags={"lineage-lab/step": "test_freshness deploy"},
        raise_on_error=False,
    )
    assert result.success
    (materialization,) = result.asset_materializations_for_node("kafka__supplier_stats")
    return materialization


def state(instance, key: dg.AssetKey) -> FreshnessState | None:
    record = instance.get_freshness_state_records([key]).get(key)
    return record.freshness_state if record else None


def wait_for(read, wanted, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    seen = read()
    while seen != wanted and time.monotonic() < deadline:
        time.sleep(5)
        seen = read()
    assert seen == wanted, f"{what}: still {seen} after {timeout:.0f} s"


def test_a_cancelled_flink_job_turns_its_output_late_within_the_window(settings, window, stack_instance, pipeline):
    key = asset_key(pipeline.dataset("kafka_supplier_stats"))
    deployed = deploy(stack_instance, pipeline)
    jid, run_id = deployed.metadata["flink_job_id"].value, deployed.metadata["openlineage/run_id"].value
    wait_for(lambda: state(stack_instance, key), FreshnessState.PASS, DAEMON_DELAY, "fresh once deployed")

    try:
        FlinkClient(settings).cancel(jid)
        cancelled = time.time()
        wait_for(
            lambda: state(stack_instance, key),
            FreshnessState.FAIL,
            window + DAEMON_DELAY,
            f"late within the {window:.0f} s window after the job was cancelled",
        )
        late_after = time.time() - cancelled
        latest = stack_instance.get_latest_materialization_event(key)
        assert latest.timestamp < cancelled + 35, (
            "a cancelled job's output is not materialized again (one tick at most)"
        )
        assert late_after >= window - 35, f"late after {late_after:.0f} s: before the {window:.0f} s window was over"

        job = pipeline.job("supplier-stats")
        marquez = MarquezClient(settings.marquez_url)
        wait_for(
            lambda: {r["id"]: r["state"] for r in marquez.runs(job.namespace, job.name, limit=5)}.get(run_id),
            "ABORTED",
            60,
            f"the Marquez run {run_id} of the cancelled job",
        )
    finally:
        deploy(stack_instance, pipeline)  # later tests find the job running again, and so does the freshness status
    wait_for(lambda: state(stack_instance, key), FreshnessState.PASS, DAEMON_DELAY, "fresh again once redeployed")
