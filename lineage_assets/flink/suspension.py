"""The pipeline's Flink jobs across a stop of the stack's cluster: `stack down` suspends them, `stack up` resumes
them, so no state is lost and nobody has to deploy again.

Suspending stops each pipeline job that runs on the stack's cluster with a savepoint (under the job name's folder,
where a deployment also finds it), closes its OpenLineage run (COMPLETE: the job finished at the savepoint) and
records how it ran: the program arguments and version the job carries in its own configuration. Resuming submits
each recorded job again from its savepoint with the code of this checkout; the job sensor then opens its new run.
Secrets are never recorded: they come from the environment again when the job is resumed.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

from flink_jobs import deployment
from infra.settings import StackSettings
from lineage_assets.flink import iceberg_ingestion_asset
from lineage_assets.flink.client import FlinkClient, FlinkError
from lineage_assets.flink.deploy import FlinkJobSpec, job_environment, submit
from lineage_assets.flink.job_lineage import read_account
from lineage_assets.flink.one_deployer import one_deployer
from lineage_assets.flink.runs import ENGINE, flink_run_id
from lineage_assets.flink.version_drift import checkout_jobs
from lineage_assets.kafka.observed import observed_event_builder
from lineage_assets.lineage.account import reportable
from lineage_assets.lineage.events import RunState
from lineage_assets.lineage.identity import Pipeline


def specs(pipeline: Pipeline) -> dict[str, FlinkJobSpec]:
    """The pipeline's Flink jobs (the identity module's), each with the code this checkout deploys for it."""
    return {name: spec for name, (spec, _) in checkout_jobs(pipeline).items()}


def suspended_file(settings: StackSettings) -> Path:
    return settings.data_dir / "flink" / "suspended.json"


#: the wired resources suspension uses (Kafka's registry and security, the Iceberg catalog, lineage); the caller (the
#: app's CLI, on top) opens them, since this module sits below the wiring
RESOURCE_KEYS = ("kafka", "iceberg", "lineage")


def suspend(settings: StackSettings, resources: SimpleNamespace, log: Callable[[str], None] = print) -> list[dict]:
    """Stop the pipeline's jobs running on the stack's own cluster with a savepoint and record them; an external
    cluster is left alone (the stack does not stop it)."""
    if settings.external_flink:
        return []
    client = FlinkClient(settings)
    try:
        client.jobs()
    except FlinkError:
        log("  flink: not reachable, no job suspended (their retained checkpoints remain for the next deploy)")
        return []
    pipeline = Pipeline.from_settings(settings)
    records = []
    builder, _ = observed_event_builder(pipeline, resources.kafka.registry())
    emitter = resources.lineage.emitter()
    for name in specs(pipeline):
        job = client.active(name)
        if job is None:
            continue
        config = client.user_config(job.jid)
        args = deployment.decode_args(config.get(deployment.ARGS, ""))
        try:
            savepoint = client.stop_with_savepoint(job.jid, name=name)
        except FlinkError as exc:
            log(f"  {name}: stop with savepoint failed, its retained checkpoint is the newest state: {exc}")
            continue
        run_id = flink_run_id(pipeline.job(name), job.jid, job.start_time_ms)
        account = reportable(pipeline, read_account(client, pipeline, name, job.jid))
        emitter.emit(
            builder.event(
                name, RunState.COMPLETE, run_id, event_time=dt.datetime.now(dt.UTC), engine=ENGINE, account=account
            )
        )
        records.append(
            {
                "name": name,
                "jid": job.jid,
                "version": config.get(deployment.VERSION),
                "args": args,
                "savepoint": savepoint,
            }
        )
        log(f"  {name}: job {job.jid} suspended with savepoint {savepoint}")
    if records:
        path = suspended_file(settings)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(records, indent=2))
    return records


def resume(settings: StackSettings, resources: SimpleNamespace, log: Callable[[str], None] = print) -> list[str]:
    """Start again, from their savepoints, the jobs `suspend` recorded; returns the errors (empty: all resumed).
    A job of that name that already runs is left as it is."""
    path = suspended_file(settings)
    if settings.external_flink or not path.exists():
        return []
    records = json.loads(path.read_text())
    client = FlinkClient(settings)
    known = specs(Pipeline.from_settings(settings))
    left, errors = [], []
    for record in records:
        try:
            with one_deployer(client, record["name"]):  # `stack up` and a Dagster run may both start it now
                error, keep = _resume_one(client, known, resources, record, log)
        except FlinkError as exc:  # the cluster did not answer, or another deployer held the job too long
            error, keep = f"{record['name']}: {exc}", True
        errors += [error] if error else []
        left += [record] if keep else []
    if left:
        path.write_text(json.dumps(left, indent=2))
    else:
        path.unlink()
    return errors


def _resume_one(
    client: FlinkClient, known: dict[str, FlinkJobSpec], resources: SimpleNamespace, record: dict, log
) -> tuple[str | None, bool]:
    """(the error, if any; whether the record is kept to resume again) of resuming one suspended job."""
    name, args = record["name"], record.get("args")
    running = client.active(name)
    if running is not None:
        log(f"  {name}: already runs as {running.jid}, not resumed")
        return None, False
    if args is None or name not in known:
        return f"{name}: its arguments are unknown (started by an older build); deploy it from Dagster", False
    spec = known[name]
    settings_part = str(record.get("version") or "").partition(".")[2] or "resumed"
    version = f"{spec.code_version()}.{settings_part}"
    env = job_environment(resources.kafka, resources.iceberg if name == iceberg_ingestion_asset.JOB else None)
    try:
        job = submit(client, spec, args, version, record["savepoint"], env=env)
    except FlinkError as exc:
        return f"{name}: resuming from {record['savepoint']} failed: {exc}", True
    log(f"  {name}: resumed from {record['savepoint']} as job {job.jid}")
    return None, False
