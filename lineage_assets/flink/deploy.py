"""Idempotent deployment of a PyFlink job to the session cluster, shared by the assets whose producer is a Flink
job. The cluster is asked, not this Dagster instance's memory: a job of this version already running is adopted,
whoever started it (never a second copy); a changed job (code or settings) is redeployed from a savepoint so it
resumes where the old one stopped; a job that does not run starts from its newest savepoint or retained checkpoint,
and from its consumer group's committed offsets alone only on request.

``deploy_asset`` is the one factory of those assets: a job brings what differs (``FlinkDeployment``: its driver, its
dead-letter topic, whether the OpenLineage listener announces its runs, the steps before it is submitted and what
its materialization reports); the steps, the lineage and the metadata every deployment shares are written here."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg

from flink_jobs import connections, deployment
from infra.artifacts import load_manifest
from infra.services.flink import ORDER_FUNCTIONS_BUNDLE
from infra.settings import REPO_ROOT
from lineage_assets.flink.client import ACTIVE, FlinkClient, FlinkError, FlinkJob
from lineage_assets.flink.job_lineage import flink_account, read_account
from lineage_assets.flink.listener import ListenerLog, as_accounted
from lineage_assets.flink.one_deployer import one_deployer
from lineage_assets.flink.runs import ENGINE, FOUND_RUNNING, deployment_facets, flink_run_id, open_events
from lineage_assets.flink.state import mismatch, newest_state
from lineage_assets.freshness import streaming_output
from lineage_assets.kafka.connection import KafkaConnection
from lineage_assets.kafka.observed import observed_event_builder
from lineage_assets.kafka.resource import KafkaResource
from lineage_assets.kafka.topics import (
    TopicSpec,
    dead_letter_capacity,
    end_offsets,
    ensure_topic,
    has_committed_offsets,
    max_message_bytes,
)
from lineage_assets.lineage.account import Account, reportable
from lineage_assets.lineage.events import DagsterRun, EventBuilder, RunState, run_id_for
from lineage_assets.lineage.identity import Dataset, Job, Pipeline
from lineage_assets.lineage.outbox import LineageEmitter
from lineage_assets.metadata import asset_key, identity_metadata
from lineage_assets.storage import IcebergResource
from lineage_assets.tunables import PipelineTunables

JOBS_DIR = REPO_ROOT / "flink_jobs"
#: modules the job scripts import, shipped with every submission
SHARED_MODULES = (JOBS_DIR / "connections.py", JOBS_DIR / "deployment.py")
VERSION_PARAMETER = deployment.VERSION


@dataclass(frozen=True)
class FlinkJobSpec:
    name: str
    script: Path
    #: what a start from the consumer group's committed offsets alone loses (the job's state), for the warning
    lost_without_state: str = "the job's state"

    def code_version(self) -> str:
        """The job's code: its script, the modules it imports and its JVM functions (the sources the
        flink-order-functions bundle is built from)."""
        digest = hashlib.sha256()
        for path in (self.script, *SHARED_MODULES):
            digest.update(path.read_bytes())
        digest.update(load_manifest()[ORDER_FUNCTIONS_BUNDLE].fingerprint.encode())
        return digest.hexdigest()[:8]

    def version(self, settings: str) -> str:
        """What a deployment is: ``<code>.<settings>``, so an older build left running shows in the first part."""
        return f"{self.code_version()}.{hashlib.sha256(settings.encode()).hexdigest()[:6]}"


def code_part(version: str | None) -> str | None:
    return version.split(".", 1)[0] if version else None


@dataclass(frozen=True)
class Adopted:
    """A job of this name already runs this version: it is kept, whoever started it."""

    job: FlinkJob
    version: str
    #: "Dagster run <id>" when this instance deployed it, else runs.FOUND_RUNNING
    started_by: str
    #: whether this instance already sent the run's opening events (when it deployed or adopted it before)
    announced: bool = False


@dataclass(frozen=True)
class Start:
    """How a job that does not run (any more) starts: from this savepoint or checkpoint, or from offsets alone."""

    savepoint: str | None
    how: str


def deployed_here(instance: dg.DagsterInstance, key: dg.AssetKey, jid: str) -> str | None:
    """How Flink job ``jid`` started, as this instance's materialization of asset ``key`` that deployed or adopted it
    recorded (``Dagster run <id>``, or found running): that materialization also sent the run's opening events.
    None when no materialization of this instance names the job."""
    for record in instance.fetch_materializations(key, limit=20).records:
        materialization = record.asset_materialization
        meta = materialization.metadata if materialization else {}
        if "flink_job_id" in meta and meta["flink_job_id"].value == jid and "started_by" in meta:
            return str(meta["started_by"].value)
    return None


def check_running(
    context: dg.AssetExecutionContext,
    client: FlinkClient,
    spec: FlinkJobSpec,
    version: str,
    restore_from: str = "",
    on_stopped: Callable[[FlinkJob], None] | None = None,
) -> tuple[Adopted | None, str | None]:
    """(the running job when it is this version, else None; the savepoint to start from: the old version's, stopped
    for it, or ``restore_from`` when no job of that name runs on this cluster, e.g. a savepoint taken on another
    cluster the job moves from; None: see ``plan_start``). ``on_stopped`` hears of an old version stopped for the
    new one (its run ends before the new one opens, so Marquez's latest run of the job is the new one)."""
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
        here = deployed_here(context.instance, context.asset_key, running.jid) if context.asset_key else None
        if here is None or here == FOUND_RUNNING:
            context.log.info(
                f"{spec.name} already runs version {version} as Flink job {running.jid}, started outside this "
                "Dagster instance: adopted, not started twice"
            )
        return Adopted(running, version, here or FOUND_RUNNING, announced=here is not None), None
    savepoint = client.stop_with_savepoint(running.jid, name=spec.name)
    context.log.info(f"stopped {spec.name} {running.jid} (version {deployed}) with savepoint {savepoint}")
    if on_stopped is not None:
        on_stopped(running)
    return None, savepoint


def plan_start(
    context: dg.AssetExecutionContext,
    client: FlinkClient,
    spec: FlinkJobSpec,
    args: list[str],
    committed: bool,
    start_from_offsets: bool,
) -> Start:
    """Where a job that does not run starts from: its newest savepoint or retained checkpoint that belongs to the
    same data, else its consumer group's committed offsets, which lose its state: only when ``start_from_offsets``
    asks for it (with a warning), or when nothing was ever committed (a first start loses nothing)."""
    state = newest_state(client, spec.name)
    lost = f"starting from the committed offsets alone loses {spec.lost_without_state}"
    if state is not None:
        why = mismatch(state, args)
        if why is None:
            context.log.info(f"{spec.name} starts from its newest {state.source}: {state.path}")
            return Start(state.path, f"started from the newest {state.source}: {state.path}")
        if not start_from_offsets:
            raise dg.Failure(
                f"the newest state of {spec.name} ({state.source}, {state.path}) belongs to other data ({why}). "
                f"Restore a fitting savepoint with restore_from=PATH, or set start_from_offsets: true ({lost})."
            )
    elif committed and not start_from_offsets:
        raise dg.Failure(
            f"{spec.name} ran before (its consumer group has committed offsets), but no savepoint or retained "
            f"checkpoint of it is left on {client.url}. Restore one with restore_from=PATH, or set "
            f"start_from_offsets: true: {lost}."
        )
    if not committed:
        return Start(None, "first start (no earlier state, no committed offsets)")
    context.log.warning(f"{spec.name}: start_from_offsets requested: {lost}")
    return Start(None, f"started from the committed offsets on request ({lost})")


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


def order_rule_args(tunables: PipelineTunables) -> list[str]:
    """The valid-order rule's settings, the same for both jobs (OrderRule of flink_jobs/order-functions)."""
    return ["--max-future-s", str(tunables.order_max_future_s), "--max-past-s", str(tunables.order_max_past_s)]


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
) -> FlinkJob:
    """Submit the job (from the savepoint if any); raises FlinkError with Flink's own message on failure."""
    jid = client.submit_python(
        str(spec.script),
        *args,
        "--version",
        version,
        py_files=tuple(str(p) for p in SHARED_MODULES),
        savepoint=savepoint,
        env=env,
    )
    job = client.job(jid) or FlinkJob(jid, spec.name, "CREATED", int(dt.datetime.now(dt.UTC).timestamp() * 1000))
    try:
        # by the name Flink gives it: a deployment may name the job itself (iceberg-ingestion's --job-name)
        others = [j for j in client.named(job.name) if j.state in ACTIVE and j.jid != jid]
    except FlinkError:  # the job runs: the lock held this host's deployers apart, only another host's go unchecked
        return job
    first = min([job, *others], key=started)
    if first.jid != jid:  # another deployer (another host: ``one_deployer`` holds this one's) started it meanwhile
        client.cancel(jid)
        raise FlinkError(
            f"{job.name} was started meanwhile by another deployer as Flink job {first.jid}, so this deployment's "
            f"job {jid} was cancelled before it could write anything twice; materialize again to adopt {first.jid}"
        )
    return job


