"""Freshness as the stack's own Dagster daemon evaluates it: the supplier-stats Flink job deployed through the
stack's instance keeps kafka/supplier_stats fresh; cancelled, the flink sensor reports it CANCELED and materializes
its output no more, the output turns late (LINEAGE_LAB_STREAMING_FRESH_MINUTES, 2 in scripts/test.sh) only once its
last materialization is a window old (both read from the instance), its OpenLineage run ends ABORTED in Marquez,
and a redeployment makes it fresh again. Each state is waited for with a generous deadline; no duration is
asserted."""

from __future__ import annotations

import time

import dagster as dg
import pytest
from dagster._core.definitions.freshness import FreshnessState  # not exported by dagster yet

from infra.settings import StackSettings
from lineage_assets.definitions import build_definitions
from lineage_assets.flink.client import FlinkClient
from lineage_assets.lineage.marquez_client import MarquezClient
from lineage_assets.metadata import asset_key

defs = build_definitions(StackSettings.from_env())

#: the flink sensor's and the freshness daemon's intervals (30 s each), and slack for a loaded machine: scripts/test.sh
#: runs this module beside the Spark-heavy supplier_stats modules. A failure detector only, no duration is asserted
DAEMON_DELAY = 180.0


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


def flink_state(flink: FlinkClient, jid: str) -> str | None:
    job = next((j for j in flink.jobs() if j.jid == jid), None)
    return job.state if job else None


def observed_cancelled(instance, key: dg.AssetKey, jid: str) -> list[int]:
    """The storage ids of the observations of ``key`` in which the flink sensor reports job ``jid`` CANCELED (one
    per tick), oldest first."""
    found = []
    for record in instance.fetch_observations(key, limit=50).records:
        facts = {name: value.value for name, value in record.asset_observation.metadata.items()}
        if (facts.get("flink_job_id"), facts.get("state")) == (jid, "CANCELED"):
            found.append(record.storage_id)
    return sorted(found)


def materializations_after(instance, key: dg.AssetKey, storage_id: int) -> list[int]:
    records = instance.fetch_materializations(key, limit=20).records
    return [r.storage_id for r in records if r.storage_id > storage_id]


def wait_for(read, wanted, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    seen = read()
    while seen != wanted and time.monotonic() < deadline:
        time.sleep(5)
        seen = read()
    assert seen == wanted, f"{what}: still {seen} after {timeout:.0f} s"


@pytest.mark.timeout(1200)  # minutes in CI: the default service limit would leave too little room
def test_a_cancelled_flink_job_turns_its_output_late_within_the_window(settings, window, stack_instance, pipeline):
    key = asset_key(pipeline.dataset("kafka_supplier_stats"))
    deployed = deploy(stack_instance, pipeline)
    jid, run_id = deployed.metadata["flink_job_id"].value, deployed.metadata["openlineage/run_id"].value
    wait_for(lambda: state(stack_instance, key), FreshnessState.PASS, DAEMON_DELAY, "fresh once deployed")

    try:
        flink = FlinkClient(settings)
        flink.cancel(jid)
        wait_for(lambda: flink_state(flink, jid), "CANCELED", 60, f"Flink job {jid} cancelled")
        # two ticks of the flink sensor that report the job CANCELED: the first may still record the output's last
        # data (written before the cancel), none after it may materialize the output again
        wait_for(
            lambda: len(observed_cancelled(stack_instance, key, jid)) >= 2,
            True,
            2 * DAEMON_DELAY,
            f"two flink sensor ticks observing {jid} CANCELED",
        )
        second_tick = observed_cancelled(stack_instance, key, jid)[1]
        wait_for(
            lambda: state(stack_instance, key),
            FreshnessState.FAIL,
            window + DAEMON_DELAY,
            f"late within the {window:.0f} s window after the job was cancelled",
        )
        latest = stack_instance.get_latest_materialization_event(key)
        assert materializations_after(stack_instance, key, second_tick) == [], (
            "the sensor materialized the output of a job it had seen cancelled a tick before"
        )
        late = stack_instance.get_freshness_state_records([key])[key]
        assert late.updated_at.timestamp() >= latest.timestamp + window, (
            f"the daemon recorded FAIL at {late.updated_at}, before the last materialization "
            f"({latest.timestamp}) was {window:.0f} s old"
        )

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
