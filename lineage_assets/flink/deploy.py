"""Idempotent deployment of a PyFlink job to the session cluster, shared by the assets whose producer is a Flink
job: submit if not running, never a second copy, and a changed job (code or settings) redeployed from a savepoint
so it resumes where the old one stopped."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from flink_jobs import connections
from infra.artifacts import load_manifest
from infra.services.flink import ORDER_FUNCTIONS_BUNDLE
from infra.settings import REPO_ROOT, StackSettings
from lineage_assets.flink.client import FlinkClient
from lineage_assets.kafka.connection import KafkaConnection
from lineage_assets.kafka.topics import TopicSpec, dead_letter_capacity, end_offsets, ensure_topic, max_message_bytes
from lineage_assets.lineage.events import DagsterRun
from lineage_assets.resources import IcebergResource, KafkaResource

JOBS_DIR = REPO_ROOT / "flink_jobs"
#: modules the job scripts import, shipped with every submission
SHARED_MODULES = (JOBS_DIR / "connections.py",)
VERSION_PARAMETER = "lineage-lab.version"


@dataclass(frozen=True)
class FlinkJobSpec:
    name: str
    script: Path

    def version(self, settings: str) -> str:
        """What a deployment is: the job's code, the modules it imports, its JVM functions (the sources the
        flink-order-functions bundle is built from) and its settings."""
        digest = hashlib.sha256()
        for path in (self.script, *SHARED_MODULES):
            digest.update(path.read_bytes())
        digest.update(load_manifest()[ORDER_FUNCTIONS_BUNDLE].fingerprint.encode())
        digest.update(settings.encode())
        return digest.hexdigest()[:12]


@dataclass(frozen=True)
class Unchanged:
    """The job already runs this version; its open OpenLineage run (if recorded) is carried over."""

    jid: str
    version: str
    run_id: str | None


def check_running(
    context: dg.AssetExecutionContext, client: FlinkClient, spec: FlinkJobSpec, version: str, restore_from: str = ""
) -> tuple[Unchanged | None, str | None]:
    """(the running job when it is this version, else None; the savepoint to start from: the old version's, stopped
    for it, or ``restore_from`` when no job of that name runs on this cluster, e.g. a savepoint taken on another
    cluster the job moves from)."""
    running = client.active(spec.name)
    if running is None:
        if restore_from:
            context.log.info(f"{spec.name} does not run on {client.url}: starting it from {restore_from}")
        return None, restore_from or None
    if restore_from:
        context.log.warning(
            f"restore_from={restore_from} ignored: {spec.name} already runs on {client.url} ({running.jid}), so it "
            "continues from its own state"
        )
    deployed = client.user_config(running.jid).get(VERSION_PARAMETER)
    if deployed == version:
        previous = context.instance.get_latest_materialization_event(context.asset_key)
        meta = previous.asset_materialization.metadata if previous and previous.asset_materialization else {}
        run_id = meta["openlineage/run_id"].value if "openlineage/run_id" in meta else None
        return Unchanged(running.jid, version, run_id), None
    savepoint = client.stop_with_savepoint(running.jid)
    context.log.info(f"stopped {spec.name} {running.jid} (version {deployed}) with savepoint {savepoint}")
    return None, savepoint


def require_source_topic(kafka: KafkaConnection, topic: str, asset: str) -> None:
    """A clear failure, naming the asset that creates it, when the topic a job reads does not exist yet (a job
    deployed before its source would fail on the cluster instead, or the deployment on a raw Kafka error)."""
    if not end_offsets(kafka, topic):
        raise dg.Failure(f"topic {topic!r} does not exist at {kafka.bootstrap}: materialize {asset} first")


def ensure_dead_letter_topic(bootstrap: KafkaConnection | str, source_topic: str, spec: TopicSpec) -> list[str]:
    """Create (or resize) a job's dead-letter topic so that any record ``source_topic`` accepts fits in it whole with
    its reason, and return the job arguments that let the job's producer send one that large: a dead letter must
    never be what fails (and restarts) a job."""
    capacity = dead_letter_capacity(max_message_bytes(bootstrap, source_topic))
    ensure_topic(bootstrap, dataclasses.replace(spec, max_message_bytes=capacity))
    return ["--dlq-max-bytes", str(capacity)]


def order_rule_args(settings: StackSettings) -> list[str]:
    """The valid-order rule's settings, the same for both jobs (OrderRule of flink_jobs/order-functions)."""
    return ["--max-future-s", str(settings.order_max_future_s), "--max-past-s", str(settings.order_max_past_s)]


def job_environment(kafka: KafkaResource, iceberg: IcebergResource | None = None) -> dict[str, str]:
    """The secured clusters' client settings for the job's driver (flink_jobs/connections.py): in its environment,
    never in its arguments, so that no password shows in a process list or a log line."""
    env = {}
    java = kafka.connection().java_properties()
    if java:
        env[connections.KAFKA_PROPERTIES] = json.dumps(java)
    if kafka.schema_registry_user_info:
        env[connections.REGISTRY_USER_INFO] = kafka.schema_registry_user_info
    if iceberg is not None:
        env[connections.S3_ACCESS_KEY] = iceberg.access_key_id
        env[connections.S3_SECRET_KEY] = iceberg.secret_access_key
    if iceberg is not None and iceberg.token:
        env[connections.CATALOG_TOKEN] = iceberg.token
    if iceberg is not None and iceberg.credential:
        env[connections.CATALOG_CREDENTIAL] = iceberg.credential
    return env


def submit(
    client: FlinkClient,
    spec: FlinkJobSpec,
    args: list[str],
    version: str,
    savepoint: str | None,
    env: dict[str, str] | None = None,
) -> str:
    """Submit the job (from the savepoint if any); raises FlinkError with Flink's own message on failure."""
    return client.submit_python(
        str(spec.script),
        *args,
        "--version",
        version,
        py_files=tuple(str(p) for p in SHARED_MODULES),
        savepoint=savepoint,
        env=env,
    )


def deployed_by(context: dg.AssetExecutionContext) -> DagsterRun:
    """The Dagster run that deploys a job, for the dagster_run facet of the job's OpenLineage run (no parent
    facet: the streaming job outlives the run, and Marquez would rename the job after the parent)."""
    return DagsterRun(context.run.run_id, context.job_name, context.asset_key.to_user_string())


def unchanged_result(unchanged: Unchanged) -> dg.MaterializeResult:
    carried = {"openlineage/run_id": unchanged.run_id} if unchanged.run_id else {}
    return dg.MaterializeResult(
        metadata={"flink_job_id": unchanged.jid, "deployment": f"unchanged ({unchanged.version})", **carried}
    )


def deployment_text(version: str, savepoint: str | None) -> str:
    return f"{'redeployed from ' + savepoint if savepoint else 'submitted'} ({version})"