def started(job: FlinkJob) -> tuple[int, str]:
    """The order in which jobs started (the job id breaks a tie the same way for every deployer)."""
    return job.start_time_ms, job.jid


def adopt(
    adopted: Adopted, job: Job, builder: EventBuilder, emitter: LineageEmitter, client: FlinkClient
) -> dg.MaterializeResult:
    """The result of materializing a job that already runs this version: it is kept, and its run opened here unless
    this instance announced it before (an outside start it had not seen)."""
    run_id = flink_run_id(job, adopted.job.jid, adopted.job.start_time_ms)
    if not adopted.announced:
        account = reportable(builder.pipeline, read_account(client, builder.pipeline, job.name, adopted.job.jid))
        for event in open_events(
            job.name, run_id, adopted.job, adopted.version, FOUND_RUNNING, builder, account=account
        ):
            emitter.emit(event)
    return dg.MaterializeResult(
        metadata={
            "flink_job_id": adopted.job.jid,
            "state": adopted.job.state,
            "flink_version": adopted.version,
            "started_by": adopted.started_by,
            "deployment": f"unchanged: {adopted.job.jid} already runs {adopted.version}",
            "openlineage/run_id": run_id,
        }
    )


def deployed_by(context: dg.AssetExecutionContext) -> DagsterRun:
    """The Dagster run that deploys a job, for the dagster_run facet of the job's OpenLineage run (no parent
    facet: the streaming job outlives the run, and Marquez would rename the job after the parent)."""
    return DagsterRun(context.run.run_id, context.job_name, context.asset_key.to_user_string())


