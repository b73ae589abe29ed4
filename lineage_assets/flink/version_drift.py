"""A warning check on each Flink job's asset: the job that runs carries the code this checkout would deploy. An
older build left running (another instance deployed it, nobody redeployed after an upgrade) is named with both
versions; materializing the asset redeploys it from a savepoint."""

from __future__ import annotations

import dagster as dg

from flink_jobs.deployment import VERSION
from lineage_assets.flink import iceberg_ingestion_asset, supplier_stats_stream_asset
from lineage_assets.flink.client import ACTIVE, FlinkClient, FlinkError
from lineage_assets.flink.deploy import FlinkJobSpec, code_part
from lineage_assets.flink.resource import FlinkResource
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.metadata import asset_key

CHECK = "flink_job_version_current"
#: the code of each Flink job, by job name (each job module's spec); which jobs there are, and what each produces,
#: is the identity module's to say (``checkout_jobs``)
SPECS: dict[str, FlinkJobSpec] = {
    spec.name: spec for spec in (iceberg_ingestion_asset.SPEC, supplier_stats_stream_asset.SPEC)
}


def checkout_jobs(pipeline: Pipeline) -> dict[str, tuple[FlinkJobSpec, str]]:
    """Every Flink job of the identity module, by name, with the code this checkout deploys for it and the dataset
    it produces (the asset its check is on). A job without code here fails at load, not silently unchecked."""
    jobs = pipeline.flink_jobs()
    missing = [job.name for job in jobs if job.name not in SPECS]
    if missing:
        raise KeyError(f"Flink jobs {missing} of the identity module have no FlinkJobSpec in version_drift.SPECS")
    return {job.name: (SPECS[job.name], pipeline.output(job.name).key) for job in jobs}


def drift(spec: FlinkJobSpec, running_version: str | None, jid: str) -> tuple[bool, str]:
    """(passed, what to say) for a running job carrying ``running_version``."""
    mine = spec.code_version()
    if running_version is None:
        return False, (
            f"Flink job {jid} ({spec.name}) carries no deployment version: started by an older build or by hand. "
            f"This checkout deploys code {mine}; materialize the asset to redeploy it from a savepoint"
        )
    if code_part(running_version) != mine:
        return False, (
            f"Flink job {jid} ({spec.name}) runs code {code_part(running_version)} (version {running_version}); this "
            f"checkout would deploy code {mine}. Materialize the asset to redeploy it from a savepoint"
        )
    return True, f"Flink job {jid} runs the code this checkout deploys ({running_version})"


def version_result(client: FlinkClient, name: str, spec: FlinkJobSpec) -> dg.AssetCheckResult:
    """The check's result for the job of ``name`` running on ``client``'s cluster now."""
    try:
        current = client.current(name)
        version = client.user_config(current.jid).get(VERSION) if current and current.state in ACTIVE else None
    except FlinkError as exc:
        return dg.AssetCheckResult(
            passed=False, severity=dg.AssetCheckSeverity.WARN, description=f"cannot ask Flink: {exc}"
        )
    if current is None or current.state not in ACTIVE:
        return dg.AssetCheckResult(passed=True, description=f"no {name} job runs on {client.url}")
    passed, text = drift(spec, version, current.jid)
    return dg.AssetCheckResult(
        passed=passed,
        severity=dg.AssetCheckSeverity.WARN,
        description=text,
        metadata={"running_version": version or "none", "checkout_code": spec.code_version()},
    )


def build_version_drift_checks(pipeline: Pipeline) -> list[dg.AssetChecksDefinition]:
    return [_check(pipeline, name, spec, dataset) for name, (spec, dataset) in checkout_jobs(pipeline).items()]


def _check(pipeline: Pipeline, name: str, spec: FlinkJobSpec, dataset: str) -> dg.AssetChecksDefinition:
    key = asset_key(pipeline.dataset(dataset))

    @dg.asset_check(
        asset=key,
        name=CHECK,
        description=f"the running {name} job carries the code this checkout deploys (an older build warns)",
    )
    def version_current(flink: FlinkResource) -> dg.AssetCheckResult:
        return version_result(flink.client(), name, spec)

    return version_current
