"""An ERROR check on each Flink job's asset: the cluster runs at most one job of that name.

Two jobs of one name write every output twice (each window fired twice, each row committed twice, each dead letter
sent twice) and fence each other's Kafka transactions. A deployment takes a lock and cancels its own job when it was
second (``deploy.submit``), but a job started by hand, from another host or by an old build can still make a second
copy. Conservation cannot see every such copy (a window's last firing carries the same count from both), so the
cluster's own job list decides: every job of the name in an active state, whoever started it.
"""

from __future__ import annotations

import datetime as dt

import dagster as dg

from lineage_assets.flink.client import ACTIVE, FlinkClient, FlinkError, FlinkJob
from lineage_assets.flink.deploy import started
from lineage_assets.flink.resource import FlinkResource
from lineage_assets.flink.version_drift import checkout_jobs
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.metadata import asset_key

CHECK = "flink_job_runs_once"


def _when(job: FlinkJob) -> str:
    return dt.datetime.fromtimestamp(job.start_time_ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def copies(jobs: list[FlinkJob], name: str, url: str) -> tuple[bool, str, list[str]]:
    """(passed, what to say, the active job ids oldest first) for the jobs a cluster at ``url`` lists."""
    active = sorted((j for j in jobs if j.name == name and j.state in ACTIVE), key=started)
    if len(active) <= 1:
        where = f"as Flink job {active[0].jid}" if active else "no job of that name is active"
        return True, f"{name} runs at most once on {url} ({where})", [j.jid for j in active]
    first, later = active[0], active[1:]
    listed = "; ".join(f"{j.jid} ({j.state}, started {_when(j)})" for j in active)
    return (
        False,
        f"{len(active)} Flink jobs named {name} are active on {url}: {listed}. Each writes every output again and "
        f"they fence each other's Kafka transactions. Keep the first ({first.jid}) and cancel the later ones "
        f"(`flink cancel {' '.join(j.jid for j in later)}`, or PATCH {url}/jobs/<id>?mode=cancel), then look at "
        "the conservation check for rows written twice",
        [j.jid for j in active],
    )


def runs_once_result(client: FlinkClient, name: str) -> dg.AssetCheckResult:
    """The check's result for ``name`` on ``client``'s cluster now; a cluster that does not answer is unknown (a
    warning that says so), never a pass."""
    try:
        jobs = client.jobs()
    except FlinkError as exc:
        return dg.AssetCheckResult(
            passed=False,
            severity=dg.AssetCheckSeverity.WARN,
            description=f"unknown: cannot ask Flink for its jobs: {exc}",
        )
    passed, text, active = copies(jobs, name, client.url)
    return dg.AssetCheckResult(
        passed=passed,
        severity=dg.AssetCheckSeverity.ERROR,
        description=text,
        metadata={"active_jobs": len(active), "flink_job_ids": ", ".join(active) or "none"},
    )


def build_runs_once_checks(pipeline: Pipeline) -> list[dg.AssetChecksDefinition]:
    return [_check(pipeline, name, dataset) for name, (_, dataset) in checkout_jobs(pipeline).items()]


def _check(pipeline: Pipeline, name: str, dataset: str) -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset=asset_key(pipeline.dataset(dataset)),
        name=CHECK,
        description=f"at most one {name} job is active on the Flink cluster (a second copy writes everything twice)",
    )
    def runs_once(flink: FlinkResource) -> dg.AssetCheckResult:
        return runs_once_result(flink.client(), name)

    return runs_once