def closer(
    job: Job, builder: EventBuilder, emitter: LineageEmitter, dagster_run: DagsterRun, client: FlinkClient
) -> Callable[[FlinkJob], None]:
    """Closes (COMPLETE) the run of a job version that a deployment stopped with a savepoint to replace it, with
    that job's own account (Flink keeps a stopped job's configuration)."""

    def close(stopped: FlinkJob) -> None:
        run_id = flink_run_id(job, stopped.jid, stopped.start_time_ms)
        account = reportable(builder.pipeline, read_account(client, builder.pipeline, job.name, stopped.jid))
        emitter.emit(
            builder.event(job.name, RunState.COMPLETE, run_id, dagster_run=dagster_run, engine=ENGINE, account=account)
        )

    return close


@dataclass(frozen=True)
class Deploying:
    """One materialization of a Flink job's asset, as the job's own steps (``FlinkDeployment.prepare``) see it."""

    context: dg.AssetExecutionContext
    config: Any
    #: the asset's resources by key (``FlinkDeployment.resources``)
    resources: Any
    #: the dataset the job produces (the asset's)
    target: Dataset
    #: the topic the job reads (it exists: checked before the job's own steps)
    source_topic: str
    dead_letters: TopicSpec

    def dead_letter_args(self) -> list[str]:
        """Create (or resize) the job's dead-letter topic; returns the job arguments that go with it."""
        return ensure_dead_letter_topic(self.resources.kafka.connection(), self.source_topic, self.dead_letters)


@dataclass(frozen=True)
class Prepared:
    """What a job's own steps before the deployment decided."""

    #: what of its configuration decides its version, besides the valid-order rule and the dead-letter size
    version_parts: tuple[str, ...]
    #: its arguments, but for the valid-order rule's and the dead letters' (appended to every job's)
    args: tuple[str, ...]
    #: from Deploying.dead_letter_args, called where the job ensures its dead-letter topic among its own steps
    dead_letter_args: tuple[str, ...]
    #: the job's own metadata of a deployment, read once the job is submitted (e.g. the table's snapshot)
    report: Callable[[], dict[str, Any]]


