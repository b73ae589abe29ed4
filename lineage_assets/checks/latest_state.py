"""Checks on the latest state of the streaming assets, evaluated in the sensor tick that records it.

The sensors record a materialization of a streaming asset every few minutes (new data, or caught up). A check run
on a schedule would evaluate an older one, so the asset page would show its checks as not executed for the latest
materialization most of the time. Instead the sensor that records a materialization evaluates that asset's checks
in the same tick and reports them right after it (check evaluations in its ``SensorResult``): the lineage checks
(a)-(f) against one read of the Marquez graph (and of the outbox) shared by every asset of the tick, for a job's
output the engine's account held to the declaration (engine_lineage.py), for a Flink job's output the
version-drift warning, and for a hop's output its ``conservation`` check (one look at the stores, no second look: a
tick must stay short, so a look that shows records lost or doubled is reported as a warning to confirm, and the
scheduled check run, which looks twice, fails). The cost is bounded: one graph read, one question to the engine and
one incremental reconciliation per asset, only in ticks that record a materialization.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import dagster as dg

from lineage_assets.checks.asset_checks import Replay, engine_now, lineage_results, read_graph
from lineage_assets.checks.conservation import CHECK as CONSERVATION
from lineage_assets.checks.conservation import checked_hops, observation_for, result_for
from lineage_assets.checks.engine_lineage import CHECK as ENGINE_LINEAGE
from lineage_assets.checks.engine_lineage import checked_jobs, readers
from lineage_assets.checks.engine_lineage import result_for as engine_result
from lineage_assets.connect.runs import ENGINE as CONNECT_ENGINE
from lineage_assets.conservation.hops import Hop
from lineage_assets.conservation.reconcile import BUSY, reconcile
from lineage_assets.conservation.statistics import statistics_event
from lineage_assets.conservation.stores import Stores
from lineage_assets.flink.runs import ENGINE as FLINK_ENGINE
from lineage_assets.flink.version_drift import CHECK, checkout_jobs, version_result
from lineage_assets.kafka.observed import observed_event_builder
from lineage_assets.lineage.account import Account, reportable
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.metadata import LatestStateChecks, asset_key

#: seconds a tick waits for another reconciliation of the same hop before leaving it to the next tick
LOCK_WAIT_S = 5.0
#: the materialization metadata entry that names the producing job's open OpenLineage run
RUN_ID = "openlineage/run_id"
ENGINES = {"FLINK": FLINK_ENGINE, "KAFKA_CONNECT": CONNECT_ENGINE}


def as_evaluation(
    result: dg.AssetCheckResult, key: dg.AssetKey, evaluated_by: str, check_name: str | None = None
) -> dg.AssetCheckEvaluation:
    """A check's result as a runless evaluation (what a sensor reports)."""
    return dg.AssetCheckEvaluation(
        asset_key=key,
        check_name=check_name or result.check_name,
        passed=result.passed,
        metadata={**result.metadata, "evaluated_by": evaluated_by},
        severity=result.severity,
        description=result.description,
    )


def build_latest_state_checks(pipeline: Pipeline, pending_warn_s: int, count_store: Path) -> LatestStateChecks:
    """``pending_warn_s`` and ``count_store``: as for the conservation checks (build_conservation_checks)."""
    datasets = {asset_key(ds): ds for ds in pipeline.datasets.values()}
    drift = {
        asset_key(pipeline.dataset(dataset)): (name, spec) for name, (spec, dataset) in checkout_jobs(pipeline).items()
    }
    hop_of = {asset_key(h.output): h for h in checked_hops(pipeline)}
    accounted = {asset_key(ds): name for name, ds in checked_jobs(pipeline).items()}

    def evaluate(
        instance: dg.DagsterInstance,
        sensor: str,
        materializations: Sequence[dg.AssetMaterialization],
        resources: Mapping[str, Any],
    ) -> list[dg.AssetCheckEvaluation | dg.AssetObservation]:
        """``resources``: the sensor's own (the engine it follows; the other one produces none of its assets)."""
        if not materializations:
            return []
        keys = [m.asset_key for m in materializations]
        run_ids = {m.asset_key: _text(m.metadata.get(RUN_ID)) for m in materializations}
        evaluated_by = f"sensor {sensor}, with the materialization it recorded"
        lineage = resources["lineage"]
        flink, connect = resources.get("flink"), resources.get("connect")
        graph, replay = read_graph(lineage, pipeline), Replay(lineage)
        flink_client = flink.client() if flink is not None else None
        connect_client = connect.client() if connect is not None else None
        evaluations: list[dg.AssetCheckEvaluation | dg.AssetObservation] = []
        for key in keys:
            ds = datasets[key]
            engine = engine_now(instance, key, pipeline.jobs.get(ds.producer), flink_client, connect_client)
            evaluations += [
                as_evaluation(result, key, evaluated_by)
                for result in lineage_results(lineage, ds, pipeline, engine, graph, replay)
            ]
            if key in drift and flink_client is not None:
                name, spec = drift[key]
                evaluations.append(as_evaluation(version_result(flink_client, name, spec), key, evaluated_by, CHECK))
            account: Account | None = None
            if key in accounted:
                job = pipeline.job(accounted[key])
                kafka = resources["kafka"].connection() if "kafka" in resources else None
                found = readers(pipeline, flink_client, connect_client, kafka, None)(job)
                evaluations.append(
                    as_evaluation(engine_result(pipeline, job, found), key, evaluated_by, ENGINE_LINEAGE)
                )
                account = reportable(pipeline, found)
            if key in hop_of:
                evaluations += conservation_events(hop_of[key], key, resources, evaluated_by, run_ids.get(key), account)
        return evaluations

    def conservation_events(
        hop: Hop,
        key: dg.AssetKey,
        resources: Mapping[str, Any],
        evaluated_by: str,
        run_id: str | None,
        account: Account | None,
    ) -> list[dg.AssetCheckEvaluation | dg.AssetObservation]:
        stores = Stores(pipeline, SimpleNamespace(**resources), count_store)
        (balance,) = reconcile(stores, [hop.job.name], confirm_after_s=0, lock_timeout=LOCK_WAIT_S)
        if balance.unknown.startswith(BUSY):
            return []  # a check run or the CLI is reconciling this hop now; the next tick evaluates it
        if run_id and "kafka" in resources:
            # the job's open run is told what the hop moved since the last tick that told it
            builder, _ = observed_event_builder(pipeline, resources["kafka"].registry())
            engine = ENGINES.get(hop.job.integration)
            event = statistics_event(
                builder, stores.counts, hop, run_id, balance, engine, confirmed=False, account=account
            )
            if event is not None:
                resources["lineage"].emitter().emit(event)
        result = result_for(balance, key, pending_warn_s, time.time())
        if balance.lost_or_doubled:
            # one look can fall between a job's output commit and its offsets commit: a warning until the check
            # run, which looks again at the next checkpoint, confirms it
            result = dg.AssetCheckResult(
                asset_key=key,
                check_name=CONSERVATION,
                passed=False,
                severity=dg.AssetCheckSeverity.WARN,
                description=f"to confirm (one look): {result.description}; the conservation check run looks "
                "again at the next checkpoint",
                metadata=result.metadata,
            )
        return [as_evaluation(result, key, evaluated_by), observation_for(balance, key)]

    return evaluate


def _text(value: object) -> str | None:
    """A metadata entry's text (None when absent or not a run id: "none ...")."""
    text = getattr(value, "value", value)
    return text if isinstance(text, str) and text and not text.startswith("none") else None
