"""The drift report as a Dagster job: fails on drift, and attaches the report and the picture either way."""

from pathlib import Path

import dagster as dg

from lineage_assets.checks import drift_report
from lineage_assets.connect.resource import ConnectResource
from lineage_assets.flink.resource import FlinkResource
from lineage_assets.kafka.resource import KafkaResource
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.lineage.marquez_client import MarquezError
from lineage_assets.lineage.resource import LineageResource


def build_verify_job(pipeline: Pipeline, picture: Path) -> dg.JobDefinition:
    """Marquez and the outbox come from the ``lineage`` resource; ``picture`` is the run configuration's default
    for where the picture goes."""

    @dg.op(
        description="Dagster's graph vs the lineage graph, tables and columns; fails on any drift",
        config_schema={"picture": dg.Field(str, default_value=str(picture), description="where the picture goes")},
    )
    def verify_lineage(
        context: dg.OpExecutionContext,
        lineage: LineageResource,
        flink: FlinkResource,
        connect: ConnectResource,
        kafka: KafkaResource,
    ) -> None:
        engines = drift_report.Engines(flink.client(), connect.client(), kafka.connection())
        try:
            report, picture = drift_report.verify_lineage(
                pipeline, lineage.marquez(), Path(lineage.outbox_path), Path(context.op_config["picture"]), engines
            )
        except MarquezError as exc:
            raise dg.Failure(f"cannot verify the lineage: {exc}") from exc
        context.log_event(
            dg.AssetObservation(
                asset_key=dg.AssetKey(["lineage", "verify_report"]),
                metadata={
                    "report": dg.MetadataValue.md(f"```\n{report.text()}\n```"),
                    "picture": dg.MetadataValue.path(str(picture)),
                    "differences": len(report.drift),
                },
            )
        )
        if not report.ok:
            raise dg.Failure(
                f"lineage drift: {len(report.drift)} difference(s); picture {picture}",
                metadata={"differences": dg.MetadataValue.md("\n".join(f"- {d}" for d in report.drift))},
            )

    @dg.job(description="Compare Dagster's graph with the lineage graph and draw it (also: `lineage-lab verify`)")
    def verify_lineage_job():
        verify_lineage()

    return verify_lineage_job