@dataclass(frozen=True)
class FlinkDeployment:
    """What makes one Flink job's deploy asset: the parts that differ between jobs, as data (``deploy_asset``)."""

    spec: FlinkJobSpec
    #: the identity-module key of the dataset the job produces: the asset
    dataset: str
    consumer_group: str
    dead_letters: TopicSpec
    #: the asset's run configuration (a dg.Config with ``restore_from`` and ``start_from_offsets``)
    config: type[dg.Config]
    #: the description's parenthesis before "to topic <dead letters>": how the job works, what it dead-letters
    about: str
    kinds: frozenset[str]
    #: the asset's resources: kafka, lineage and flink, and iceberg for a job whose driver writes to the catalog
    resources: frozenset[str]
    #: the job's own steps before the deployment (creating its outputs, checking its configuration)
    prepare: Callable[[Deploying], Prepared]
    #: the OpenLineage Flink listener sends the run's START (configured in Flink's config) and Dagster a RUNNING
    #: with what the listener cannot know; else Dagster sends both
    listener: bool = False


def deploy_asset(pipeline: Pipeline, tunables: PipelineTunables, flink_job: FlinkDeployment) -> dg.AssetsDefinition:
    """The asset of ``flink_job``'s output: materializing deploys the job idempotently (see the module) and reports
    its OpenLineage run by manual orchestration (START and RUNNING once Flink accepted the job, under the run id of
    that Flink job, FAIL if the submit fails); the Flink job sensor ends the run."""
    target = pipeline.dataset(flink_job.dataset)
    job = pipeline.job(target.producer)
    (source_key,) = job.inputs
    source = pipeline.dataset(source_key)
    spec, dead_letters = flink_job.spec, flink_job.dead_letters

    def deploy(context: dg.AssetExecutionContext, config) -> dg.MaterializeResult:
        kafka, lineage = context.resources.kafka, context.resources.lineage
        require_source_topic(kafka.connection(), source.name, asset_key(source).to_user_string())
        client = context.resources.flink.client()
        prepared = flink_job.prepare(Deploying(context, config, context.resources, target, source.name, dead_letters))
        shared = " ".join([*order_rule_args(tunables), *prepared.dead_letter_args])
        version = spec.version("|".join([*prepared.version_parts, shared]))
        builder, _ = observed_event_builder(pipeline, kafka.registry())
        close_replaced = closer(job, builder, lineage.emitter(), deployed_by(context), client)
        with one_deployer(client, spec.name):  # from the look at the cluster until the new job is listed
            adopted, savepoint = check_running(context, client, spec, version, config.restore_from, close_replaced)
            if adopted is not None:
                return adopt(adopted, job, builder, lineage.emitter(), client)

            emitter = lineage.emitter()
            dagster_run = deployed_by(context)
            started_by = f"Dagster run {context.run.run_id}"
            listener = ListenerLog(client.listener_events_file())
            mark = listener.mark()
            args = [*prepared.args, *order_rule_args(tunables), *prepared.dead_letter_args]
            if client.checkpoint_dir(job.name):
                args += ["--checkpoint-dir", client.checkpoint_dir(job.name)]
            if savepoint:
                how = f"started from {savepoint}"
            else:
                committed = has_committed_offsets(kafka.connection(), source.name, flink_job.consumer_group)
                start = plan_start(context, client, spec, args, committed, config.start_from_offsets)
                savepoint, how = start.savepoint, start.how
            iceberg = context.resources.iceberg if "iceberg" in flink_job.resources else None
            try:
                submitted = submit(client, spec, args, version, savepoint, env=job_environment(kafka, iceberg))
            except FlinkError as exc:
                run_id = run_id_for(job.name, dt.datetime.now(dt.UTC), context.run.run_id)
                emitter.emit(
                    builder.event(job.name, RunState.FAIL, run_id, dagster_run=dagster_run, engine=ENGINE, error=exc)
                )
                raise dg.Failure(f"deploying the Flink job {job.name} failed: {exc}") from exc

        run_id = flink_run_id(job, submitted.jid, submitted.start_time_ms)
        announced: dict[str, Any] = {}
        # the listener writes while the client submits; a job that does not announce itself waits less for it
        from_listener = listener.events_for(submitted.jid, since=mark, wait_seconds=10 if flink_job.listener else 2)
        account = submitted_account(context, client, pipeline, job.name, submitted.jid, from_listener)
        announced["lineage/observed"] = account.reader
        if not flink_job.listener:
            opening = open_events(
                job.name, run_id, submitted, version, started_by, builder, dagster_run=dagster_run, account=account
            )
            for event in opening:
                emitter.emit(event)
        else:
            sent_by = announce_with_listener(
                context,
                job.name,
                from_listener,
                account,
                submitted,
                run_id,
                version,
                started_by,
                builder,
                emitter,
                dagster_run,
            )
            announced["openlineage/start_sent_by"] = sent_by
        return dg.MaterializeResult(
            metadata={
                "flink_job_id": submitted.jid,
                "state": submitted.state,
                "flink_version": version,
                "started_by": started_by,
                "deployment": how,
                "openlineage/run_id": run_id,
                **announced,
                **prepared.report(),
                "dead_letter_topic": dead_letters.name,
            }
        )

    # the run configuration is the job's own class: Dagster reads it from the parameter's annotation
    deploy.__annotations__.update(context=dg.AssetExecutionContext, config=flink_job.config)
    return dg.asset(
        key=asset_key(target),
        deps=[asset_key(pipeline.dataset(k)) for k in job.inputs],
        description=f"{target.description}. Materializing deploys the Flink job `{job.name}` ({flink_job.about} to "
        f"topic {dead_letters.name}).",
        kinds=set(flink_job.kinds),
        owners=["team:data-platform"],
        group_name="streaming",
        metadata=identity_metadata(pipeline, target),
        freshness_policy=streaming_output(tunables.streaming_fresh_minutes),
        required_resource_keys=set(flink_job.resources),
    )(deploy)


