"""Checks on the latest state of the streaming assets, evaluated in the sensor tick that records it.

The sensors record a materialization of a streaming asset every few minutes (new data, or caught up). A check run
on a schedule would evaluate an older one, so the asset page would show its checks as not executed for the latest
materialization most of the time. Instead the sensor that records a materialization evaluates that asset's checks
in the same tick and reports them right after it (check evaluations in its ``SensorResult``): the lineage checks
(a)-(f) against one read of the Marquez graph shared by every asset of the tick, and for a Flink job's output the
version-drift warning. The cost is bounded: one graph read and one question to the engine per asset, only in ticks
that record a materialization.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import dagster as dg

from infra.settings import StackSettings
from lineage_assets.checks.asset_checks import engine_now, lineage_results, read_graph
from lineage_assets.flink.version_drift import CHECK, JOBS, version_result
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.metadata import asset_key
from lineage_assets.resources import ConnectResource, FlinkResource, LineageResource

#: what a sensor calls with the assets it materialized this tick: their check evaluations, to report after them
LatestStateChecks = Callable[
    [dg.DagsterInstance, str, Sequence[dg.AssetKey], LineageResource, FlinkResource | None, ConnectResource | None],
    list[dg.AssetCheckEvaluation],
]


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


def build_latest_state_checks(pipeline: Pipeline, settings: StackSettings) -> LatestStateChecks:
    datasets = {asset_key(ds): ds for ds in pipeline.datasets.values()}
    drift = {asset_key(pipeline.dataset(dataset)): (name, spec) for name, (spec, dataset) in JOBS.items()}

    def evaluate(
        instance: dg.DagsterInstance,
        sensor: str,
        keys: Sequence[dg.AssetKey],
        lineage: LineageResource,
        flink: FlinkResource | None,
        connect: ConnectResource | None,
    ) -> list[dg.AssetCheckEvaluation]:
        """``flink`` / ``connect``: the engine the sensor follows (the other one produces none of its assets)."""
        if not keys:
            return []
        evaluated_by = f"sensor {sensor}, with the materialization it recorded"
        graph = read_graph(lineage, pipeline)
        flink_client = flink.client(settings) if flink is not None else None
        connect_client = connect.client() if connect is not None else None
        evaluations: list[dg.AssetCheckEvaluation] = []
        for key in keys:
            ds = datasets[key]
            engine = engine_now(instance, key, pipeline.jobs.get(ds.producer), flink_client, connect_client)
            evaluations += [
                as_evaluation(result, key, evaluated_by)
                for result in lineage_results(lineage, ds, pipeline, engine, graph)
            ]
            if key in drift and flink_client is not None:
                name, spec = drift[key]
                evaluations.append(as_evaluation(version_result(flink_client, name, spec), key, evaluated_by, CHECK))
        return evaluations

    return evaluate