def submitted_account(
    context: dg.AssetExecutionContext,
    client: FlinkClient,
    pipeline: Pipeline,
    name: str,
    jid: str,
    from_listener: list[dict],
) -> Account:
    """The account of the job just submitted (its listener events, its configuration), or the declaration standing
    in for it, saying why (logged as a warning)."""
    try:
        config = client.user_config(jid)
    except FlinkError as exc:
        config = {}
        context.log.warning(f"{name}: Flink job {jid}'s configuration cannot be read: {exc}")
    found = flink_account(pipeline, name, jid, from_listener, config, str(client.listener_events_file()), client.url)
    if not isinstance(found, Account):
        context.log.warning(f"{name}: the engine's account of its lineage is unknown: {found.reason}")
    return reportable(pipeline, found)


def announce_with_listener(
    context: dg.AssetExecutionContext,
    name: str,
    from_listener: list[dict],
    account: Account,
    submitted: FlinkJob,
    run_id: str,
    version: str,
    started_by: str,
    builder: EventBuilder,
    emitter: LineageEmitter,
    dagster_run: DagsterRun,
) -> str:
    """Open the run of a job the OpenLineage Flink listener reports: its START (sent while the job was submitted)
    goes on with the job's account (the listener's datasets as the identity module spells them), under the run id
    every emitter derives for this Flink job, and a RUNNING adds what the listener cannot know (schemas, column
    lineage, dataSource, the Dagster run). Without a listener event Dagster sends both, with a warning. Returns who
    sent the START."""
    if any(e.get("eventType") == "START" for e in from_listener):
        for event in from_listener:
            forwarded = as_accounted(event, builder, name, account)
            emitter.emit({**forwarded, "run": {**event["run"], "runId": run_id}})
        facets = deployment_facets(submitted.jid, version, started_by)
        emitter.emit(
            builder.event(
                name,
                RunState.RUNNING,
                run_id,
                dagster_run=dagster_run,
                engine=ENGINE,
                run_facets=facets,
                account=account,
            )
        )
        return "OpenLineage Flink listener"
    context.log.warning(
        f"the OpenLineage Flink listener sent no START for {submitted.jid} (is it configured in Flink's config?); "
        "Dagster sends it instead"
    )
    accounted = {"dagster_run": dagster_run, "account": account}
    for event in open_events(name, run_id, submitted, version, started_by, builder, **accounted):
        emitter.emit(event)
    return "Dagster (no listener event)"
